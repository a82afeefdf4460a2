"""The objectives by name: ``OBJECTIVES[name](logprobs, old_logprobs, advantages, loss_mask, **hyper)``.

An objective is one module and one registration. Decorate the function that computes its per-unit terms::

    @dataclass(frozen=True)
    class MyHyper:
        eps_low: float = 0.2
        eps_high: float = 0.28

    @objective("my_objective", unit=TOKEN, hyper=MyHyper())
    def my_objective(inputs: Inputs, advantages: torch.Tensor, hyper: MyHyper) -> Terms:
        ...

and ``OBJECTIVES["my_objective"]`` trains with it: the terms are aggregated by their unit
(:func:`agentgspo.objective.terms.aggregate`), the asynchronous correction composes with them
(:mod:`agentgspo.objective.correction`), and the learner logs the diagnostics the objective declares. A plain
function with the shared signature, ``fn(logprobs, old_logprobs, advantages, loss_mask, *, num_sequences=None)``
returning the loss (or ``(loss, diagnostics)``), is taken as a sequence-unit objective with no diagnostics.

Where objectives come from (:func:`load_objective`): the built-ins (``gspo``, ``gspo_turn``, ``gspo_token``,
``grpo``, registered when :mod:`agentgspo.objective` is imported), ``package.module:name`` (imported with the
current directory first on ``sys.path``, as ``accelerate launch my_script.py`` finds the script's neighbours), and
the ``agentgspo.objectives`` entry-point group of installed packages (``name = "package.module:attr"``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import torch

from agentgspo.core.errors import AgentGSPOError
from agentgspo.objective.terms import SEQUENCE, TOKEN, TURN, ClipUnit, Inputs, ObjectiveResult, Terms, aggregate
from agentgspo.objective.terms import clip_diagnostics as _clip_diagnostics

__all__ = [
    "OBJECTIVES",
    "ENTRY_POINT_GROUP",
    "Objective",
    "NoHyperparameters",
    "ObjectiveError",
    "objective",
    "register",
    "load_objective",
    "Hyperparameter",
    "hyperparameters",
]

ENTRY_POINT_GROUP = "agentgspo.objectives"

#: Every clip fraction an objective of each unit reports by default, in the order a trainer logs them.
DEFAULT_REPORTS = {SEQUENCE: (SEQUENCE, TOKEN), TURN: (TURN, SEQUENCE, TOKEN), TOKEN: (SEQUENCE, TOKEN)}


class ObjectiveError(ValueError, AgentGSPOError):
    """An objective that cannot be found, loaded or called as asked; the message names it and the fix."""


@dataclass(frozen=True)
class NoHyperparameters:
    """The hyperparameters of an objective that has none."""


@dataclass(frozen=True, eq=False)
class Objective:
    """A registered objective: its per-unit terms (or, for a plain function, its whole loss) and what it declares.

    ``unit``: what one term (one ratio, one clip decision) covers. ``hyper``: an instance of the objective's
    hyperparameter dataclass holding its defaults; the call's keywords are its field names. ``diagnostics``: the
    diagnostics it reports and how micro-batches combine them (``(name, count)`` weighs by that count, ``"min"`` /
    ``"max"`` keep the extreme); nothing else is required of it. ``weight_unit``: what one behaviour weight of the
    asynchronous correction covers (None: the correction does not compose, e.g. a plain function). ``origin``:
    ``package.module:name`` for an objective loaded by name, which a run records and resume loads again.
    """

    name: str
    unit: ClipUnit
    hyper: Any = NoHyperparameters()
    terms: Callable[[Inputs, torch.Tensor, Any], Terms] | None = None
    whole: Callable[..., Any] | None = None
    diagnostics: tuple[tuple[str, str], ...] = ()
    weight_unit: ClipUnit | None = None
    origin: str = ""

    def hyperparameters(self, **given: Any) -> Any:
        """The hyperparameter dataclass with ``given`` over the defaults; a name the objective does not declare is
        an error naming the ones it does."""
        fields = [field.name for field in dataclasses.fields(self.hyper)]
        unknown = sorted(set(given) - set(fields))
        if unknown:
            raise ObjectiveError(
                f"objective {self.name!r} has no hyperparameter {', '.join(unknown)}; it takes {fields or 'none'}"
            )
        return dataclasses.replace(self.hyper, **given)

    def terms_of(
        self,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        loss_mask: torch.Tensor,
        turn_ids: torch.Tensor | None = None,
        **hyper: Any,
    ) -> Terms:
        """The per-unit terms before aggregation (what the asynchronous correction weighs)."""
        if self.terms is None:
            raise ObjectiveError(
                f"objective {self.name!r} is a plain function that computes its loss whole: it has no per-unit terms "
                "to weigh (decorate its terms with agentgspo.objective.registry.objective to compose corrections)"
            )
        if self.unit is TURN and turn_ids is None:
            raise ObjectiveError(f"objective {self.name!r} has the turn as its unit: pass turn_ids [B, T]")
        inputs = Inputs.of(logprobs, old_logprobs, loss_mask, turn_ids)
        terms = self.terms(inputs, advantages, self.hyperparameters(**hyper))
        if terms.unit is not self.unit:
            raise ObjectiveError(
                f"objective {self.name!r} declares unit {self.unit.name} but returned {terms.unit.name}"
            )
        return terms

    def __call__(
        self,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        loss_mask: torch.Tensor,
        turn_ids: torch.Tensor | None = None,
        *,
        num_sequences: int | float | torch.Tensor | None = None,
        **hyper: Any,
    ) -> ObjectiveResult:
        """``loss = -J`` and the diagnostics for log-probs ``[B, T]`` under the current policy (with grad) and the
        old policy (constants), advantages (``[B]``, or per turn / token as the objective takes them) and a
        ``loss_mask`` ``[B, T]``; ``num_sequences`` is N of the per-trajectory mean (see
        :mod:`agentgspo.objective.terms`), ``turn_ids`` each trained token's turn (turn-unit objectives)."""
        if self.terms is None:
            values = dataclasses.asdict(self.hyperparameters(**hyper))
            turns = () if turn_ids is None else (turn_ids,)
            return _as_result(
                self.whole(
                    logprobs, old_logprobs, advantages, loss_mask, *turns, num_sequences=num_sequences, **values
                ),
                self,
            )
        return aggregate(self.terms_of(logprobs, old_logprobs, advantages, loss_mask, turn_ids, **hyper), num_sequences)

    def __repr__(self) -> str:
        return f"Objective({self.name!r}, unit={self.unit.name}{', from ' + self.origin if self.origin else ''})"


