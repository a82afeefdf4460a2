"""Any registered env served as an OpenEnv environment: OpenEnv's own ``create_app`` over a thin ``Environment``.

``agentgspo env-server --env ID`` runs :func:`create_env_app` under uvicorn. What travels (OpenEnv's WebSocket
protocol at ``/ws``, one env per connection; ``/health``, ``/schema``, ``/state`` as OpenEnv serves them):

- the action is one assistant turn, ``{"message": TEXT}`` (:class:`ChatAction`): the env parses its
  ``<tool_call>`` blocks itself, exactly as in process, so the trajectory a remote episode records is the one a local
  episode records;
- the observation (:class:`ChatObservation`) carries the env's new messages (on reset, the opening conversation and
  the tools' OpenAI schemas), ``reward`` (what the step earned, the env contract's rule), ``done`` (terminated or
  truncated), ``truncated`` and the step's ``info`` (JSON values only: anything else is sent as its ``str``);
- a runner that cuts an episode sends ``{"message": "", "truncate": REASON}``: the env's
  ``on_truncation(REASON)`` runs and its reward comes back (:func:`agentgspo.environments.env.truncation_reward`).

OpenEnv's protocol carries neither an env's turn and context budget nor its scripted demonstrators, which the
recipes' warm start and ``agentgspo rollout --policy oracle`` read. Two extension routes serve them, from the
registration the server plays: ``GET /agentgspo/env`` (id, keyword arguments, budget, demonstrators) and
``POST /agentgspo/demonstrate`` (``{"policy": "oracle"|"wrong", "messages": [...]}`` -> ``{"text": ...}``).
:class:`~agentgspo.environments.interop.openenv_client.OpenEnvEnv` reads both.

Needs the ``openenv`` extra (``pip install 'agentgspo[openenv]'``), which cannot share a venv with vLLM or
verifiers 0.4 (``docs/envs.md`` says why); the client side needs no openenv.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Literal

from fastapi import FastAPI, HTTPException
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, Field

from agentgspo.environments.env import optional_member, truncation_reward
from agentgspo.environments.registry import env_budget, make

__all__ = ["ChatAction", "ChatObservation", "AgentGSPOEnvironment", "create_env_app"]

#: The extension routes' prefix (OpenEnv's own routes are unprefixed).
EXTENSION_PREFIX = "/agentgspo"


class ChatAction(Action):
    """One assistant turn of a chat env, or the runner's cut of the episode."""

    message: str = Field(default="", description="the assistant turn's text (tool calls in it are the env's to parse)")
    truncate: str | None = Field(
        default=None,
        description="set by a runner that cuts the episode (max_turns, max_tokens, ...): the env's "
        "on_truncation(reason) runs instead of a step and its reward comes back",
    )


class ChatObservation(Observation):
    """The env's new chat messages after a reset or a step, with what the runner needs to record them."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="the env's new chat messages")
    tools: list[dict[str, Any]] | None = Field(default=None, description="OpenAI tool schemas (on reset)")
    truncated: bool = Field(default=False, description="the episode was cut by a limit (Gymnasium's truncated)")
    info: dict[str, Any] = Field(default_factory=dict, description="the step's info dict (JSON values)")


class Demonstration(BaseModel):
    """Body of ``POST /agentgspo/demonstrate``."""

    policy: Literal["oracle", "wrong"]
    messages: list[dict[str, Any]]


def json_safe(value: Any) -> Any:
    """``value`` with everything JSON cannot carry replaced by its ``str`` (info dicts hold numpy scalars, paths)."""
    return json.loads(json.dumps(value, default=str))


class AgentGSPOEnvironment(Environment[ChatAction, ChatObservation, State]):
    """One registered agentgspo env behind OpenEnv's ``Environment`` API (one instance per WebSocket session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session makes its own env

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None):
        super().__init__()
        self.env_id = env_id
        self.env = make(env_id, **(env_kwargs or {}))
        self._state = State(episode_id=None, step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, options: dict | None = None, **kwargs: Any
    ) -> ChatObservation:
        """``env.reset(seed=..., options=...)``: the opening messages and the tools."""
        messages, info = self.env.reset(seed=seed, options=options)
        self._state = State(episode_id=episode_id, step_count=0)
        tools = optional_member(self.env, "tool_schemas")
        return ChatObservation(messages=messages, tools=tools or None, info=json_safe(info), reward=0.0)

    def step(self, action: ChatAction, timeout_s: float | None = None, **kwargs: Any) -> ChatObservation:
        """``env.step(action.message)``, or ``on_truncation(action.truncate)`` when the runner cut the episode."""
        if action.truncate is not None:
            reward = truncation_reward(self.env, action.truncate)
            return ChatObservation(reward=reward, done=True, truncated=True)
        messages, reward, terminated, truncated, info = self.env.step(action.message)
        self._state.step_count += 1
        return ChatObservation(
            messages=messages,
            reward=float(reward),
            done=bool(terminated or truncated),
            truncated=bool(truncated),
            info=json_safe(info),
        )

    @property
    def state(self) -> State:
        """The episode id the client gave at reset and the steps taken."""
        return self._state

    def close(self) -> None:
        """Close the env (sandboxes, retrievers)."""
        self.env.close()


def create_env_app(env_id: str, env_kwargs: dict[str, Any] | None = None, *, max_concurrent_envs: int = 64) -> FastAPI:
    """OpenEnv's app serving ``env_id`` (one env per WebSocket session, at most ``max_concurrent_envs`` at once),
    with the two extension routes of the module docstring. The env is made once here, so an unknown id or keyword
    fails now, not at the first connection."""
    env_kwargs = dict(env_kwargs or {})
    probe = make(env_id, **env_kwargs)
    demonstrators = {name: optional_member(probe, name) for name in ("oracle", "wrong")}
    probe.close()
    app = create_app(
        functools.partial(AgentGSPOEnvironment, env_id, env_kwargs),
        ChatAction,
        ChatObservation,
        env_name=env_id.replace("/", "-"),
        max_concurrent_envs=max_concurrent_envs,
    )
    budget = env_budget(env_id)
    description = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "budget": dataclasses.asdict(budget) if budget else None,
        "demonstrators": sorted(name for name, fn in demonstrators.items() if fn is not None),
        "max_concurrent_envs": max_concurrent_envs,
    }

    @app.get(f"{EXTENSION_PREFIX}/env")
    def describe() -> dict[str, Any]:
        """What OpenEnv's protocol does not carry: the registration's budget and demonstrators."""
        return description

    @app.post(f"{EXTENSION_PREFIX}/demonstrate")
    def demonstrate(body: Demonstration) -> dict[str, str]:
        """The env's scripted ``oracle`` or ``wrong`` reply to ``messages``."""
        policy = demonstrators[body.policy]
        if policy is None:
            raise HTTPException(404, f"{env_id} defines no `{body.policy}` policy")
        return {"text": policy(body.messages)}

    return app
