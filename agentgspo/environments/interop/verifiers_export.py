"""Any registered agentgspo env as a verifiers environment (release 0.4, ``verifiers.v1``), for verifiers' own
evaluation entry point and what else loads verifiers environments.

verifiers finds a taskset by importing the module its id names (``vf-eval my-env`` imports ``my_env``, which
exports its ``Taskset``, and optionally its ``Env`` and default ``Harness``, through ``__all__``). The top-level
module ``agentgspo_verifiers`` (installed with agentgspo) re-exports this module's three classes, so::

    vf-eval agentgspo-verifiers --env.taskset.env-id agentgspo/Calculator-v0 -n 8 \\
        --model NAME --client.base-url http://HOST:PORT/v1 --no-push

evaluates Calculator-v0 with a model behind any OpenAI-compatible endpoint. What maps:

- a task is one seed: ``first_seed + i`` for ``i < num_tasks``; its prompt is the env's ``reset(seed)`` messages;
- the taskset's default harness, :class:`AgentgspoHarness`, plays the episode in-process (verifiers allows a harness
  to run its loop in-process as long as every model call goes through the interception endpoint): it resets the
  env, sends the conversation with the env's tools (OpenAI function schemas) to the model through that endpoint,
  gives the env the reply as text (its ``tool_calls`` as ``<tool_call>`` blocks, its reasoning as ``<think>``),
  and answers the calls with the env's ``tool`` messages, until the env ends the episode or ``max_turns`` (the
  env's registered budget, else 8) pass;
- the reward is the episode's: the sum of the env's step rewards, plus ``on_truncation`` when the harness cut it
  (``max_turns``, or ``max_tokens`` for a reply cut at its length); the task's ``env_reward`` reads it from the
  trace, where the harness recorded it with the stop reason and the turns (metrics ``turns`` and ``completed``);
- an episode the env ends in an ending agentgspo does not train or count (``judge_error``, ``env_timeout``, ...:
  not the model's doing) is not scored: the harness raises, as for an env that raises, so verifiers records the
  rollout as failed (no reward; its retries may replay it);
- the agent seat runs in verifiers' ``subprocess`` runtime by default (:class:`AgentgspoEnv`): the env brings its
  own sandboxes (CodeForces-v0 judges in bubblewrap), the harness hands the model no shell.
"""

from __future__ import annotations

import asyncio
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.runtimes import ProgramResult

from agentgspo.environments.env import optional_member, truncation_reward
from agentgspo.environments.interop.openai_chat import assistant_text, to_openai_replies
from agentgspo.environments.interop.trl_env import SCORED_STOPS
from agentgspo.environments.registry import env_budget, make

__all__ = ["AgentgspoEnv", "AgentgspoHarness", "AgentgspoTaskset", "play_episode"]

#: The key of the episode's record in ``trace.info``.
INFO_KEY = "agentgspo"
DEFAULT_MAX_TURNS = 8


class AgentgspoTasksetConfig(vf.TasksetConfig):
    """Which agentgspo env, and which of its seeds are the tasks (``--env.taskset.*``)."""

    env_id: str = "agentgspo/Calculator-v0"
    """A registered agentgspo env id."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """The env's keyword arguments, as ``agentgspo rollout --env-kwargs`` takes them."""
    num_tasks: int = Field(16, ge=1)
    """How many seeds the taskset holds."""
    first_seed: int = 0
    """The first task's seed; task i plays seed ``first_seed + i``."""


class AgentgspoData(vf.TaskData):
    """One task: an env id, its kwargs and the seed its episode resets with."""

    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    seed: int


class AgentgspoTask(vf.Task[AgentgspoData, vf.State, vf.TaskConfig]):
    """An episode of an agentgspo env; scored by the env's own rewards (recorded by :class:`AgentgspoHarness`)."""

    @vf.reward(weight=1.0)
    async def env_reward(self, trace: vf.Trace) -> float:
        """The episode's reward as the env paid it; a trace without the record is an error, not a 0."""
        return _record(trace)["reward"]

    @vf.metric
    async def episode(self, trace: vf.Trace) -> dict[str, float]:
        """``turns`` played and ``completed`` (1.0 when the env ended the episode, 0.0 when the harness cut it)."""
        record = _record(trace)
        return {"turns": float(record["turns"]), "completed": float(record["stop_reason"] == "completed")}


def _record(trace: Any) -> dict[str, Any]:
    record = trace.info.get(INFO_KEY)
    if record is None:
        raise ValueError(
            "the trace carries no agentgspo episode: the agentgspo harness did not play it; keep the taskset's "
            "default harness (--env.agent.harness.id agentgspo-verifiers)"
        )
    return record