def _as_result(value: Any, objective: Objective) -> ObjectiveResult:
    """A plain function's return value as an ObjectiveResult: a 0-dim loss tensor, or ``(loss, diagnostics)``."""
    loss, diagnostics = value if isinstance(value, tuple) else (value, {})
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or not isinstance(diagnostics, dict):
        raise ObjectiveError(
            f"objective {objective.name!r} returned {type(value).__name__}: expected a 0-dim loss tensor or "
            "(loss, diagnostics dict)"
        )
    return ObjectiveResult(loss, diagnostics)


#: Every objective by name (the built-ins register when agentgspo.objective is imported).
OBJECTIVES: dict[str, Objective] = {}


def register(found: Objective) -> Objective:
    """Add ``found`` to :data:`OBJECTIVES`; a name taken by another objective is an error naming both."""
    taken = OBJECTIVES.get(found.name)
    if taken is not None and taken is not found and _defined_at(taken) != _defined_at(found):
        raise ObjectiveError(
            f"objective {found.name!r} is already registered (from {_defined_at(taken)}); give "
            f"{_defined_at(found)} another name"
        )
    OBJECTIVES[found.name] = found
    return found


def _defined_at(found: Objective) -> str:
    code = found.terms or found.whole
    return found.origin or f"{getattr(code, '__module__', '?')}:{getattr(code, '__qualname__', '?')}"


