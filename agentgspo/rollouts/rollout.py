"""The rollout runner: N prompts x G samples, every episode concurrent, a finished batch always.

Each episode is an asyncio task. Environment calls (``make``, ``reset``, ``step``, ``on_truncation``, ``close``)
block, so they run on a pool of daemon worker threads and the event loop keeps sampling for the other episodes.
Per episode (each ending's meaning downstream is its row in :data:`agentgspo.core.trajectory.ENDINGS`):

- one env call running past ``env_call_timeout_s`` (the machine's fault) ends the episode with
  ``stop_reason="env_timeout"`` (not trained) and its worker thread is replaced (Python cannot kill a thread; a
  daemon thread does not block interpreter exit). The clock starts when a worker runs the call, not while it waits
  for a free worker;
- the time spent inside env calls (``make``, ``reset``, ``step``, ``on_truncation``) is the episode's env budget,
  ``env_budget_s``; time waiting for the sampler is not spent. A call that spends it ends the episode there with
  ``stop_reason="env_budget"`` (its reward kept: trained);
- one ``policy.sample`` call that raises, runs past ``sampler_timeout_s``, or returns a NaN or infinite log-prob
  for a sampled id, ends the episode with ``stop_reason="sampler_error"`` (not trained), except a
  :class:`~agentgspo.policy.base.PolicyConfigurationError` (no episode could succeed), which stops the batch;
- an exception in the env ends it with ``stop_reason="env_error"`` and the traceback in metadata, except an
  :class:`~agentgspo.environments.env.EnvInfrastructureError` (a remote env server dropped, ...): ``infra_error``;
- the context window is enforced: a turn gets at most the room left, and an env reply that does not fit (or a
  backend's ``"context"`` turn: its model had no room) ends the episode with ``stop_reason="context_overflow"``;
- a turn that stops on a stop id other than the renderer's end-of-turn id (``<|endoftext|>``) is stepped (the env
  may score its answer), then, unless the env ended the episode, ends it with ``stop_reason="end_of_text"``: the
  context would go on from ids the chat template never renders.

When the runner ends an episode the env did not end with a trained ending (``max_turns``, ``max_tokens``,
``context_overflow``, ``env_budget``, ``end_of_text``), it calls ``env.unwrapped.on_truncation(reason)`` and adds
its reward to the episode's and to the last turn's (:mod:`agentgspo.environments.env`, "Rewards are paid as they are
earned").

``max_turns`` and ``env_budget_s`` are the rules of the limit wrappers, not a copy of them: each episode counts its
turns in a :class:`~agentgspo.environments.wrappers.TurnLimit` and its env seconds in a
:class:`~agentgspo.environments.wrappers.TimeBudget`, the classes :class:`~agentgspo.environments.wrappers.MaxTurns`
and :class:`~agentgspo.environments.wrappers.EnvBudget` use. The runner does not wrap its envs in those wrappers:
its budget also counts ``make`` and ``on_truncation`` and is checked after ``reset``, its cuts after a step go
``env_budget``, ``end_of_text``, ``max_turns`` (a ``MaxTurns`` would cut an end-of-text last turn as ``max_turns``),
and it pays ``on_truncation`` once after the episode for all its cuts (:mod:`agentgspo.environments.wrappers` says
more). An env that comes wrapped ends its episode itself, paid by its wrapper, and the runner pays nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import concurrent.futures
import dataclasses
import math
import queue
import threading
import time
import traceback
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from agentgspo.core.errors import AgentGSPOError
from agentgspo.core.chat import ChatRenderer
from agentgspo.core.sampling import PolicyBackend, PolicyConfigurationError, SampleRequest, SamplingParams
from agentgspo.models.routing_replay import merge_routing
from agentgspo.environments.env import EnvInfrastructureError, optional_member, truncation_reward
from agentgspo.environments.registry import episode_capacity
from agentgspo.environments.wrappers import TimeBudget, TurnLimit
from agentgspo.core.trajectory import ENDINGS, STOP_REASONS, TRAINED_STOPS, Trajectory

__all__ = ["DaemonThreadPool", "EnvCallTimeout", "SamplerFailed", "RolloutConfig", "RolloutRunner", "summarize"]


class DaemonThreadPool:
    """A fixed-size pool of daemon threads; a worker lost to a hung call can be replaced.

    :meth:`call` hands an env call's result straight to the awaiting event loop: workers queue finished calls in the
    loop's :class:`_LoopInbox` and wake the loop once for all the calls that finish while it is busy (one
    ``call_soon_threadsafe`` per batch, not two per call, and no ``concurrent.futures.Future`` chained to an asyncio
    one). With 1,024 episodes in flight that took the cost of handing a short env call to a worker and back from
    about 35 us to about 2 us on a 2-core machine.
    """

    def __init__(self, max_workers: int):
        if max_workers < 1:
            raise ValueError(f"max_workers: expected >= 1, got {max_workers}")
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._started = 0
        self._inboxes: dict[asyncio.AbstractEventLoop, _LoopInbox] = {}  # kept as long as the pool (one playing())
        self._inboxes_lock = threading.Lock()
        self._last_inbox: _LoopInbox | None = None  # the last one used: most runs have one loop
        for _ in range(max_workers):
            self.add_worker()

    def add_worker(self) -> None:
        """Start one more worker (call it when a worker is stuck in a call that will not return)."""
        self._started += 1
        threading.Thread(target=self._work, daemon=True, name="agentgspo-env").start()

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            task.run()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        """Run ``fn()`` on a worker."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._tasks.put(_FutureTask(future, fn))
        return future

    def call(self, fn: Callable[[], Any]) -> EnvCall:
        """Run ``fn()`` on a worker for the running event loop: await ``EnvCall.future`` for its result."""
        loop = asyncio.get_running_loop()
        inbox = self._last_inbox
        if inbox is None or inbox.loop is not loop:
            with self._inboxes_lock:
                inbox = self._inboxes.setdefault(loop, _LoopInbox(loop))
            self._last_inbox = inbox
        call = EnvCall(fn, loop.create_future(), inbox)
        self._tasks.put(call)
        return call

    def run_detached(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` on a worker, and forget it: no result, and an exception is dropped (``env.close``)."""
        self._tasks.put(_Detached(fn))

    def shutdown(self) -> None:
        """Ask every worker to exit: idle ones now, busy or stuck ones once their call returns."""
        for _ in range(self._started):
            self._tasks.put(None)


class _FutureTask:
    """``fn()`` on a worker, its outcome set on a ``concurrent.futures.Future`` (:meth:`DaemonThreadPool.submit`)."""

    __slots__ = ("future", "fn")

    def __init__(self, future: concurrent.futures.Future, fn: Callable[[], Any]):
        self.future, self.fn = future, fn

    def run(self) -> None:
        if self.future.set_running_or_notify_cancel():
            try:
                self.future.set_result(self.fn())
            except BaseException as exc:  # delivered to whoever holds the future
                self.future.set_exception(exc)


class _Detached:
    """``fn()`` on a worker, its outcome dropped (:meth:`DaemonThreadPool.run_detached`)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn

    def run(self) -> None:
        with contextlib.suppress(BaseException):  # as an unread future would keep it
            self.fn()


class EnvCall:
    """One env call on a worker (:meth:`DaemonThreadPool.call`): ``future`` (of the calling loop) gets its outcome;
    ``started`` and ``ended`` are the worker's ``time.monotonic()`` around it (None until then)."""

    __slots__ = ("fn", "future", "inbox", "started", "ended", "finished", "late")

    def __init__(self, fn: Callable[[], Any], future: asyncio.Future, inbox: _LoopInbox):
        self.fn, self.future, self.inbox = fn, future, inbox
        self.started: float | None = None
        self.ended: float | None = None
        self.finished = False  # set under the inbox's lock once the outcome is queued (or handed to `late`)
        self.late: Callable[[Any], Any] | None = None  # set by abandon(): the outcome goes there, not to `future`

    def run(self) -> None:
        """On a worker: run ``fn``, then queue the outcome for the loop (or give it to ``late``)."""
        self.started = time.monotonic()
        try:
            result, error = self.fn(), None
        except BaseException as exc:  # delivered to the awaiting episode
            result, error = None, exc
        self.ended = time.monotonic()
        self.inbox.finish(self, result, error)

    def abandon(self, late: Callable[[Any], Any] | None) -> bool:
        """On the loop, when the caller gives up on the call: True when it is still running (``late(result)`` then
        runs on its worker if it returns after all, and never for an exception); False when it already finished
        (its outcome is on its way to ``future``)."""
        with self.inbox.lock:
            if self.finished:
                return False
            self.late = late or _ignore
            return True


def _ignore(result: Any) -> None:
    return None


class _LoopInbox:
    """Finished env calls waiting for one event loop: workers append, the loop drains them all at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.lock = threading.Lock()
        self.finished: list[tuple[asyncio.Future, Any, BaseException | None]] = []
        self.wake_pending = False  # a drain is scheduled on the loop and will see what is appended now

    def finish(self, call: EnvCall, result: Any, error: BaseException | None) -> None:
        """On a worker: hand ``call``'s outcome to the loop, waking it unless a drain is already scheduled."""
        with self.lock:
            call.finished = True
            late = call.late
            if late is None:
                self.finished.append((call.future, result, error))
                wake, self.wake_pending = not self.wake_pending, True
        if late is not None:  # abandoned: the loop no longer waits
            if error is None:
                with contextlib.suppress(Exception):
                    late(result)
            return
        if wake:
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:  # the loop closed (its run was cancelled): no one awaits these
                pass

    def drain(self) -> None:
        """On the loop: set every queued outcome on its future."""
        with self.lock:
            finished, self.finished, self.wake_pending = self.finished, [], False
        for future, result, error in finished:
            if future.cancelled():
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)


HISTORY_MODES = ("as_sampled", "split_turns")


class EnvCallTimeout(AgentGSPOError):
    """One env call ran past ``env_call_timeout_s``."""


class SamplerFailed(AgentGSPOError):
    """``policy.sample`` raised (the cause is chained), ran past ``sampler_timeout_s``, or returned a non-finite
    log-prob (the message names the backend)."""


@dataclass
class RolloutConfig:
    """Limits of one rollout batch.

    Attributes:
        group_size: G samples per prompt (same seed, same task).
        max_turns: assistant turns per episode before ``stop_reason="max_turns"``.
        max_context: most ids in a trajectory (prompt, env messages and sampled turns together).
        env_call_timeout_s: most seconds one env call (make, reset, step) may run before the episode ends as
            ``env_timeout`` (a hung machine: not trained, re-queueable); ``None``: no limit.
        env_budget_s: most seconds an episode may spend inside env calls in all (time waiting for the sampler is
            not counted); checked as each call returns, the call that spends it ends the episode as ``env_budget``
            with its reward kept (trained: the policy's tool use spent it); ``None``: no budget.
        sampler_timeout_s: most seconds one ``policy.sample`` call may take before the episode ends as
            ``sampler_error`` (not trained); ``None``: no limit.
        env_workers: threads running blocking env calls.
        max_episodes_in_flight: most episodes played at once (per event loop); the others wait to start. ``None``:
            no limit, except for an env id that is an ``agentgspo env-server`` URL, whose server's session limit
            (``--max-concurrent-envs``) is the default.
        requeue_limit: how many times an episode whose ending is re-queueable (``requeue`` in
            :data:`~agentgspo.core.trajectory.ENDINGS`: a dead replica, sandbox or env server, a hung call) is
            played again, same task and seeds, before its failure stands (not trained either way);
            ``metadata["requeued"]`` lists the endings it replaced. 0: never.
        sampling: temperature, top-p, top-k and the most ids per turn.
        history: what each turn is conditioned on, and what the learner trains on. ``"as_sampled"``: the episode
            is one sequence that only grows (prompt, turn, env reply, turn, ...), each turn sampled after exactly
            the ids before it. ``"split_turns"``: every assistant turn is sampled in the context the chat template
            renders for the history at that turn (``ChatRenderer.prompt_ids``) and becomes its own sample (that
            context, mask 0, then the turn, mask 1); all the samples of an episode carry its reward and stop reason,
            and ``metadata["episode_turn"]`` / ``["episode_turns"]``. For templates that rewrite earlier turns
            (Qwen3 drops earlier ``<think>`` blocks), where no single growing sequence is what the model sees.
        episode_timeout_s: removed (it was a wall-clock deadline that counted time queued at the sampler); passing
            it is an error naming the three limits above.
    """

    group_size: int = 8
    max_turns: int = 8
    max_context: int = 1024
    env_call_timeout_s: float | None = 300.0
    env_budget_s: float | None = 1800.0
    sampler_timeout_s: float | None = 600.0
    env_workers: int = 64
    max_episodes_in_flight: int | None = None
    requeue_limit: int = 0
    sampling: SamplingParams = SamplingParams()
    history: str = "as_sampled"
    episode_timeout_s: dataclasses.InitVar[float | None] = None

    def __post_init__(self, episode_timeout_s: float | None) -> None:
        if episode_timeout_s is not None:
            raise TypeError(
                f"episode_timeout_s={episode_timeout_s} was removed: it counted time waiting for the "
                "sampler against the episode. Set env_call_timeout_s (one env call), env_budget_s (time "
                "inside env calls per episode) and sampler_timeout_s (one policy.sample call) instead"
            )
        if self.history not in HISTORY_MODES:
            raise ValueError(f"history: expected one of {', '.join(HISTORY_MODES)}, got {self.history!r}")
        if self.max_episodes_in_flight is not None and self.max_episodes_in_flight < 1:
            raise ValueError(f"max_episodes_in_flight: expected >= 1 or None, got {self.max_episodes_in_flight}")
        if self.requeue_limit < 0:
            raise ValueError(f"requeue_limit: expected >= 0, got {self.requeue_limit}")
        counts = {"group_size": self.group_size, "max_turns": self.max_turns, "max_context": self.max_context}
        for name, count in {**counts, "env_workers": self.env_workers}.items():
            if count < 1:
                raise ValueError(f"{name}: expected >= 1, got {count}")
        for name, limit in self.time_limits().items():
            if limit is not None and limit <= 0:
                raise ValueError(f"{name}: expected > 0 or None (no limit), got {limit}")

    def time_limits(self) -> dict[str, float | None]:
        """The episode's three time limits by setting name (``None``: no limit)."""
        return {
            "env_call_timeout_s": self.env_call_timeout_s,
            "env_budget_s": self.env_budget_s,
            "sampler_timeout_s": self.sampler_timeout_s,
        }


class RolloutRunner:
    """Plays episodes of one environment with one policy backend and returns their trajectories.

    Args:
        make_env: builds a fresh env (e.g. ``lambda: gymnasium.make("agentgspo/Calculator-v0")``).
        policy: any :class:`~agentgspo.policy.base.PolicyBackend`.
        renderer: the chat renderer of the policy's tokenizer.
        config: limits, see :class:`RolloutConfig`.
        env_id: recorded in every trajectory.
        group_hook: optional ``fn(trajectories_of_one_group)`` called when a group finished, e.g. to set
            rewards that compare the G samples (it may modify their ``reward``).
    """

    def __init__(
        self,
        make_env: Callable[[], gym.Env],
        policy: PolicyBackend,
        renderer: ChatRenderer,
        config: RolloutConfig | None = None,
        *,
        env_id: str = "",
        group_hook: Callable[[list[Trajectory]], None] | None = None,
    ):
        self.make_env = make_env
        self.policy = policy
        self.renderer = renderer
        self.config = config or RolloutConfig()
        self.env_id = env_id
        self.group_hook = group_hook
        self._pool: DaemonThreadPool | None = None
        self._runs = 0  # runs in progress: concurrent runs share the pool; the last one to finish shuts it down
        self._runs_lock = threading.Lock()  # runs may also come from several threads (run_sync)
        # An env served remotely holds a server session per episode: more episodes than the server serves at once
        # would wait for sessions on the env workers, which the open episodes need for their steps.
        self.max_episodes_in_flight = self.config.max_episodes_in_flight or (
            episode_capacity(env_id) if env_id else None
        )
        self._slots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its semaphore

    async def _env_call(
        self, fn: Callable[[], Any], budget: TimeBudget, late: Callable[[Any], Any] | None = None
    ) -> Any:
        """``fn()`` on a worker; the seconds it runs (on the worker, not queued for one) are added to ``budget``.
        Past ``env_call_timeout_s`` (counted from when a worker starts it): :class:`EnvCallTimeout`, and
        ``late(result)`` runs if the call returns after all."""
        call = self._pool.call(fn)
        limit = self.config.env_call_timeout_s
        try:
            if limit is None:
                return await call.future
            while True:  # the clock starts when a worker runs the call, not while the call waits for a free worker
                started = call.started
                left = limit if started is None else limit - (time.monotonic() - started)
                if left > 0:
                    done, _ = await asyncio.wait((call.future,), timeout=left)
                    if done:
                        return call.future.result()
                elif call.abandon(late):
                    self._pool.add_worker()  # the stuck call keeps its thread; keep the pool's capacity
                    raise EnvCallTimeout(
                        f"an env call ({getattr(fn, '__name__', fn)}) ran past env_call_timeout_s={limit}"
                    )
                else:  # it finished as the limit passed: its outcome is on its way
                    return await call.future
        finally:
            if call.ended is not None:
                budget.add(call.ended - call.started)

    async def _sample(self, request: SampleRequest) -> Any:
        """``policy.sample(request)`` within ``sampler_timeout_s``, its log-probs checked; any failure but a
        configuration error is :class:`SamplerFailed`."""
        limit = self.config.sampler_timeout_s
        started = time.monotonic()
        try:
            if limit is None:
                turn = await self.policy.sample(request)
            else:
                turn = await asyncio.wait_for(self.policy.sample(request), timeout=limit)
        except PolicyConfigurationError:
            raise
        except Exception as exc:
            took = time.monotonic() - started
            if isinstance(exc, asyncio.TimeoutError) and limit is not None and took >= limit:
                raise SamplerFailed(f"policy.sample ran past sampler_timeout_s={limit}") from exc
            raise SamplerFailed(f"policy.sample raised {type(exc).__name__}: {exc}") from exc
        self._check_logprobs(turn)
        return turn

    def _check_logprobs(self, turn: Any) -> None:
        """Refuse a turn with a NaN or infinite log-prob as a :class:`SamplerFailed` naming the backend: a sampled id
        had probability in (0, 1], so its log-prob is finite and <= 0 (-inf too is a broken sampler). vLLM returns
        NaN log-probs from broken kernels; recorded, one NaN would make a minibatch's loss, then the weights, NaN."""
        if all(map(math.isfinite, turn.logprobs)):
            return
        bad = next(k for k, value in enumerate(turn.logprobs) if not math.isfinite(value))
        raise SamplerFailed(
            f"the sampler {type(self.policy).__name__} returned a non-finite log-prob "
            f"{turn.logprobs[bad]!r} for sampled token {bad} (id {turn.token_ids[bad]}) of {len(turn.token_ids)}: "
            "a broken engine (vLLM returns NaN log-probs from broken kernels: check its dtype and attention "
            "backend); the turn is not recorded"
        )

    def _sampling_record(self) -> dict[str, Any]:
        """What :attr:`Trajectory.sampling` records: the sampling parameters and the backend's log-prob semantics."""
        params = self.config.sampling
        return {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k,
            "logprobs": self.policy.logprob_semantics,
        }

    async def episode(
        self, seed: int, group_id: int = 0, sample_id: int = 0, sampling_seed: int = 0
    ) -> list[Trajectory]:
        """Play one episode; never raises for env or sampler failures (they become the trajectory's stop reason).

        Returns its trajectory (``history="as_sampled"``), or one sample per assistant turn (``"split_turns"``,
        see :class:`RolloutConfig`). ``seed`` picks the task (``env.reset(seed=...)``); the policy's draws for turn
        k are seeded by ``(sampling_seed, seed, sample_id, k)``, so an episode replays identically whatever runs
        beside it. Past ``max_episodes_in_flight`` episodes of this event loop, it waits for one to finish first.
        """
        if self.max_episodes_in_flight is None:
            return await self._episode(seed, group_id, sample_id, sampling_seed)
        loop = asyncio.get_running_loop()
        with self._runs_lock:
            slots = self._slots.setdefault(loop, asyncio.Semaphore(self.max_episodes_in_flight))
        async with slots:
            return await self._episode(seed, group_id, sample_id, sampling_seed)

    async def requeued_episode(
        self, seed: int, group_id: int = 0, sample_id: int = 0, sampling_seed: int = 0
    ) -> list[Trajectory]:
        """:meth:`episode`, played again (up to ``requeue_limit`` times, same task and seeds) while it ends in a
        re-queueable way: infrastructure that died is no one's answer, so the group gets its episode back."""
        lost: list[str] = []
        while True:
            samples = await self.episode(seed, group_id, sample_id, sampling_seed)
            last = samples[-1]
            if not ENDINGS[last.stop_reason].requeue or len(lost) >= self.config.requeue_limit:
                break
            lost.append(f"{last.stop_reason}: {last.metadata.get('error', '')}"[:500])
        if lost:
            for sample in samples:
                sample.metadata["requeued"] = lost
        return samples

    async def _episode(self, seed: int, group_id: int, sample_id: int, sampling_seed: int) -> list[Trajectory]:
        """:meth:`episode`, once it may start."""
        config = self.config
        split = config.history == "split_turns"
        sampling = self._sampling_record()

        def new_trajectory() -> Trajectory:
            return Trajectory(
                env_id=self.env_id, seed=seed, group_id=group_id, sample_id=sample_id, sampling=dict(sampling)
            )

        samples: list[Trajectory] = []  # split_turns: the finished turns' samples
        episode_reward, cut_reward = 0.0, 0.0
        limit, budget = TurnLimit(config.max_turns), TimeBudget(config.env_budget_s)
        trajectory = new_trajectory()
        tool_errors: Counter = Counter()
        env = None
        history: list[dict[str, Any]] = []
        tools = None  # bound before reset, which may fail or time out
        # The template's render of `history` with the generation prompt (as_sampled: what the next turn is sampled
        # after, by the template's account), and that of the last sampled turn: each render is made once and
        # reused by the next continuation and by the full-render check.
        prompt_text: str | None = None
        turn_prompt_text: str | None = None

        def reset() -> tuple[list[dict[str, Any]], Any]:
            messages, _ = env.reset(seed=seed)
            return messages, optional_member(env, "tool_schemas")  # one hand-off to the worker, not two

        try:
            env = await self._env_call(self.make_env, budget, late=lambda late_env: late_env.close())
            messages, tools = await self._env_call(reset, budget)
            history.extend(messages)
            prompt_text = self.renderer.render(history, add_generation_prompt=True, tools=tools)
            trajectory.append_forced(self.renderer.encode(prompt_text))  # ChatRenderer.prompt_ids
            runner_cut = True  # the runner, not the env, ends the episode (unless the env's step says otherwise)
            if budget.spent_out:
                trajectory.stop_reason = "env_budget"
            elif len(trajectory.token_ids) >= config.max_context:
                trajectory.stop_reason = "context_overflow"
            while trajectory.stop_reason not in ("context_overflow", "env_budget"):
                if split and limit.turns:  # a new sample: the template's render of the history so far
                    samples.append(trajectory)
                    trajectory = new_trajectory()
                    trajectory.append_forced(self.renderer.prompt_ids(history, tools))
                    if len(trajectory.token_ids) >= config.max_context:
                        trajectory.stop_reason = "context_overflow"
                        break
                room = config.max_context - len(trajectory.token_ids)
                params = config.sampling
                if room < params.max_new_tokens:
                    params = dataclasses.replace(params, max_new_tokens=room)
                turn_seed = hash((sampling_seed, seed, sample_id, limit.turns)) & 0x7FFFFFFFFFFFFFFF
                request = SampleRequest(list(trajectory.token_ids), list(history), params, seed=turn_seed)
                turn = await self._sample(request)
                if turn.finish_reason == "context":  # the backend's model has no room for the prompt
                    trajectory.stop_reason = "context_overflow"
                    break
                trajectory.append_sampled(
                    turn.token_ids, turn.logprobs, turn.policy_version, turn.policy_version_end, turn.version_boundaries
                )
                if turn.routed_experts is not None:  # routing replay (R3)
                    trajectory.routed_experts = merge_routing(trajectory.routed_experts, turn.routed_experts)
                limit.count()
                stopped = turn.finish_reason == "stop"
                text_ids = turn.token_ids[:-1] if stopped else turn.token_ids
                end_of_text = stopped and turn.token_ids[-1] != self.renderer.end_of_turn_id
                history.append({"role": "assistant", "content": self.renderer.decode(text_ids)})
                turn_prompt_text = prompt_text
                if turn.finish_reason == "length":
                    trajectory.stop_reason = "max_tokens" if params is config.sampling else "context_overflow"
                    break
                text = history[-1]["content"]
                messages, reward, terminated, truncated, info = await self._env_call(lambda: env.step(text), budget)
                episode_reward += float(reward)
                trajectory.turn_rewards.append(float(reward))  # per-turn credit (advantages.turn_advantages)
                tool_errors.update(info.get("tool_errors", {}))
                if info.get("mask_turn"):
                    trajectory.mask_turn(trajectory.num_turns - 1)
                if terminated or truncated:
                    runner_cut = False
                    history.extend(messages)
                    reason = info.get("stop_reason", "completed" if terminated else "max_turns")
                    if reason not in STOP_REASONS:
                        trajectory.metadata["error"] = (
                            f"env reported an unknown stop_reason {reason!r}; expected one of {STOP_REASONS}"
                        )
                        reason = "env_error"
                    trajectory.stop_reason = reason
                    break
                # The runner's cuts, the first that applies: budget spent, end-of-text, turns used up.
                cut = next(
                    (
                        reason
                        for reason, hit in (
                            ("env_budget", budget.spent_out),
                            ("end_of_text", end_of_text),
                            ("max_turns", limit.reached),
                        )
                        if hit
                    ),
                    None,
                )
                if cut is not None:
                    trajectory.stop_reason = cut
                    history.extend(messages)
                    break
                if split:  # the next turn's sample renders the whole history itself
                    history.extend(messages)
                    continue
                ids, exact, prompt_text = self.renderer.continuation(
                    history, messages, tools, prompt_text=turn_prompt_text
                )
                history.extend(messages)
                if not exact:
                    trajectory.metadata["template_fallbacks"] = trajectory.metadata.get("template_fallbacks", 0) + 1
                if len(trajectory.token_ids) + len(ids) >= config.max_context:
                    trajectory.stop_reason = "context_overflow"
                    break
                trajectory.append_forced(ids)
            if runner_cut and limit.turns and ENDINGS[trajectory.stop_reason].trained:
                reason = trajectory.stop_reason
                cut_reward = await self._env_call(lambda: truncation_reward(env, reason), budget)
                episode_reward += cut_reward
        except EnvCallTimeout as exc:
            trajectory.stop_reason = "env_timeout"
            trajectory.metadata["error"] = str(exc)
        except SamplerFailed as exc:
            trajectory.stop_reason = "sampler_error"
            trajectory.metadata["error"] = str(exc)
            trajectory.metadata["traceback"] = traceback.format_exc()
        except PolicyConfigurationError:
            raise  # no episode can succeed: stop the batch, record nothing
        except Exception as exc:  # noqa: BLE001 -- an env failure ends this episode, not the batch
            infrastructure = isinstance(exc, EnvInfrastructureError)
            trajectory.stop_reason = "infra_error" if infrastructure else "env_error"
            trajectory.metadata["error"] = f"{type(exc).__name__}: {exc}"
            trajectory.metadata["traceback"] = traceback.format_exc()
        finally:
            if env is not None:
                self._pool.run_detached(env.close)  # fire and forget: a hung close must not hold the batch
        trajectory.metadata["env_seconds"] = round(budget.spent, 6)
        # A turn no step consumed (cut at max tokens, or the env failed) has step reward 0.0.
        trajectory.turn_rewards.extend([0.0] * (trajectory.num_turns - len(trajectory.turn_rewards)))
        if cut_reward:  # what the env paid for the cut belongs to the last turn (sum(turn_rewards) == reward)
            (trajectory if trajectory.turn_spans else samples[-1]).turn_rewards[-1] += cut_reward
        if split:
            return self._split_samples(samples, trajectory, history, episode_reward, tool_errors)
        trajectory.reward = episode_reward
        trajectory.messages = history
        if tool_errors:
            trajectory.metadata["tool_errors"] = dict(tool_errors)
        trajectory.matches_full_render = self._matches_full_render(trajectory, history, tools, turn_prompt_text)
        return [trajectory]

    @staticmethod
    def _split_samples(
        samples: list[Trajectory], last: Trajectory, history: list[dict[str, Any]], reward: float, tool_errors: Counter
    ) -> list[Trajectory]:
        """The samples of a split_turns episode, each with the episode's reward, stop reason, messages and
        metadata (the last one only when it holds a turn; an episode without any turn stays one sample)."""
        if last.turn_spans or not samples:
            samples.append(last)
        for k, sample in enumerate(samples):
            sample.reward, sample.stop_reason, sample.messages = reward, last.stop_reason, history
            sample.metadata = {**last.metadata, "episode_turn": k, "episode_turns": len(samples)}
            if tool_errors:
                sample.metadata["tool_errors"] = dict(tool_errors)
            sample.matches_full_render = True if sample.turn_spans else None  # its context is the render itself
        return samples

    def _matches_full_render(
        self,
        trajectory: Trajectory,
        history: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        turn_prompt_text: str | None = None,
    ) -> bool | None:
        """Whether ``trajectory.token_ids`` are a prefix of the tokenized full render of ``history`` up to its last
        assistant turn: catches any drift between the ids sampled (and trained on) and the text's own tokens (an id
        sequence the tokenizer would not produce, a template that rewrites history, a merge across a boundary).

        ``turn_prompt_text``: the template's render of the history before the last turn with the generation prompt,
        kept from the rollout (the same render, made once); ``None``: rendered here."""
        if not trajectory.turn_spans:
            return None
        last_assistant = max(i for i, m in enumerate(history) if m["role"] == "assistant")
        try:
            # a full render of every earlier message, then the last turn as sampled (see ChatRenderer.sampled_text)
            text = self.renderer.sampled_text(history[: last_assistant + 1], tools, prompt_text=turn_prompt_text)
            full = self.renderer.encode(text)
        except Exception:  # noqa: BLE001 -- a template that cannot render its own history does not match
            return False
        return full[: len(trajectory.token_ids)] == trajectory.token_ids

    @contextlib.contextmanager
    def playing(self) -> Iterator[None]:
        """The worker threads of env calls, shared by every run in progress (from any thread); the last run to
        finish shuts them down. :meth:`run` holds it; hold it around :meth:`group` calls made directly."""
        with self._runs_lock:
            if self._runs == 0:
                self._pool = DaemonThreadPool(self.config.env_workers)
            self._runs += 1
        try:
            yield
        finally:
            with self._runs_lock:
                self._runs -= 1
                if self._runs == 0:
                    self._pool.shutdown()

    async def group(self, seed: int, group_id: int, sampling_seed: int = 0) -> list[Trajectory]:
        """Play the ``group_size`` episodes of one seed concurrently (inside :meth:`playing`); their trajectories
        in sample order (``split_turns``: each episode's samples in turn order), after ``group_hook``."""
        episodes = await asyncio.gather(
            *(self.requeued_episode(seed, group_id, k, sampling_seed) for k in range(self.config.group_size))
        )
        if self.group_hook is not None:
            self.group_hook([episode[-1] for episode in episodes])  # one per episode (split_turns: its last)
            for episode in episodes:
                for sample in episode[:-1]:
                    sample.reward = episode[-1].reward
        return [sample for episode in episodes for sample in episode]

    async def run(self, seeds: Sequence[int], sampling_seed: int = 0) -> list[Trajectory]:
        """Play ``group_size`` episodes for each seed, all concurrently; trajectories in (seed, sample) order
        (``split_turns``: each episode's samples in turn order)."""
        with self.playing():
            groups = await asyncio.gather(
                *(self.group(seed, group_id, sampling_seed) for group_id, seed in enumerate(seeds))
            )
        return [trajectory for group in groups for trajectory in group]

    def run_sync(self, seeds: Sequence[int], sampling_seed: int = 0) -> list[Trajectory]:
        """:meth:`run` from synchronous code."""
        return asyncio.run(self.run(seeds, sampling_seed))


def summarize(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Batch metrics: reward, success (reward >= 1), stop reasons, turns, tokens, tool errors, token exactness.

    Per episode: the samples of a ``split_turns`` episode count once (its last sample; its tokens are those of all
    its samples). ``reward_mean``, ``reward_std`` and ``success`` are over the trained episodes only (stop reasons in
    :data:`~agentgspo.core.trajectory.TRAINED_STOPS`: what the learner sees), ``trained_episodes`` says how many;
    with none trained they are 0.0 and ``trained_episodes`` is 0 (read them with it). Beside them, ``excluded_frac`` is
    the share of episodes not trained and ``stop_frac`` the share of each stop reason (``stop_reasons`` the counts).
    """
    sampled_tokens = sum(t.num_sampled_tokens for t in trajectories)
    all_tokens = sum(len(t.token_ids) for t in trajectories)
    trajectories = [
        t for t in trajectories if t.metadata.get("episode_turn", 0) == t.metadata.get("episode_turns", 1) - 1
    ]
    n = len(trajectories)
    if n == 0:
        return {"episodes": 0, "trained_episodes": 0}
    rewards = [t.reward for t in trajectories if t.stop_reason in TRAINED_STOPS]
    trained = len(rewards)
    mean = sum(rewards) / trained if trained else 0.0
    stops = Counter(t.stop_reason for t in trajectories)
    rendered = [t.matches_full_render for t in trajectories if t.matches_full_render is not None]
    tool_errors: Counter = Counter()
    for t in trajectories:
        tool_errors.update(t.metadata.get("tool_errors", {}))
    return {
        "episodes": n,
        "trained_episodes": trained,
        "reward_mean": mean,
        "reward_std": (sum((r - mean) ** 2 for r in rewards) / trained) ** 0.5 if trained else 0.0,
        "success": sum(r >= 1.0 for r in rewards) / trained if trained else 0.0,
        "excluded_frac": (n - trained) / n,
        "stop_frac": {reason: count / n for reason, count in stops.items()},
        "turns_mean": sum(t.metadata.get("episode_turns", t.num_turns) for t in trajectories) / n,
        "tokens_mean": all_tokens / n,
        "sampled_tokens": sampled_tokens,
        "stop_reasons": dict(stops),
        "tool_errors": dict(tool_errors),
        "requeued_episodes": sum(bool(t.metadata.get("requeued")) for t in trajectories),
        "matches_full_render": sum(rendered) / len(rendered) if rendered else None,
    }