class AgentgspoTaskset(vf.Taskset[AgentgspoTask, AgentgspoTasksetConfig]):
    """The seeds of one agentgspo env as tasks (see the module docstring)."""

    def load(self):
        """One task per seed, its prompt the env's opening messages."""
        config = self.config
        env = make(config.env_id, **config.env_kwargs)
        try:
            for index in range(config.num_tasks):
                seed = config.first_seed + index
                messages, _ = env.reset(seed=seed)
                data = AgentgspoData(
                    name=f"{config.env_id}#{seed}",
                    prompt=to_openai_replies(messages, []),
                    env_id=config.env_id,
                    env_kwargs=config.env_kwargs,
                    seed=seed,
                )
                yield AgentgspoTask(data, config.task)
        finally:
            env.close()


class AgentgspoHarnessConfig(vf.HarnessConfig):
    """The harness's knobs (``--env.agent.harness.*``)."""

    max_turns: int | None = Field(None, ge=1)
    """Model turns per episode; ``None``: the env's registered budget, else 8."""


async def play_episode(client: Any, model: str, data: Any, max_turns: int | None, stopped: Any = None) -> dict:
    """Play one episode of ``data``'s env and seed, the model reached through ``client`` (an ``AsyncOpenAI``);
    returns ``{reward, stop_reason, turns}``. ``stopped()`` says whether verifiers stopped the run (a limit or a
    ``@stop`` refused a model call): the episode then ends there, cut like a turn limit.

    Raises ``RuntimeError`` naming the stop reason when the env ends the episode in an ending agentgspo does not
    train or count (not in :data:`~agentgspo.environments.interop.trl_env.SCORED_STOPS`: ``judge_error``, ...):
    such an episode's reward is not the model's, and a score would charge it to the model."""
    import openai

    env = await asyncio.to_thread(make, data.env_id, **(data.env_kwargs or {}))
    try:
        budget = env_budget(data.env_id)
        limit = max_turns or (budget.max_turns if budget else DEFAULT_MAX_TURNS)
        messages, _ = await asyncio.to_thread(env.reset, seed=data.seed)
        wire = to_openai_replies(messages, [])
        tools = optional_member(env, "tool_schemas") or []
        reward, turns, stop_reason = 0.0, 0, "max_turns"
        while turns < limit:
            try:
                response = await client.chat.completions.create(
                    model=model, messages=wire, **({"tools": tools} if tools else {})
                )
            except openai.APIStatusError:
                if stopped is None or not stopped():
                    raise
                break
            choice = response.choices[0]
            message = choice.message.model_dump(exclude_none=True)
            wire.append(message)
            turns += 1
            if choice.finish_reason == "length":  # the runner's max_tokens: the cut turn is not played
                stop_reason = "max_tokens"
                break
            new, step_reward, terminated, truncated, info = await asyncio.to_thread(env.step, assistant_text(message))
            reward += float(step_reward)
            if terminated or truncated:
                stop_reason = info.get("stop_reason", "completed" if terminated else "max_turns")
                if stop_reason not in SCORED_STOPS:
                    raise RuntimeError(_not_scored(data, stop_reason, turns, info))
                return {"reward": reward, "stop_reason": stop_reason, "turns": turns}
            wire.extend(to_openai_replies(new, message.get("tool_calls") or []))
        if turns:
            reward += await asyncio.to_thread(truncation_reward, env, stop_reason)
        return {"reward": reward, "stop_reason": stop_reason, "turns": turns}
    finally:
        await asyncio.to_thread(env.close)


def _not_scored(data: Any, stop_reason: str, turns: int, info: dict[str, Any]) -> str:
    """Why the episode of ``data`` is not scored, and what to do."""
    details = {k: v for k, v in info.items() if k != "stop_reason"}
    return (
        f"{data.env_id} (seed {data.seed}) ended its episode after {turns} model turn(s) with stop_reason "
        f"{stop_reason!r}, an ending agentgspo neither trains nor counts (not the model's doing: the ENDINGS table of "
        "agentgspo.core.trajectory), so the agentgspo harness fails this rollout rather than score it. verifiers "
        "records the failure on the trace; its retries (--env.agent.retries.max-retries N) play it again. If it "
        f"keeps failing, fix what the env reports (for judge_error: its judge or sandbox). The env's info: "
        f"{str(details)[:1000]}"
    )


class AgentgspoHarness(vf.Harness[AgentgspoHarnessConfig]):
    """Plays an agentgspo env's episode in-process, every model call through verifiers' interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False  # the model gets the env's tools only; code runs in the env's own sandboxes
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data) -> ProgramResult:
        """Play the task's episode and record it on the trace (``trace.info["agentgspo"]``)."""
        import openai

        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            record = await play_episode(
                client, ctx.model, data, self.config.max_turns, lambda: trace.stop_condition is not None
            )
        trace.info[INFO_KEY] = record
        return ProgramResult(exit_code=0, stdout="", stderr="")


class AgentgspoEnvConfig(vf.EnvConfig):
    """One seat, ``agent``, in the subprocess runtime unless told otherwise (``--env.agent.*``)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime={"type": "subprocess"})


class AgentgspoEnv(vf.Env[AgentgspoEnvConfig]):
    """The single-agent env of the agentgspo taskset (its own only for the seat's local runtime default)."""

    async def run(self, task, agents) -> None:
        """One run of the seat on the task."""
        await agents.agent.run(task)
