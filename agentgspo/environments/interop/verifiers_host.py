"""The machinery behind :class:`~agentgspo.environments.interop.verifiers_env.VerifiersEnv`: a verifiers ``Env``
served on its own event loop, its model calls answered by our ``reset``/``step``.

verifiers drives the model (its harness program posts chat completions to the interception server, which relays
them to the run's OpenAI-compatible endpoint); our runner drives the env. The inversion is solved with verifiers'
own endpoint mechanism: the run's client is an :class:`EvalClientConfig` whose ``base_url`` is a small
OpenAI-compatible server on 127.0.0.1 (the *bridge*), living on the same loop. A request that reaches it is one
model call of one episode (the interception sends the trace id as ``X-Session-ID``); its messages are the
conversation so far, handed to ``reset`` (the first) or ``step`` (the next), and it waits for the next assistant
turn, which ``step`` delivers. An episode that ends (its ``run_episode`` returned) answers the waiting ``step``
with the score.

One :class:`Host` per verifiers config serves every ``VerifiersEnv`` of that config in the process (the runner
builds one env per episode): it owns one daemon thread with its loop, the verifiers ``Env`` inside its
``serving()`` (interception pool, the taskset's shared tool servers) and the bridge. It starts at the first
``reset`` and stops, joining its thread, when the last env that holds it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from agentgspo.core.errors import AgentGSPOError
from agentgspo.environments.interop.openai_chat import (
    completion,
    completion_events,
    from_openai,
    to_openai_assistant,
)

Message = dict[str, Any]
# The env var of the bridge's API key: never set (verifiers then sends "EMPTY"); the bridge listens on 127.0.0.1.
BRIDGE_KEY_VAR = "AGENTGSPO_VERIFIERS_BRIDGE_KEY"
#: verifiers' run limits (``AgentConfig.max_*``) and the stop reason of ours that means the same.
LIMIT_STOPS = {
    "max_turns": "max_turns",
    "max_input_tokens": "context_overflow",
    "max_total_tokens": "context_overflow",
    "max_output_tokens": "max_tokens",
}
_CANCEL_GRACE_S = 60.0  # cancelling an episode waits this long for verifiers' cleanup (processes, servers)
_names = itertools.count()


class VerifiersEpisodeError(RuntimeError, AgentGSPOError):
    """A verifiers episode failed (its harness, tools, hooks or scoring raised): never scored as 0."""


class Refused(AgentGSPOError):
    """A model call the bridge cannot answer for the episode; the harness reads the message as an API error."""


def _canonical_arguments(raw: Any) -> Any:
    try:
        return json.dumps(json.loads(raw), sort_keys=True) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return raw


def message_key(message: Message) -> tuple:
    """What a harness may not change in a message it sends again: role, content, tool calls, the call answered
    (reasoning fields and serialization details such as ``content: null`` or call indices are ignored)."""
    content = message.get("content")
    if content is None:
        content = ""
    elif not isinstance(content, str):
        content = json.dumps(content, sort_keys=True)
    calls = tuple(
        (
            call.get("id"),
            (call.get("function") or {}).get("name"),
            _canonical_arguments((call.get("function") or {}).get("arguments")),
        )
        for call in message.get("tool_calls") or []
    )
    return message.get("role"), content, calls, message.get("tool_call_id")


def _errors(episode: Any, traces: list[Any]) -> list[str]:
    found = [f"{error.type}: {error.message}" for error in episode.errors]
    for trace in traces:
        if not trace.ok:
            found += [f"{error.type}: {error.message}" for error in trace.errors] or [f"run {trace.id} failed"]
    return found


class Episode:
    """One episode of one task, on the host's loop: the rendezvous of the bridge's requests and ``reset``/``step``.

    Events reach ``events`` in order: ``("request", body)`` for each model call of the played seat, ``("done",
    episode)`` when verifiers' ``run_episode`` returned, ``("failed", exc)`` when it raised, ``("closed", None)``
    when the env closed.
    """

    def __init__(self, host: Host, task: Any):
        self.host = host
        self.task = task
        self.events: asyncio.Queue = asyncio.Queue()
        self.pending: asyncio.Future | None = None  # the bridge's open request, waiting for the next turn
        self.seen: list[tuple] = []  # message_key of every message the model has seen, in order
        self.tools: list[dict[str, Any]] = []
        self.traces: dict[str, Any] = {}  # every run of the episode, by trace id
        self.conversation: str | None = None  # the played seat's run
        self.turns = 0
        self.truncated = False
        self.runner = asyncio.get_running_loop().create_task(self._play())
        host.episodes.add(self)

    def _on_trace(self, trace: Any) -> None:
        self.traces[trace.id] = trace
        self.host.routes[trace.id] = self

    async def _play(self) -> None:
        try:
            episode = await self.host.vf_env.run_episode(self.task, self.host.ctx, on_trace=self._on_trace)
        except Exception as exc:  # noqa: BLE001 -- delivered to reset/step, which raise it
            self.events.put_nowait(("failed", exc))
            return
        self.events.put_nowait(("done", episode))

    async def request(self, trace_id: str, body: dict[str, Any]) -> Message:
        """A model call from the bridge: queue it for reset/step and wait for the assistant message."""
        trace = self.traces[trace_id]
        seat = self.host.seat
        if trace.agent.name != seat:
            raise Refused(
                f"verifiers seat {trace.agent.name!r} called the model, but VerifiersEnv plays seat {seat!r} only; "
                f"pin the other seats' model and client in the config (config={{{trace.agent.name!r}: "
                "{'model': ..., 'client': {'base_url': ...}}})"
            )
        if self.truncated:
            raise Refused("the episode was truncated by agentgspo's runner; no more model calls")
        if self.conversation is None:
            self.conversation = trace_id
        elif trace_id != self.conversation:
            raise Refused(
                f"seat {seat!r} started a second run in one episode; VerifiersEnv plays one conversation per "
                "episode (an env that samples several attempts, like best-of-n, does not map)"
            )
        if self.pending is not None and not self.pending.done():
            raise Refused(f"seat {seat!r} made a second model call while one was open; calls must be sequential")
        self.pending = asyncio.get_running_loop().create_future()
        self.events.put_nowait(("request", body))
        return await self.pending

    async def open(self) -> tuple[list[Message], dict[str, Any]]:
        """The opening messages (the first model call's) and their tools."""
        kind, payload = await self.events.get()
        if kind != "request":
            self._forget()
            raise self._ended_early(kind, payload, "before its first model call")
        messages = payload.get("messages") or []
        self.tools = payload.get("tools") or []
        self.seen = [message_key(m) for m in messages]
        data = self.task.data
        return from_openai(messages), {"task_idx": data.idx, "task_name": data.name, "task_key": self.task.key}

    async def answer(self, text: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        """Deliver the assistant turn, then the env's new messages or the episode's end."""
        turn = to_openai_assistant(text, self.turns)
        self.turns += 1
        info: dict[str, Any] = {"tool_calls": len(turn.call_names)}
        if turn.parse_errors:
            info["tool_errors"] = {"parse_error": turn.parse_errors}
        self._deliver(turn.message)
        self.seen.append(message_key(turn.message))
        kind, payload = await self.events.get()
        if kind != "request":
            reward, end_info = self._score(kind, payload)
            cut = LIMIT_STOPS.get(end_info["verifiers"]["stop_condition"])
            if cut is not None:  # verifiers' own limit ended the run: a truncation, as a limit wrapper's
                return [], reward, False, True, {**info, **end_info, "stop_reason": cut}
            return [], reward, True, False, {**info, **end_info}
        messages = payload.get("messages") or []
        before = len(self.seen)
        keys = [message_key(m) for m in messages]
        if keys[:before] != self.seen:
            at = next((i for i, (a, b) in enumerate(zip(keys, self.seen)) if a != b), min(len(keys), before))
            raise VerifiersEpisodeError(
                f"the verifiers harness changed the conversation it had sent (message {at}: expected "
                f"{self.seen[at] if at < before else 'more messages'}, got {keys[at] if at < len(keys) else 'none'}); "
                "an append-only chat needs a harness that only appends (null, or bash without compaction)"
            )
        if (payload.get("tools") or []) != self.tools:
            raise VerifiersEpisodeError(
                "the verifiers harness changed the tools between model calls; the prompt renders one set of tools"
            )
        self.seen = keys
        return from_openai(messages)[before:], 0.0, False, False, info

    async def truncate(self, reason: str) -> float:
        """Stop the played run as ``reason`` (verifiers scores a stopped run's partial trajectory) and return its
        reward."""
        self.truncated = True
        for trace in self.traces.values():
            if trace.agent.name == self.host.seat:
                trace.stop(reason)
        self._deliver({"role": "assistant", "content": ""})  # the interception refuses it: the run is stopped
        while True:
            kind, payload = await self.events.get()
            if kind != "request":
                return self._score(kind, payload)[0]

    async def cancel(self) -> None:
        """End the episode now (its env closed): cancel the run, wait for verifiers' cleanup, wake a waiting call."""
        if self.pending is not None and not self.pending.done():
            self.pending.cancel()
        self.runner.cancel()
        await asyncio.wait({self.runner}, timeout=_CANCEL_GRACE_S)
        self._forget()
        self.events.put_nowait(("closed", None))

    def _forget(self) -> None:
        for trace_id in self.traces:
            self.host.routes.pop(trace_id, None)
        self.host.episodes.discard(self)

    def _deliver(self, message: Message) -> None:
        if self.pending is not None and not self.pending.done():
            self.pending.set_result(message)

    def _ended_early(self, kind: str, payload: Any, when: str) -> Exception:
        if kind == "closed":
            return RuntimeError("VerifiersEnv was closed while this call waited")
        if kind == "failed":
            error = VerifiersEpisodeError(f"the verifiers episode of task {self.task.data.idx} raised {when}")
            error.__cause__ = payload
            return error
        played = [t for t in payload.traces if t.agent.name == self.host.seat]
        errors = _errors(payload, played) or ["it made no model call"]
        return VerifiersEpisodeError(
            f"the verifiers episode of task {self.task.data.idx} ended {when}: {'; '.join(errors)}"
        )

    def _score(self, kind: str, payload: Any) -> tuple[float, dict[str, Any]]:
        """The played run's reward and record (:func:`score_episode`); an episode that did not finish raises."""
        self._forget()
        if kind != "done":
            raise self._ended_early(kind, payload, "before it was scored")
        return score_episode(payload, self.host.seat, self.task.data.idx)


def score_episode(episode: Any, seat: str, task_idx: Any) -> tuple[float, dict[str, Any]]:
    """A finished verifiers episode's reward for ``seat`` (the sum of its run's weighted rewards and judges) and
    the record ``step`` returns in ``info["verifiers"]``; an episode or run that failed (a hook, the harness, a
    tool server, a reward function raised) is a :class:`VerifiersEpisodeError` naming the errors, never a 0."""
    played = [t for t in episode.traces if t.agent.name == seat]
    errors = _errors(episode, played)
    if errors or not played:
        raise VerifiersEpisodeError(
            f"the verifiers episode of task {task_idx} failed: " + ("; ".join(errors) or f"no run of seat {seat!r}")
        )
    trace = played[-1]
    record = {
        "rewards": {name: r.score for name, r in trace.rewards.items() if r is not None},
        "weights": {name: r.weight for name, r in trace.rewards.items() if r is not None},
        "metrics": dict(trace.metrics),
        "stop_condition": trace.stop_condition,
        "turns": trace.num_turns,
    }
    return float(sum(t.reward for t in played)), {"verifiers": record}


class Host:
    """A verifiers ``Env`` served on a daemon thread's event loop, with the bridge its model calls reach.

    Args:
        vf_env: the loaded verifiers ``Env``.
        seat: the agent seat our policy plays.
        model: the model name the run sends (harnesses pass it through; nothing here reads it).
        select: verifiers' ``SelectConfig`` of the tasks to play.
    """

    def __init__(self, vf_env: Any, seat: str, model: str, select: Any):
        self.vf_env = vf_env
        self.seat = seat
        self.model = model
        self._view = vf_env.taskset.select(select)
        self._tasks: list[Any] | None = None  # loaded at the first episode
        self._stream: Any = None  # an infinite taskset's iterator, read as far as a seed needs
        self.routes: dict[str, Episode] = {}  # trace id -> its episode, for the bridge
        self.episodes: set[Episode] = set()  # the live ones, cancelled when the host stops
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.ctx: Any = None
        self._stop: asyncio.Event | None = None
        self._serving: asyncio.Task | None = None
        self._site_runner: Any = None
        self._lock = threading.Lock()  # loop, thread, stopped
        self._start_lock = threading.Lock()  # held while starting: a second start waits for the first
        self._tasks_lock = threading.Lock()
        self._stopped = False

    # --- from any thread but the loop's ------------------------------------------------------------------------

    def task(self, seed: int | None, draw: Callable[[int], int]) -> Any:
        """Task ``seed % len(tasks)``, task ``seed`` of an infinite taskset; ``draw(n)`` picks one in ``[0, n)``
        without a seed."""
        with self._tasks_lock:
            if self._tasks is None:
                if self._view.bounded:
                    tasks = list(self._view)
                    if not tasks:
                        raise ValueError("the taskset (after select) has no task to play")
                    self._tasks = tasks
                else:
                    self._tasks, self._stream = [], iter(self._view)
            if self._stream is None:
                return self._tasks[seed % len(self._tasks) if seed is not None else draw(len(self._tasks))]
            index = seed if seed is not None else draw(1024)
            while len(self._tasks) <= index:
                self._tasks.append(next(self._stream))
            return self._tasks[index]

    def start(self) -> None:
        """Start the loop thread, the bridge and verifiers' ``serving()``; a started host returns at once, a
        stopped one raises."""
        with self._start_lock:
            with self._lock:
                if self._stopped:
                    raise RuntimeError("the verifiers host is stopped: its VerifiersEnv was closed")
                if self.loop is not None:
                    return
                loop = asyncio.new_event_loop()
                name = f"agentgspo-verifiers-{next(_names)}"
                self.thread = threading.Thread(target=loop.run_forever, daemon=True, name=name)
                self.thread.start()
                self.loop = loop
            try:
                self.call(self._open)
            except BaseException:
                self._shutdown()
                raise

    def call(self, fn: Callable[..., Coroutine], *args: Any) -> Any:
        """Run ``fn(*args)`` on the loop and wait for its result (cancelled if the host stops meanwhile)."""
        with self._lock:
            if self.loop is None:
                raise RuntimeError("the verifiers host is stopped: its VerifiersEnv was closed")
            future = asyncio.run_coroutine_threadsafe(fn(*args), self.loop)
        return future.result()

    def stop(self) -> None:
        """Stop for good: cancel the live episodes and every waiting call, leave ``serving()``, stop the bridge,
        stop the loop and join its thread."""
        with self._lock:
            self._stopped = True
        self._shutdown()

    def _shutdown(self) -> None:
        with self._lock:
            loop, thread, self.loop, self.thread = self.loop, self.thread, None, None
        if loop is None:
            return
        with contextlib.suppress(Exception):  # the loop stops all the same
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=2 * _CANCEL_GRACE_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=_CANCEL_GRACE_S)
        if not thread.is_alive():
            loop.close()

    # --- on the loop ----------------------------------------------------------------------------------------------

    async def _open(self) -> None:
        import verifiers.v1 as vf
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_route("*", "/{path:.*}", self._unsupported)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._site_runner = runner
        port = runner.addresses[0][1]
        client = vf.EvalClientConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key_var=BRIDGE_KEY_VAR)
        self.ctx = vf.ModelContext(model=self.model, client=client)
        self._stop = asyncio.Event()
        ready = asyncio.get_running_loop().create_future()
        self._serving = asyncio.create_task(self._serve(ready))
        await ready

    async def _serve(self, ready: asyncio.Future) -> None:
        try:
            async with self.vf_env.serving():
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    async def _close(self) -> None:
        for episode in list(self.episodes):
            await episode.cancel()
        if self._stop is not None:
            self._stop.set()
        if self._serving is not None:
            with contextlib.suppress(BaseException):
                await self._serving
        if self._site_runner is not None:
            await self._site_runner.cleanup()
        # Whatever still runs (a call that waited on an episode, a start cut short): cancelled, so its caller's
        # thread is released rather than left waiting on a stopped loop.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=_CANCEL_GRACE_S)
        await asyncio.get_running_loop().shutdown_default_executor()  # its threads joined, not left exiting

    async def new_episode(self, task: Any) -> Episode:
        """An episode of ``task``, started."""
        return Episode(self, task)

    async def _unsupported(self, request: Any) -> Any:
        from aiohttp import web

        message = (
            f"VerifiersEnv serves OpenAI chat completions only (POST /v1/chat/completions), not {request.method} "
            f"{request.path}: the seat's harness speaks another API (Codex: Responses, Claude Code: Messages); pick "
            "a chat-completions harness (null, bash) for the played seat"
        )
        return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=400)

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web
        from verifiers.v1.clients.client import SESSION_ID_HEADER

        body = await request.json()
        trace_id = request.headers.get(SESSION_ID_HEADER, "")
        episode = self.routes.get(trace_id)
        if episode is None:
            return web.json_response({"error": {"message": f"no live episode for session {trace_id!r}"}}, status=404)
        try:
            message = await episode.request(trace_id, body)
        except Refused as exc:
            return web.json_response({"error": {"message": str(exc), "type": "invalid_request_error"}}, status=400)
        payload = completion(message, str(body.get("model", self.model)))
        if body.get("stream"):
            return web.Response(body=completion_events(payload), content_type="text/event-stream")
        return web.json_response(payload)


_HOSTS: dict[str, list] = {}  # config key -> [host, holders]
_HOSTS_LOCK = threading.Lock()


def acquire(key: str, build: Callable[[], Host]) -> Host:
    """The process's host for ``key`` (built by ``build()`` if none is held), held once more."""
    with _HOSTS_LOCK:
        entry = _HOSTS.get(key)
        if entry is None:
            entry = _HOSTS[key] = [build(), 0]
        entry[1] += 1
        return entry[0]


def release(key: str) -> None:
    """Hold the host for ``key`` once less; the last holder stops it (its thread joined before this returns)."""
    with _HOSTS_LOCK:
        entry = _HOSTS.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _HOSTS[key]
    entry[0].stop()


def live_threads() -> list[threading.Thread]:
    """The hosts' loop threads still alive in this process (none once every VerifiersEnv closed)."""
    return [t for t in threading.enumerate() if t.name.startswith("agentgspo-verifiers-")]