def objective(
    name: str,
    *,
    unit: ClipUnit,
    hyper: Any = NoHyperparameters(),
    reports: tuple[ClipUnit, ...] | None = None,
    weight_unit: ClipUnit | None = None,
) -> Callable[[Callable[[Inputs, torch.Tensor, Any], Terms]], Objective]:
    """Register the decorated terms function ``fn(inputs, advantages, hyper) -> Terms`` as objective ``name``.

    ``unit``: SEQUENCE, TURN or TOKEN. ``hyper``: an instance of the objective's hyperparameter dataclass with its
    defaults. ``reports``: the clip fractions it reports (default: its unit's, ``DEFAULT_REPORTS``; ``()`` for an
    objective that does not clip). ``weight_unit``: what one behaviour weight covers under the asynchronous
    correction (default: ``unit``; GSPO-token clips per token but weighs per sequence).
    """
    if unit not in DEFAULT_REPORTS:
        raise ObjectiveError(f"objective {name!r}: unit must be SEQUENCE, TURN or TOKEN, got {unit!r}")
    if not dataclasses.is_dataclass(hyper) or isinstance(hyper, type):
        raise ObjectiveError(f"objective {name!r}: hyper must be a dataclass instance holding the defaults")
    declared = DEFAULT_REPORTS[unit] if reports is None else tuple(reports)

    def declare(terms: Callable[[Inputs, torch.Tensor, Any], Terms]) -> Objective:
        return register(
            Objective(
                name,
                unit,
                hyper,
                terms=terms,
                diagnostics=_clip_diagnostics(unit, declared),
                weight_unit=weight_unit or unit,
            )
        )

    return declare


@dataclass(frozen=True)
class Hyperparameter:
    """One hyperparameter name across the objectives that declare it: its type, its help (the field's ``help``
    metadata) and each objective's default. A trainer makes it one setting (``--eps-low``)."""

    name: str
    kind: Any
    help: str
    defaults: dict[str, Any]


def hyperparameters(objectives: Iterable[Objective] | None = None) -> dict[str, Hyperparameter]:
    """The union of the hyperparameters of ``objectives`` (default: every registered one), by name; one name
    declared with two types is an error naming both objectives."""
    found: dict[str, Hyperparameter] = {}
    for candidate in OBJECTIVES.values() if objectives is None else objectives:
        kinds = typing.get_type_hints(type(candidate.hyper))
        for declared in dataclasses.fields(candidate.hyper):
            default = getattr(candidate.hyper, declared.name)
            known = found.get(declared.name)
            if known is None:
                help_text = declared.metadata.get("help", "")
                found[declared.name] = Hyperparameter(declared.name, kinds[declared.name], help_text, {})
            elif known.kind != kinds[declared.name]:
                first = next(iter(known.defaults))
                raise ObjectiveError(
                    f"hyperparameter {declared.name!r} is {known.kind} in objective {first!r} but "
                    f"{kinds[declared.name]} in {candidate.name!r}: one name is one setting; rename one of them"
                )
            found[declared.name].defaults[candidate.name] = default
    return found


def load_objective(name: str) -> Objective:
    """The objective ``name``: registered already, ``package.module:attr``, or an ``agentgspo.objectives`` entry
    point. Errors name what was tried and the fix."""
    if name in OBJECTIVES:
        return OBJECTIVES[name]
    if ":" in name:
        return _load(name, name)
    found = [point for point in entry_points(group=ENTRY_POINT_GROUP) if point.name == name]
    if found:
        return _load(found[0].value, name)
    raise ObjectiveError(
        f"objective: unknown {name!r}; expected one of {sorted(OBJECTIVES)}, a 'package.module:name' of your own "
        f"(imported from the current directory first), or an installed {ENTRY_POINT_GROUP!r} entry point"
    )


def _load(spec: str, name: str) -> Objective:
    """Import ``package.module:attr`` (current directory first on sys.path) and register what it names."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ObjectiveError(f"objective {name!r}: expected 'package.module:name', got {spec!r}")
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ObjectiveError(
            f"objective {name!r}: cannot import {module_name!r} ({exc}); run from the folder that holds it, or "
            "install its package"
        ) from exc
    found = getattr(module, attr, None)
    if isinstance(found, Objective):
        objective = dataclasses.replace(found, origin=spec) if not found.origin else found
    elif callable(found):
        objective = _plain(found, spec)
    else:
        raise ObjectiveError(
            f"objective {name!r}: {module_name} has no objective or function named {attr!r}"
            + ("" if found is None else f" (found {type(found).__name__})")
        )
    OBJECTIVES[name] = objective
    return objective


def _plain(function: Callable[..., Any], spec: str) -> Objective:
    """A plain function with the shared signature as a sequence-unit objective with no diagnostics."""
    parameters = inspect.signature(function).parameters
    if "num_sequences" not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        raise ObjectiveError(
            f"objective {spec!r}: a plain function objective takes (logprobs, old_logprobs, advantages, loss_mask, "
            "*, num_sequences=None): N of the per-trajectory mean, which gradient accumulation needs"
        )
    return Objective(spec, SEQUENCE, whole=function, origin=spec)
