"""`verifiers/Env-v0`: a verifiers environment (release 0.4, ``import verifiers.v1 as vf``) played as a chat env.

A verifiers environment is a taskset (tasks, their tools as MCP servers, their rewards and judges), the harness
program each agent seat runs, and an ``Env`` that says how the seats play a task (one agent by default; a game
engine or a simulated user taking turns through ``agent.interaction``). Played here:

- ``reset(seed)`` starts an episode of task ``seed % len(tasks)`` (task ``seed`` of an infinite taskset) and
  returns the messages of the played seat's first model call; its tools (OpenAI function schemas, as the harness
  offered them) are ``tool_schemas``;
- ``step(text)`` answers that model call with the turn (``<tool_call>`` blocks become OpenAI ``tool_calls``) and
  returns what the seat's next model call adds: tool results (``tool`` messages named after their call), user
  turns; or, when the episode ended, ``terminated`` with the reward;
- the reward is the played run's verifiers score (the sum of its weighted rewards and judges), paid at the end;
  an episode the runner cuts is stopped with the runner's reason and its partial trajectory scored
  (:meth:`VerifiersEnv.on_truncation`), as verifiers scores a run its own limits stop; a run verifiers' own limits
  stop (the seat's ``max_turns``, ``max_*_tokens``) ends ``truncated``, with the matching ``stop_reason``;
- an episode that fails in verifiers (harness, tool server, hook or scoring error) raises: the runner records
  ``env_error`` with the cause, never a silent 0.

The legacy API (verifiers 0.3: ``load_environment()`` returning a ``MultiTurnEnv``) is not played: it is the same
package as 0.4, so the two cannot be installed side by side, and such a taskset is refused naming the port.

How it runs (:mod:`agentgspo.environments.interop.verifiers_host`): the verifiers ``Env`` runs on its own event
loop thread and reaches the model through verifiers' interception server, whose upstream endpoint is a bridge on
127.0.0.1 that hands each model call to ``reset``/``step``.

Defaults that differ from ``vf-eval``: a seat with no runtime runs in the ``subprocess`` runtime (verifiers
defaults to Prime's remote sandboxes, which need an account), and a seat with no harness, of a taskset that ships
none, runs the tool-less ``null`` chat loop (the taskset's MCP tools only) rather than ``bash``, whose shell and
edit tools would run the policy's commands on this host. Pin either in ``config`` to change it.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import importlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgspo.environments.env import AssistantTurnSpace, MessagesSpace
from agentgspo.environments.interop import verifiers_host

__all__ = ["VerifiersEnv", "env_config", "import_text_policy", "played_seat"]

Message = dict[str, Any]
INSTALL = "pip install 'agentgspo[verifiers]'"
_UV_HARNESSES = ("null", "bash")  # verifiers' chat programs, prepared with uv


def _verifiers() -> Any:
    try:
        import verifiers.v1 as vf
    except ImportError as exc:
        raise ImportError(
            f"verifiers/Env-v0 needs the verifiers package (release 0.4, verifiers.v1): {INSTALL}"
        ) from exc
    return vf


def import_text_policy(path: str, what: str) -> Callable[[list[Message]], str]:
    """The function ``fn(messages) -> str`` that ``path`` (``"module:function"``) names."""
    module_name, _, name = path.partition(":")
    if not module_name or not name:
        raise ValueError(f"{what}: expected 'module:function', got {path!r}")
    try:
        fn = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what}: cannot import {path!r} ({exc}); is its folder on sys.path (the path argument)?")
    if not callable(fn):
        raise ValueError(f"{what}: {path!r} is a {type(fn).__name__}, expected a function fn(messages) -> str")
    return fn


def _add_import_path(path: str) -> None:
    """Put ``path`` on ``sys.path`` and on ``PYTHONPATH`` (verifiers starts tool servers as ``python -m``)."""
    folder = str(Path(path).resolve())
    if not Path(folder).is_dir():
        raise ValueError(f"path: {path!r} is not a folder; pass the folder that holds the taskset's package")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder, *parts])


def _ensure_uv() -> None:
    """verifiers prepares its chat programs with uv: find it, next to this interpreter if not on PATH."""
    if shutil.which("uv"):
        return
    beside = Path(sys.executable).parent
    if (beside / "uv").exists():
        os.environ["PATH"] = os.pathsep.join([str(beside), os.environ.get("PATH", "")])
        return
    raise RuntimeError(
        f"verifiers' null and bash harnesses run their chat program with uv, which is missing: {INSTALL}"
    )


LEGACY = (
    "verifiers/Env-v0: {taskset!r} is written for verifiers' legacy API (0.3: load_environment() returning a "
    "vf.Environment such as MultiTurnEnv), which verifiers 0.4 (installed; one package, so not beside it) no longer "
    "ships. Port it to verifiers.v1 (a Taskset, and an Env for its turns), or play it where verifiers<0.4 is "
    "installed with that release's own tools ({cause})"
)


def _legacy_hint(taskset: str, exc: Exception) -> str | None:
    """The legacy-API message when ``exc`` says the taskset module is a verifiers 0.3 environment: it used a name
    0.4 dropped, or it loads but exports ``load_environment`` instead of a Taskset."""
    if isinstance(exc, AttributeError) and "module 'verifiers' has no attribute" in str(exc):
        return LEGACY.format(taskset=taskset, cause=exc)
    module = sys.modules.get(taskset.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower())
    if module is not None and hasattr(module, "load_environment"):
        return LEGACY.format(taskset=taskset, cause=exc)
    return None


def env_config(taskset: str, config: dict[str, Any] | None) -> Any:
    """verifiers' ``[env]`` block for ``taskset`` and ``config``, resolved to the env's config class, with this
    module's runtime and harness defaults (see the module docstring) filled in."""
    vf = _verifiers()
    from verifiers.v1.configs.agent import agent_config_fields

    raw = copy.deepcopy(config) if config is not None else {}
    if not isinstance(raw, dict):
        raise ValueError(f"config: expected verifiers' [env] block as a dict, got {type(raw).__name__}")
    block = raw.setdefault("taskset", {})
    if not isinstance(block, dict):
        raise ValueError(f"config['taskset']: expected the taskset's knobs as a dict, got {type(block).__name__}")
    if block.get("id", taskset) != taskset:
        raise ValueError(f"config['taskset']['id'] is {block['id']!r} but taskset is {taskset!r}; give it once")
    block["id"] = taskset
    try:
        resolved = vf.resolve_env_config(copy.deepcopy(raw))
    except (ModuleNotFoundError, AttributeError, TypeError, ValueError) as exc:
        raise ValueError(_legacy_hint(taskset, exc) or f"verifiers/Env-v0: taskset {taskset!r}: {exc}") from exc
    bundles_harness = vf.default_harness_id(taskset) != "bash"
    for seat, spec in agent_config_fields(resolved).items():
        seat_raw = raw.setdefault(seat, {})
        if "runtime" not in spec.model_fields_set:
            seat_raw["runtime"] = {"type": "subprocess"}
        if spec.harness is None and not bundles_harness:
            seat_raw["harness"] = {"id": "null"}
    return vf.resolve_env_config(raw)


