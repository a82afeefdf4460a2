"""Environment ids live in Gymnasium's registry under the ``agentgspo/`` namespace.

``import agentgspo`` registers the bundled environments, after which ``gymnasium.make("agentgspo/Calculator-v0")``
works; :func:`make` does the same with an error that lists close matches for a mistyped id.

An env may register the turn and context budget its tasks need (:class:`EnvBudget`); ``agentgspo rollout`` and the
recipes use it unless told otherwise (:func:`env_budget`).

Ids of another form than a registration's name (a server URL: ``http://host:port``) are resolved by an
:class:`EnvIdResolver` that the package owning the form registers under the prefixes that mark it
(:func:`register_id_resolver`; ``agentgspo.environments.interop`` registers OpenEnv server URLs and fleets), named by
entry point and imported when such an id is first used: the registry imports none of them.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

import gymnasium as gym

from agentgspo.core.errors import AgentGSPOError

NAMESPACE = "agentgspo"


class UnknownEnvError(gym.error.NameNotFound, LookupError, AgentGSPOError):
    """No env is registered under the requested id."""


class UnknownEnvKwargError(TypeError, ValueError, AgentGSPOError):
    """A keyword argument the env's constructor does not accept (a ``ValueError`` too: it is bad input)."""


@dataclass(frozen=True)
class EnvBudget:
    """What one episode of an env needs to be finished by a policy that solves it.

    Attributes:
        max_turns: assistant turns per episode.
        max_new_tokens: ids per assistant turn.
        max_context: ids per trajectory (prompt, env messages and sampled turns together).

    Counted in the embedded tiny policy's ids (one per character, a few per tool-call keyword), so an upper bound
    for a subword tokenizer on the same text; a reasoning model that thinks before it acts needs more.
    """

    max_turns: int
    max_new_tokens: int
    max_context: int

    def __post_init__(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"EnvBudget.{name}: expected an int >= 1, got {value!r}")
        if self.max_new_tokens >= self.max_context:
            raise ValueError(
                f"EnvBudget: max_new_tokens ({self.max_new_tokens}) must be below max_context "
                f"({self.max_context}), which also holds the prompt"
            )


_BUDGETS: dict[str, EnvBudget] = {}


def register(env_id: str, entry_point: str | Any, *, budget: EnvBudget | None = None, **kwargs: Any) -> None:
    """Register ``env_id`` (which must start with ``agentgspo/`` or another namespace) with Gymnasium.

    ``entry_point`` is ``"module:Class"`` (imported only when the env is made) or a callable. ``budget`` is the
    turn and context budget an episode needs (:func:`env_budget` returns it); other keyword arguments go to
    ``gymnasium.register``.
    """
    if "/" not in env_id:
        raise ValueError(f"env id {env_id!r}: expected a namespaced id like '{NAMESPACE}/{env_id}'")
    if budget is not None and not isinstance(budget, EnvBudget):
        raise TypeError(
            f"register({env_id!r}): budget must be an agentgspo.environments.registry.EnvBudget, got "
            f"{type(budget).__name__}"
        )
    if env_id in gym.registry:
        return  # idempotent: importing twice must not warn
    gym.register(id=env_id, entry_point=entry_point, **kwargs)
    if budget is not None:
        _BUDGETS[env_id] = budget


@dataclass(frozen=True)
class EnvIdResolver:
    """How env ids of one form other than a registered name (a server URL, a fleet's env servers) are played.

    Attributes:
        resolve: ``(env_id, kwargs) -> (gymnasium id, kwargs)`` that make it.
        budget: the :class:`EnvBudget` such an env reports, or ``None``.
        capacity: how many of its episodes may be played at once, or ``None`` for no limit.
    """

    resolve: Callable[[str, dict[str, Any]], tuple[str, dict[str, Any]]]
    budget: Callable[[str], EnvBudget | None]
    capacity: Callable[[str], int | None]


_ID_RESOLVERS: dict[tuple[str, ...], str] = {}  # prefixes -> "module:attribute" of an EnvIdResolver


def register_id_resolver(prefixes: tuple[str, ...], entry_point: str) -> None:
    """Resolve env ids starting with any of ``prefixes`` with the :class:`EnvIdResolver` at ``entry_point``
    (``"module:attribute"``, imported when such an id is first used)."""
    if not prefixes or not all(isinstance(p, str) and p for p in prefixes):
        raise ValueError(f"register_id_resolver: prefixes must be non-empty strings, got {prefixes!r}")
    module, _, attribute = entry_point.partition(":")
    if not module or not attribute:
        raise ValueError(f"register_id_resolver: entry_point must be 'module:attribute', got {entry_point!r}")
    _ID_RESOLVERS[tuple(prefixes)] = entry_point


