"""What a trained policy was trained with, saved beside its weights so it is used the same way afterwards.

A recipe writes ``agentgspo.json`` into ``final/`` (and each checkpoint): the env id, the env's keyword arguments
(e.g. the quickstart trains without a system prompt), the chat settings and the sampling limits. ``agentgspo
rollout`` (and any command that plays a policy folder) reads it with :func:`read_policy_settings` and resolves each
setting with :func:`resolve_episode_settings`: a flag given on the command line wins, then the policy's record
(when playing the env it was trained on), then the env's registered budget, then the library default.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agentgspo.environments.registry import env_budget

__all__ = [
    "LIMIT_DEFAULTS",
    "PolicySettings",
    "write_policy_settings",
    "read_policy_settings",
    "EpisodeSettings",
    "resolve_episode_settings",
]

SETTINGS_FILE = "agentgspo.json"
#: The rollout limits a run records and a player resolves, with the library's defaults (agentgspo.rollouts.rollout's).
LIMIT_DEFAULTS: dict[str, Any] = {
    "max_turns": 8,
    "max_new_tokens": 128,
    "max_context": 1024,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
}


@dataclass
class PolicySettings:
    """How a policy was trained: the env it played and the limits of its episodes.

    Attributes:
        env_id: the registered env id it was trained on.
        env_kwargs: keyword arguments of ``gymnasium.make`` for that env.
        chat: chat settings of the renderer (``end_of_turn``: the token that ends an assistant turn).
        max_turns, max_new_tokens, max_context, temperature, top_p, top_k: the episode and sampling limits it
            used (``top_k`` 0: off; a file written before top_k was recorded reads as 0, which is what it used).
    """

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    chat: dict[str, Any] = field(default_factory=dict)
    max_turns: int = LIMIT_DEFAULTS["max_turns"]
    max_new_tokens: int = LIMIT_DEFAULTS["max_new_tokens"]
    max_context: int = LIMIT_DEFAULTS["max_context"]
    temperature: float = LIMIT_DEFAULTS["temperature"]
    top_p: float = LIMIT_DEFAULTS["top_p"]
    top_k: int = LIMIT_DEFAULTS["top_k"]


def write_policy_settings(folder: str | Path, settings: PolicySettings) -> Path:
    """Write ``folder/agentgspo.json``; returns its path."""
    path = Path(folder) / SETTINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, **asdict(settings)}, indent=2) + "\n")
    return path


def read_policy_settings(folder: str | Path) -> PolicySettings | None:
    """The settings saved in ``folder/agentgspo.json``, or ``None`` when the folder has none (e.g. a hub model)."""
    path = Path(folder) / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        known = {f.name for f in fields(PolicySettings)}
        return PolicySettings(**{k: v for k, v in data.items() if k in known})
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(
            f"{path}: not a valid policy settings file ({exc}); delete it to play the policy with the "
            "env's budget, or fix it"
        ) from None


@dataclass
class EpisodeSettings:
    """The resolved settings of a rollout, and where each came from (``sources``: name -> "flag", "policy",
    "env budget" or "default")."""

    env_id: str
    env_kwargs: dict[str, Any]
    max_turns: int
    max_new_tokens: int
    max_context: int
    temperature: float
    top_p: float
    top_k: int
    sources: dict[str, str]

    def limits(self) -> dict[str, Any]:
        """Each limit's resolved value by name (the names of ``sources``, in :data:`LIMIT_DEFAULTS`' order)."""
        values = asdict(self)
        return {name: values[name] for name in LIMIT_DEFAULTS}


def resolve_episode_settings(
    env_id: str | None,
    explicit: dict[str, Any],
    env_kwargs: dict[str, Any] | None,
    policy: PolicySettings | None,
    *,
    policy_label: str = "the policy",
) -> EpisodeSettings:
    """Each rollout setting from, in order: ``explicit`` (flags given; ``None`` values are not given), the policy's
    record (only when ``env_id`` is the env it was trained on, or ``None``), the env's budget, the defaults.

    ``env_kwargs`` given on the command line update the policy's recorded ones (same env only).
    """
    if env_id is None:
        if policy is None:
            raise ValueError(
                "--env is required: name a registered env id, e.g. --env agentgspo/Calculator-v0 "
                f"({policy_label} records no env it was trained on)"
            )
        env_id = policy.env_id
    same_env = policy is not None and policy.env_id == env_id
    kwargs = {**(policy.env_kwargs if same_env else {}), **(env_kwargs or {})}
    budget = env_budget(env_id)
    recorded = asdict(policy) if same_env else {}  # every limit
    budgeted = asdict(budget) if budget is not None else {}  # the turn and context limits only
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, default in LIMIT_DEFAULTS.items():
        if explicit.get(name) is not None:
            values[name], sources[name] = explicit[name], "flag"
        elif name in recorded:
            values[name], sources[name] = recorded[name], "policy"
        elif name in budgeted:
            values[name], sources[name] = budgeted[name], "env budget"
        else:
            values[name], sources[name] = default, "default"
    return EpisodeSettings(env_id=env_id, env_kwargs=kwargs, sources=sources, **values)