def played_seat(resolved: Any, seat: str | None) -> str:
    """The seat our policy plays: ``seat``, else the only seat, else the only seat without a model of its own;
    every other seat must have its own model (it would call ours)."""
    from verifiers.v1.configs.agent import agent_config_fields

    seats = agent_config_fields(resolved)
    if seat is None:
        unpinned = [name for name, spec in seats.items() if spec.model is None]
        if len(seats) == 1:
            seat = next(iter(seats))
        elif len(unpinned) == 1:
            seat = unpinned[0]
        else:
            raise ValueError(f"seat: the env has seats {sorted(seats)}; name the one the policy plays (seat=...)")
    if seat not in seats:
        close = difflib.get_close_matches(seat, list(seats), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"seat: the env has no seat {seat!r}.{hint} Its seats: {sorted(seats)}")
    for name, spec in seats.items():
        if name != seat and spec.model is None:
            raise ValueError(
                f"seat {name!r} has no model of its own and would call the played policy; pin it in config, e.g. "
                f'{{"{name}": {{"model": "...", "client": {{"base_url": "http://..."}}}}}}'
            )
    return seat


class VerifiersEnv(gym.Env):
    """A verifiers environment as a chat env (see the module docstring).

    Args:
        taskset: the taskset id, as ``vf-eval <taskset-id>`` takes it: an importable package exporting its
            ``vf.Taskset`` (and optionally its ``vf.Env`` and default ``vf.Harness``), or a built-in taskset.
        config: the rest of verifiers' ``[env]`` block, as ``vf-eval``'s TOML (``--env.*``) takes it, e.g.
            ``{"taskset": {"num_tasks": 4}, "agent": {"max_turns": 8, "harness": {"id": "bash"}}}`` or
            ``{"id": "user-sim", "user": {"model": ..., "client": {"base_url": ...}}}``.
        select: which tasks, as ``vf-eval --select.*`` (``{"include": {"idx": ["0:10"]}, "shuffle": true}``).
        seat: the agent seat the policy plays (default: the only one, else the only one without its own model).
        model: the model name verifiers sends with each call (recorded in its traces).
        path: a folder put on ``sys.path`` and ``PYTHONPATH`` (for verifiers' tool servers) before the taskset is
            imported: a checkout's ``environments/<name>`` folder, or a test's fixtures. Process-wide.
        oracle: ``"module:function"``, a text policy ``fn(messages) -> str`` that solves the tasks
            (``agentgspo rollout --policy oracle`` plays it).
        wrong: ``"module:function"``, a text policy that fails them.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    observation_space = MessagesSpace()
    action_space = AssistantTurnSpace()

    def __init__(
        self,
        taskset: str,
        config: dict[str, Any] | None = None,
        *,
        select: dict[str, Any] | None = None,
        seat: str | None = None,
        model: str = "agentgspo",
        path: str | None = None,
        oracle: str | None = None,
        wrong: str | None = None,
    ):
        if not isinstance(taskset, str) or not taskset:
            raise ValueError(f"taskset: expected a verifiers taskset id such as 'gsm8k', got {taskset!r}")
        if path is not None:
            _add_import_path(path)
        vf = _verifiers()
        resolved = env_config(taskset, config)
        self.seat = played_seat(resolved, seat)
        harness = resolved.agent_harnesses()[self.seat]
        if harness.id in _UV_HARNESSES:
            _ensure_uv()
        self.select = vf.SelectConfig(**(select or {}))
        self.oracle = import_text_policy(oracle, "oracle") if oracle else None
        self.wrong = import_text_policy(wrong, "wrong") if wrong else None
        self._key = hashlib.sha256(
            json.dumps(
                [resolved.model_dump(mode="json"), self.select.model_dump(mode="json"), self.seat, model],
                sort_keys=True,
            ).encode()
        ).hexdigest()
        self._host = verifiers_host.acquire(
            self._key, lambda: verifiers_host.Host(vf.load_environment(resolved), self.seat, model, self.select)
        )
        self._episode: Any = None
        self._tools: list[dict[str, Any]] = []
        self._closed = False

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools the harness offered in the episode's first model call (OpenAI function schemas)."""
        return self._tools

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode of the task ``seed`` picks; the played seat's first model call's messages."""
        super().reset(seed=seed)
        self._end_episode()
        task = self._host.task(seed, lambda n: int(self.np_random.integers(n)))
        self._host.start()
        self._episode = self._host.call(self._host.new_episode, task)
        messages, info = self._host.call(self._episode.open)
        self._tools = list(self._episode.tools)
        return messages, info

    def step(self, action: Any):
        """Answer the pending model call with the turn; the env's next messages, or the end and the reward."""
        if self._episode is None:
            raise RuntimeError("step() before reset(): call reset() to start an episode")
        text = action if isinstance(action, str) else action.text
        result = self._host.call(self._episode.answer, text)
        if result[2]:
            self._episode = None
        return result

    def on_truncation(self, reason: str) -> float:
        """Stop the unfinished verifiers run as ``reason`` and return the score of its partial trajectory."""
        if self._episode is None:
            return 0.0
        episode, self._episode = self._episode, None
        return self._host.call(episode.truncate, reason)

    def _end_episode(self) -> None:
        episode, self._episode = self._episode, None
        if episode is not None:
            with contextlib.suppress(RuntimeError):  # the host stopped meanwhile: the episode went with it
                self._host.call(episode.cancel)

    def close(self) -> None:
        """End a live episode, and stop the verifiers host if no other env holds it (its thread joined)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._end_episode()
        finally:
            verifiers_host.release(self._key)