def id_resolver(env_id: str) -> EnvIdResolver | None:
    """The resolver of ``env_id``'s form (a server URL, ...), or ``None`` for a registered name."""
    for prefixes, entry_point in _ID_RESOLVERS.items():
        if env_id.startswith(prefixes):
            resolver = EntryPoint("id_resolver", entry_point, "agentgspo.env_ids").load()
            if not isinstance(resolver, EnvIdResolver):
                raise TypeError(f"env id resolver {entry_point!r} is a {type(resolver).__name__}, not an EnvIdResolver")
            return resolver
    return None


def env_budget(env_id: str) -> EnvBudget | None:
    """The budget registered with ``env_id``, or ``None`` when it registered none; for a server URL (or a fleet's
    env servers, ``fleet:MANIFEST[#GROUP]``), the budget its ``agentgspo env-server`` reports (``None`` from another
    OpenEnv server)."""
    resolver = id_resolver(env_id)
    return resolver.budget(env_id) if resolver else _BUDGETS.get(env_id)


def episode_capacity(env_id: str) -> int | None:
    """How many episodes of ``env_id`` may be played at once: an ``agentgspo env-server`` URL's session limit (a
    fleet's env server group: the sum of its servers'), else ``None`` (no limit: local envs, and OpenEnv servers,
    which do not say)."""
    resolver = id_resolver(env_id)
    return resolver.capacity(env_id) if resolver else None


def resolve(env_id: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The Gymnasium id and keyword arguments that make ``env_id``: itself (``module:id`` imports the module, which
    registers the id, and gives the id), or what its :class:`EnvIdResolver` says (a server URL, ``http://host:port``
    of an ``agentgspo env-server`` or any OpenEnv server, or a fleet's env servers, ``fleet:MANIFEST[#GROUP]``: plays
    ``openenv/Remote-v0`` with ``kwargs`` as the env's keyword arguments, which must be those the server plays
    with)."""
    resolver = id_resolver(env_id)
    if resolver:
        return resolver.resolve(env_id, kwargs)
    module, _, bare = env_id.rpartition(":")
    if module:  # Gymnasium's "module:id": the module registers the id
        importlib.import_module(module)
    return bare, kwargs


def registered_ids(namespace: str | None = NAMESPACE) -> list[str]:
    """Ids registered under ``namespace`` (all ids when ``None``)."""
    return sorted(i for i in gym.registry if namespace is None or i.startswith(namespace + "/"))


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` with a clear error naming close matches for an unknown id; a server URL as ``env_id``
    plays the env it serves (:func:`resolve`)."""
    env_id, kwargs = resolve(env_id, kwargs)

    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        known = ", ".join(registered_ids())
        raise UnknownEnvError(
            f"unknown env id {env_id!r}.{hint} Registered agentgspo envs: {known}. "
            "Register your own with agentgspo.register('agentgspo/Name-v0', entry_point='module:Class')."
        )
    check_env_kwargs(env_id, kwargs)
    return gym.make(env_id, **kwargs)


def accepted_env_kwargs(env_id: str) -> list[str] | None:
    """The keyword arguments ``make(env_id, ...)`` accepts: the env constructor's, following ``**kwargs`` up its
    base classes, and ``gymnasium.make``'s own; ``None`` when any keyword goes (a constructor that ends in
    ``**kwargs`` nobody names)."""
    import inspect

    spec = gym.spec(env_id)
    creator = spec.entry_point
    if isinstance(creator, str):
        creator = gym.envs.registration.load_env_creator(creator)
    names = [n for n in inspect.signature(gym.make).parameters if n not in ("id", "kwargs")]
    chain = list(inspect.getmro(creator)) if inspect.isclass(creator) else [creator]
    for owner in chain:
        function = owner.__init__ if inspect.isclass(owner) else owner
        if inspect.isclass(owner) and "__init__" not in vars(owner):
            continue
        parameters = list(inspect.signature(function).parameters.values())
        names += [
            p.name for p in parameters if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return sorted(set(names))
        if owner is gym.Env or not inspect.isclass(owner):
            return None
    return None


def check_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Raise :class:`UnknownEnvKwargError` naming the first keyword ``env_id`` does not accept, close matches and
    the accepted keywords."""
    accepted = accepted_env_kwargs(env_id)
    if accepted is None:
        return
    for key in kwargs:
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownEnvKwargError(
                f"env {env_id} accepts no keyword argument {key!r}.{hint} It accepts: {', '.join(accepted)}"
            )
