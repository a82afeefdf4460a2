"""The asynchronous correction, composed onto any objective: clip against pi_prox, weigh each unit by pi_prox / mu.

For asynchronous training the sampler's policy mu is up to S versions stale (AReaL's decoupled objective, Fu et al.,
arXiv 2505.24298; ``shared/ASYNC.md``). The decoupled form of an objective takes the proximal policy's log-probs
(pi_prox: the learner's weights at the start of the step, one no-grad forward) where the objective takes
``old_logprobs``, so its ratio and clip are against pi_prox; each unit's term is then weighed by the constant
behaviour weight

    w = exp( mean over the weight unit's trained tokens of (log pi_prox - log mu) )     (a geometric mean; no grad)
    w' = min(w, tis_cap)                                       correction="tis"  (truncated importance sampling)
    w' = w if mask_low <= w <= mask_high, else 0               correction="mask" (the geometric mask)
    J  = the objective's aggregation of  w'_u * J_u  over its units u

before the objective's own aggregation (:func:`weigh_by_behaviour`), so one correction serves every objective that
exposes per-unit terms. The weight's unit is the objective's ``weight_unit`` (the sequence for GSPO and GSPO-token,
the turn for GSPO-turn, the token for GRPO). Under either correction a unit whose log-weight is not finite (a NaN or
infinite behaviour log-prob: a broken sampler) is dropped, never capped. A masked unit still counts in N (and a
masked turn in its trajectory's K_i): the estimate stays the paper's mean over sampled responses. With
``mu == pi_prox`` (w = 1) the decoupled form equals the objective, value and gradient, bit for bit.

Diagnostics added (weighed across micro-batches by the count of the weight's unit, :func:`behaviour_diagnostics`):

============================  ================================================================================
``behaviour_kl``               mean over trained tokens of ``|log pi_prox - log mu|`` (weight: ``num_tokens``),
                               over the tokens where it is finite
``behaviour_weight_mean``      mean w before truncation or mask over the weight's units whose log w is finite
                               (``_min``, ``_max``)
``behaviour_truncated_frac``   ``"tis"``: share of those units whose (finite) w exceeded ``tis_cap``
``behaviour_masked_frac``      ``"mask"``: share of those units whose w fell outside the band (dropped), the
                               non-finite ones included
``behaviour_nonfinite_frac``   share of those units dropped because log w was NaN or infinite (either correction)
============================  ================================================================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import torch

from agentgspo.objective.registry import Objective, ObjectiveError
from agentgspo.objective.terms import SEQUENCE, TOKEN, TURN, ClipUnit, ObjectiveResult, Terms, aggregate, ratio_stats

__all__ = [
    "BEHAVIOUR_TIS_CAP",
    "BEHAVIOUR_MASK",
    "BEHAVIOUR_FRACTIONS",
    "BEHAVIOUR_NONFINITE",
    "BehaviourCorrection",
    "Decoupled",
    "decoupled",
    "weigh_by_behaviour",
    "behaviour_diagnostics",
]

# The behaviour weight's corrections, written here once (shared/ASYNC.md, SkyRL's off-policy corrections): the cap of
# truncated importance sampling on a sequence's weight (SkyRL's sequence TIS: 5.0; its token TIS uses 2.0), and the
# band of the geometric sequence mask (SkyRL recommends it first: [0.99, 1.01]).
BEHAVIOUR_TIS_CAP = 5.0
BEHAVIOUR_MASK = (0.99, 1.01)
# The diagnostic each correction reports: the share of weight units it truncated or masked.
BEHAVIOUR_FRACTIONS = {"tis": "behaviour_truncated_frac", "mask": "behaviour_masked_frac"}
# The diagnostic both report: the share of weight units dropped because their weight was not a finite number.
BEHAVIOUR_NONFINITE = "behaviour_nonfinite_frac"


@dataclass(frozen=True)
class BehaviourCorrection:
    """How a behaviour weight w becomes w': ``"tis"`` truncates it at ``tis_cap``, ``"mask"`` keeps it where
    ``mask_low <= w <= mask_high`` and drops the unit elsewhere."""

    correction: Literal["tis", "mask"]
    tis_cap: float = BEHAVIOUR_TIS_CAP
    mask_low: float = BEHAVIOUR_MASK[0]
    mask_high: float = BEHAVIOUR_MASK[1]

    def __post_init__(self) -> None:
        if self.correction not in BEHAVIOUR_FRACTIONS:
            raise ValueError(f"correction: expected one of {sorted(BEHAVIOUR_FRACTIONS)}, got {self.correction!r}")


def weigh_by_behaviour(
    terms: Terms, behaviour_logprobs: torch.Tensor, unit: ClipUnit, correction: BehaviourCorrection
) -> tuple[Terms, dict[str, torch.Tensor]]:
    """``terms`` with each unit's objective weighed by its corrected behaviour weight w' (``unit``: what one weight
    covers; a sequence's weight is broadcast over its tokens), and the behaviour diagnostics. ``terms.inputs.old_logp``
    is pi_prox; ``behaviour_logprobs`` ``[B, T]`` is mu, the sampler's (``Batch.sampler_logprobs``). They must be the
    learner's quantity (:func:`agentgspo.core.trajectory.sampler_logprobs_mismatch`): log-probs renormalised over a
    top-p nucleus make w < 1 for every sequence."""
    inputs = terms.inputs
    gap = _behaviour_gap(inputs.old_logp, behaviour_logprobs, inputs.mask)  # [B, T], log pi_prox - log mu
    if unit is SEQUENCE:
        seq_len = inputs.sequence_lengths()  # [B]
        log_weight, valid = gap.sum(dim=-1) / seq_len.clamp(min=1), seq_len > 0  # [B], log w_i
    elif unit is TURN:
        if terms.turns is None:
            raise ValueError("a per-turn behaviour weight needs turn terms (an objective with the turn as its unit)")
        log_weight, valid = terms.turns.mean(gap), terms.turns.has_tokens  # [B, K], log w_ik
    elif unit is TOKEN:
        log_weight, valid = gap, inputs.mask  # [B, T], log w_it
    else:
        raise ValueError(f"behaviour weight: unknown unit {unit.name!r}; expected sequence, turn or token")
    weight = _behaviour_weight(log_weight, valid, correction)
    return dataclasses.replace(terms, objective=weight.apply(terms.objective)), weight.diagnostics(gap, inputs.mask)


def behaviour_diagnostics(unit: ClipUnit, correction: str) -> tuple[tuple[str, str], ...]:
    """The behaviour diagnostics and how micro-batches combine them, as :attr:`Objective.diagnostics` says it."""
    shares = tuple((name, unit.count) for name in ("behaviour_weight_mean", BEHAVIOUR_FRACTIONS[correction]))
    return (
        ("behaviour_kl", "num_tokens"),
        *shares,
        (BEHAVIOUR_NONFINITE, unit.count),
        ("behaviour_weight_min", "min"),
        ("behaviour_weight_max", "max"),
    )


@dataclass(frozen=True)
class Decoupled:
    """An objective with the asynchronous correction composed onto it: called like the objective with pi_prox in
    ``old_logprobs``'s place, plus ``behaviour_logprobs`` (mu) and the correction's settings."""

    objective: Objective

    @property
    def name(self) -> str:
        """The objective's name."""
        return self.objective.name

    @property
    def unit(self) -> ClipUnit:
        """What one of the objective's terms covers."""
        return self.objective.unit

    @property
    def weight_unit(self) -> ClipUnit:
        """What one behaviour weight covers."""
        return self.objective.weight_unit

    @property
    def diagnostics(self) -> tuple[tuple[str, str], ...]:
        """The objective's own diagnostics (the behaviour ones: :func:`behaviour_diagnostics`)."""
        return self.objective.diagnostics

    @property
    def hyper(self) -> Any:
        """The objective's hyperparameters and their defaults."""
        return self.objective.hyper

    def __call__(
        self,
        logprobs: torch.Tensor,
        prox_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        loss_mask: torch.Tensor,
        turn_ids: torch.Tensor | None = None,
        *,
        behaviour_logprobs: torch.Tensor,
        correction: Literal["tis", "mask"],
        tis_cap: float = BEHAVIOUR_TIS_CAP,
        mask_low: float = BEHAVIOUR_MASK[0],
        mask_high: float = BEHAVIOUR_MASK[1],
        num_sequences: int | float | torch.Tensor | None = None,
        **hyper: Any,
    ) -> ObjectiveResult:
        """The objective's loss with each unit's term weighed by its corrected behaviour weight, and its
        diagnostics followed by the behaviour ones."""
        settings = BehaviourCorrection(correction, tis_cap, mask_low, mask_high)
        terms = self.objective.terms_of(logprobs, prox_logprobs, advantages, loss_mask, turn_ids, **hyper)
        weighed, behaviour = weigh_by_behaviour(terms, behaviour_logprobs, self.weight_unit, settings)
        loss, diagnostics = aggregate(weighed, num_sequences)
        return ObjectiveResult(loss, {**diagnostics, **behaviour})


def decoupled(objective: Objective) -> Decoupled:
    """``objective`` under the asynchronous correction; an objective without per-unit terms is an error naming it."""
    if objective.terms is None or objective.weight_unit is None:
        raise ObjectiveError(
            f"objective {objective.name!r} has no per-unit terms for the behaviour correction to weigh (a plain "
            "function): train it with behaviour_correction='none', or register its terms with @objective"
        )
    return Decoupled(objective)


def _behaviour_gap(prox_logp: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log pi_prox - log mu`` per token ``[B, T]``, 0 at masked positions (selected before any arithmetic, as in
    ``Inputs.of``); a constant. ``prox_logp`` is already selected and upcast."""
    if behaviour_logprobs.shape != prox_logp.shape:
        raise ValueError(
            f"expected behaviour_logprobs of the log-probs' shape {tuple(prox_logp.shape)}, got "
            f"{tuple(behaviour_logprobs.shape)}"
        )
    behaviour = torch.where(mask, behaviour_logprobs.detach().to(prox_logp.dtype), 0.0)  # [B, T]
    return prox_logp - behaviour  # [B, T]


@dataclass(frozen=True)
class _BehaviourWeight:
    """The behaviour weights over the weight's units (sequences, turns or tokens: any shape ``[...]``), detached."""

    raw: torch.Tensor  # [...], w = pi_prox / mu before truncation or mask
    weight: torch.Tensor  # [...], w', what multiplies a kept unit's term (0 where dropped)
    kept: torch.Tensor  # [...] bool, False where the unit is dropped (out of the mask's band, or not finite)
    corrected: torch.Tensor  # [...] bool, trained units that were truncated or masked
    finite: torch.Tensor  # [...] bool, units whose log w is a finite number
    valid: torch.Tensor  # [...] bool, units with trained tokens
    fraction: str  # the diagnostic holding the corrected share

    def apply(self, objective: torch.Tensor) -> torch.Tensor:
        """``w' * objective`` per unit, broadcast over ``objective``'s trailing dims (a sequence's weight over its
        tokens); a dropped unit's term is selected to 0, and its weight was selected to 0 before the product, so
        neither an overflowed term nor a NaN weight reaches the value or the gradient (0 * NaN = NaN)."""
        shape = (*self.weight.shape, *(1,) * (objective.dim() - self.weight.dim()))  # [...] and a 1 per extra dim
        return torch.where(self.kept.reshape(shape), self.weight.reshape(shape) * objective, 0.0)  # objective's shape

    def diagnostics(self, gap: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """``behaviour_kl`` over trained tokens whose gap is finite (``gap``: ``log pi_prox - log mu``, 0 where
        ``mask`` is 0), the raw weight's mean/min/max over the units whose log w is finite, the truncated or masked
        share and the non-finite share over the weight's units."""
        with torch.no_grad():
            units = self.valid.sum().to(self.raw.dtype)  # []
            scored = mask & torch.isfinite(gap)  # [B, T]
            return {
                "behaviour_kl": torch.where(scored, gap.abs(), 0.0).sum() / scored.sum().to(gap.dtype).clamp(min=1),
                **ratio_stats(self.raw, self.valid & self.finite, name="behaviour_weight"),
                self.fraction: self.corrected.sum() / units.clamp(min=1),
                BEHAVIOUR_NONFINITE: (self.valid & ~self.finite).sum() / units.clamp(min=1),
            }


def _behaviour_weight(log_weight: torch.Tensor, valid: torch.Tensor, settings: BehaviourCorrection) -> _BehaviourWeight:
    """The behaviour weight ``w = exp(log_weight)`` of each unit and its correction. Either correction drops a unit
    whose ``log_weight`` is NaN or infinite: a behaviour log-prob that is not a number says nothing about w, so
    truncating an infinite w to C would train on a broken sampler's sample at full weight. (An overflowed exp of a
    finite log w, over 88.7 in fp32, is a true large weight and is truncated.) ``valid``: units with trained tokens."""
    log_weight = log_weight.detach()  # [...]
    finite = torch.isfinite(log_weight)  # [...]
    raw = torch.exp(log_weight)  # [...]
    if settings.correction == "tis":
        truncated = finite & (raw > settings.tis_cap)  # [...]
        capped = torch.where(finite, torch.where(truncated, settings.tis_cap, raw), 0.0)  # [...], 0 where dropped
        corrected = truncated & valid  # [...]
        return _BehaviourWeight(raw, capped, finite, corrected, finite, valid, BEHAVIOUR_FRACTIONS["tis"])
    kept = finite & (raw >= settings.mask_low) & (raw <= settings.mask_high)  # [...]
    weight = torch.where(kept, raw, 0.0)  # [...], 0 where dropped
    return _BehaviourWeight(raw, weight, kept, ~kept & valid, finite, valid, BEHAVIOUR_FRACTIONS["mask"])
