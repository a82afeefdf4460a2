"""The sandbox protocol every backend implements and the runner's wire framing (the registry: ``registry.py``).

A backend opens *sessions*. A session is one isolated box for one submission: the compiled program persists in
it between calls, and it is torn down (every process killed) when the ``with`` block ends. Inside, the
in-sandbox runner (``sandboxes/runner.py``) is driven by JSON specs and answers with JSON event records.
"""

from __future__ import annotations

import json
import marshal
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

from agentgspo.core.errors import AgentGSPOError

__all__ = ["SandboxUnavailable", "Session", "Sandbox", "call_deadline_s", "frame_spec", "parse_events"]

RUNNER_PATH = Path(__file__).with_name("runner.py")

# start_peer(stdin_fd, stdout_fd) starts the interactor with those fds and returns its Popen.
StartPeer = Callable[[int, int], subprocess.Popen]


class SandboxUnavailable(RuntimeError, AgentGSPOError):
    """The backend cannot isolate code on this machine; the message says how to fix it."""


@runtime_checkable
class Session(Protocol):
    """One isolated box (see the module docstring)."""

    #: True when the session runs inside its own pid namespace/container (the runner may kill(-1) strays).
    isolated: bool
    #: Directory, inside the box, where a compiled binary must be written (and is read from later).
    bin_dir: str
    #: Directory, inside the box, holding the precompiled bits/stdc++.h (``bits/stdc++.h.gch``), or "".
    pch_dir: str
    #: Memory (MB) the box's test processes may use together: the judge runs at most this / memory limit at once.
    memory_budget_mb: float
    #: What compiles in the box, for the judge's compile cache (``judge/compile_cache.py``): "host" (this machine's
    #: compilers, which the judge identifies by path and version), another id naming itself ("docker-image:ID"), or
    #: "" (no compile cache for this session).
    toolchain: str

    def call(self, spec: dict, inputs: list[bytes] | None = None) -> list[dict]:
        """Run the runner with ``spec`` (modes compile/run) and the test inputs; return its event records.

        On infrastructure failure returns a list ending with ``{"event": "error", "message": ...}``."""
        ...

    def interact(self, spec: dict, start_peer: StartPeer, stop_when: Callable[[int], bool] | None = None) -> list[dict]:
        """Run the runner in interact mode with the solution's stdio cross-connected to a peer process. When the peer
        exits, the solution's stdout is hung up (its writes fail), and if ``stop_when(exit status)`` the solution is
        stopped at once (the test event then has ``stopped`` and ``stop_requested``). Safe to call from several
        threads at once on one session."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    """A backend: ``local`` (bubblewrap), ``docker`` or ``remote``. Thread-safe."""

    name: str

    def session(self, limits_pids: int = 64) -> AbstractContextManager[Session]:
        """Open an isolated box; every process in it is killed when the block exits."""
        ...


def call_deadline_s(spec: dict, n_tests: int, *, overhead_s: float) -> float:
    """Host-side bound on one runner call: ``overhead_s`` plus each test's longest possible run.

    A test may run to its wall limit, or, while the machine starves it of CPU, to ``wall_s + 2 * cpu_s`` (the
    runner's ``starved_deadline``); the bound covers that, so a starved solution ends as TLE, not as a judge error.
    """
    limits = spec.get("limits") or spec.get("compile_limits") or {}
    per_test = float(limits.get("wall_s", 10.0)) + 2 * float(limits.get("cpu_s", 0.0)) + 0.5
    return overhead_s + per_test * max(1, n_tests)


def frame_spec(spec: dict) -> bytes:
    """The runner's stdin framing: a 16-byte decimal length, then the spec in ``marshal`` format.

    marshal (not JSON) because the runner starts once per submission and importing json costs ~8 ms; the spec
    flows only from the judge into the box, so the runner never unmarshals untrusted data."""
    payload = marshal.dumps(spec)
    return b"%016d" % len(payload) + payload


def parse_events(text: bytes | str, infra_stderr: str = "") -> list[dict]:
    """Parse the runner's JSON lines; if no ``done`` event arrived, append an ``error`` explaining why."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    events: list[dict] = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    if not events or events[-1].get("event") != "done":
        detail = infra_stderr.strip()[-2000:] or "no output"
        events.append({"event": "error", "message": f"sandbox runner ended without finishing: {detail}"})
    return events
