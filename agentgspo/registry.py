"""Environment ids live in Gymnasium's registry under the ``agentgspo/`` namespace.

``import agentgspo`` registers the bundled environments, after which ``gymnasium.make("agentgspo/Calculator-v0")``
works; :func:`make` does the same with an error that lists close matches for a mistyped id.
"""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium as gym

NAMESPACE = "agentgspo"


class UnknownEnvError(gym.error.NameNotFound, LookupError):
    """No env is registered under the requested id."""


def register(env_id: str, entry_point: str | Any, **kwargs: Any) -> None:
    """Register ``env_id`` (which must start with ``agentgspo/`` or another namespace) with Gymnasium.

    ``entry_point`` is ``"module:Class"`` (imported only when the env is made) or a callable.
    """
    if "/" not in env_id:
        raise ValueError(f"env id {env_id!r}: expected a namespaced id like '{NAMESPACE}/{env_id}'")
    if env_id in gym.registry:
        return  # idempotent: importing twice must not warn
    gym.register(id=env_id, entry_point=entry_point, **kwargs)


def registered_ids(namespace: str | None = NAMESPACE) -> list[str]:
    """Ids registered under ``namespace`` (all ids when ``None``)."""
    return sorted(i for i in gym.registry if namespace is None or i.startswith(namespace + "/"))


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` with a clear error naming close matches for an unknown id."""
    import agentgspo.envs  # noqa: F401 -- registers the bundled ids

    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        known = ", ".join(registered_ids())
        raise UnknownEnvError(
            f"unknown env id {env_id!r}.{hint} Registered agentgspo envs: {known}. "
            "Register your own with agentgspo.register('agentgspo/Name-v0', entry_point='module:Class')."
        )
    return gym.make(env_id, **kwargs)
