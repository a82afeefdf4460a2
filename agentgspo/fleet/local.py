"""The ``local`` launcher: every part a process on this machine, each behind a keeper (``agentgspo.fleet.keeper``).

Sampler replicas are pinned to cores of their own (``os.sched_setaffinity`` in the keeper, and
``VLLM_CPU_OMP_THREADS_BIND`` so vLLM's OpenMP threads stay there: on a small machine vLLM otherwise takes every core,
and two replicas fight over all of them). Cores are claimed with a lock file per core under
``$TMPDIR/agentgspo-fleet-cores`` (held for the fleet's life), so two fleets on one machine never pin to the same
core; the Ray launcher claims cores on its nodes the same way. Sandbox and env servers are not pinned. A sampler
with GPUs gets its own ``CUDA_VISIBLE_DEVICES`` (the visible GPUs handed out in order; untested here: no GPU).

Every part listens on a free port of ``host`` (default 127.0.0.1), a new one each time it is (re)started: a client
that missed the manifest's change then fails to connect, loudly, instead of reaching an incarnation it never sent
the current weights (a restarted replica holds the fleet file's model).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentgspo.core.errors import AgentGSPOError
from agentgspo.fleet.spec import FleetSpec, PartSpec

__all__ = [
    "Incarnation",
    "PartFailed",
    "LocalLauncher",
    "claim_cores",
    "free_port",
    "free_ports",
    "omp_bind",
    "group_members",
]


class PartFailed(RuntimeError, AgentGSPOError):
    """A part cannot be (re)started any more (its launcher says so: Ray gave up on its actor, say)."""


@dataclass
class Incarnation:
    """One run of one part: where it serves and which processes it is."""

    url: str
    node: str
    log: str
    started_at: float
    pid: int | None = None
    pgid: int | None = None
    keeper_pid: int | None = None
    cores: list[int] | None = None
    actor: str | None = None  # the Ray actor's name (ray launcher)
    actor_pid: int | None = None  # its worker process on its node
    exited: asyncio.Future | None = None  # resolves to a reason when its server is gone
    handle: object = field(default=None, repr=False)  # the launcher's own (a Popen, a Ray actor)


def free_port(host: str) -> int:
    """A TCP port of ``host`` that nothing listens on now."""
    return free_ports(host, 1)[0]


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct TCP ports of ``host`` that nothing listens on now: all held bound at once while chosen, since
    the kernel may hand a port it just released out again (two `free_port` calls can return the same port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(family)) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def claim_cores(count: int, lock_dir: str | Path | None = None) -> tuple[list[int], list[int]]:
    """Claim ``count`` cores of this process's affinity that no other fleet part on this machine holds: (cores, the
    lock file descriptors that hold them; close them to release). Fewer than ``count`` when fewer are free."""
    folder = Path(lock_dir or Path(tempfile.gettempdir()) / "agentgspo-fleet-cores")
    folder.mkdir(parents=True, exist_ok=True)
    cores, fds = [], []
    for core in sorted(os.sched_getaffinity(0)):
        if len(cores) == count:
            break
        fd = os.open(folder / f"core-{core}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        cores.append(core)
        fds.append(fd)
    return cores, fds


def omp_bind(cores: list[int], shards: int) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for a replica on ``cores`` with ``shards`` model shards: one core list per shard,
    ``|``-separated (``"0,1|2,3"``)."""
    size = max(1, len(cores) // shards)
    return "|".join(",".join(map(str, cores[i * size : (i + 1) * size])) for i in range(shards))


def process_table() -> dict[int, tuple[str, int, int]]:
    """Every process on this machine, from ``/proc/PID/stat``: pid -> (state, parent pid, process group)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()  # after "(comm)", which may hold spaces
        except OSError:  # gone since the listing
            continue
        table[int(entry)] = (fields[0], int(fields[1]), int(fields[2]))
    return table


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid`` on this machine."""
    return [pid for pid, (state, _, group) in process_table().items() if group == pgid and state != "Z"]


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` in the process tree, however deep (children in sessions or groups of their own
    too: a sandbox's programs)."""
    children: dict[int, list[int]] = {}
    for child, (_, parent, _) in process_table().items():
        children.setdefault(parent, []).append(child)
    found, frontier = set(), [pid]
    while frontier:
        frontier = [child for parent in frontier for child in children.get(parent, ()) if child not in found]
        found.update(frontier)
    return found


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def exit_reason(status: int) -> str:
    """A keeper's exit status (the server's: 128 + N for signal N) in words."""
    if status > 128:
        try:
            return f"its server was killed by {signal.Signals(status - 128).name}"
        except ValueError:
            pass
    return f"its server exited with status {status}"


def keeper_command(pidfile: Path, cores: list[int] | None, command: list[str], python: str | None = None) -> list[str]:
    """The keeper's command line around a part's ``command``."""
    line = [python or sys.executable, "-m", "agentgspo.fleet.keeper", "--pidfile", str(pidfile)]
    if cores:
        line += ["--cores", ",".join(map(str, cores))]
    return [*line, "--", *command]


async def read_pidfile(path: Path, process: subprocess.Popen, timeout_s: float = 60.0) -> dict:
    """The keeper's pid file once written; ``RuntimeError`` if the keeper exits or takes ``timeout_s`` first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            pass
        if process.poll() is not None:
            raise RuntimeError(f"its keeper exited with status {process.returncode} before starting it")
        await asyncio.sleep(0.02)
    raise RuntimeError(f"its keeper wrote no pid file in {timeout_s} s")


class LocalLauncher:
    """Starts, stops and restarts parts as processes of this machine (module docstring)."""

    name = "local"

    def __init__(self, spec: FleetSpec, run_dir: Path, sandbox_token: str | None):
        self.spec, self.run_dir, self.token = spec, Path(run_dir), sandbox_token
        self.host = spec.host or "127.0.0.1"
        self.node = socket.gethostname()
        self.cores: dict[str, list[int]] = {}
        self.gpus: dict[str, str] = {}
        self._locks: list[int] = []
        self._keepers: list[subprocess.Popen] = []  # every keeper started, for close()
        self._used_ports: set[int] = set()
        parts = spec.parts()
        pinned = [part for part in parts if part.bind_cores]
        needed = sum(int(part.cpus) for part in pinned)
        cores, self._locks = claim_cores(needed)
        if len(cores) < needed:
            self.close_sync()
            raise ValueError(
                f"the sampler replicas need {needed} cores of their own, {len(cores)} of this machine's "
                f"{len(os.sched_getaffinity(0))} are free (others are held by running fleets): lower samplers' count "
                "or cpus, stop the other fleet, or set bind_cores: false"
            )
        for part in pinned:
            self.cores[part.id], cores = cores[: int(part.cpus)], cores[int(part.cpus) :]
        visible = _visible_gpus() if any(part.gpus for part in parts) else []
        for part in (part for part in parts if part.gpus):
            if len(visible) < part.gpus:
                raise ValueError(
                    f"{part.id} needs {part.gpus} GPUs, {len(visible)} are left on this machine (CUDA_VISIBLE_DEVICES "
                    "or nvidia-smi): lower samplers' count or gpus"
                )
            self.gpus[part.id], visible = ",".join(visible[: part.gpus]), visible[part.gpus :]

    def environment(self, part: PartSpec) -> dict[str, str]:
        """The environment of ``part``'s process: this one's, the fleet file's, and the part's bindings."""
        env = {**os.environ, **part.environment}
        if part.id in self.cores:
            env["VLLM_CPU_OMP_THREADS_BIND"] = omp_bind(self.cores[part.id], part.shards)
        if part.id in self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[part.id]
        if part.kind == "sandbox" and self.token:
            env["AGENTGSPO_SANDBOX_TOKEN"] = self.token
        return env

    async def start(self, part: PartSpec, restarts: int) -> Incarnation:
        """Start ``part`` (its ``restarts``-th restart); returns once its keeper reported the server's pid."""
        port = free_port(self.host)
        while port in self._used_ports:  # never an earlier incarnation's URL (the kernel may hand a port out again)
            port = free_port(self.host)
        self._used_ports.add(port)
        log = self.run_dir / f"{part.id}.log"
        pidfile = self.run_dir / f"{part.id}.pid"
        pidfile.unlink(missing_ok=True)
        cores = self.cores.get(part.id)
        command = keeper_command(pidfile, cores, part.command(sys.executable, self.host, port))
        with open(log, "a") as handle:
            handle.write(f"\n=== {part.id}, incarnation {restarts}, {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n")
            handle.flush()
            process = subprocess.Popen(
                command, env=self.environment(part), stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self._keepers.append(process)
        started_at = time.time()
        pids = await read_pidfile(pidfile, process)
        loop = asyncio.get_running_loop()
        exited = loop.create_future()

        def wait() -> None:
            status = process.wait()
            loop.call_soon_threadsafe(lambda: exited.done() or exited.set_result(exit_reason(status)))

        threading.Thread(target=wait, daemon=True, name=f"wait-{part.id}").start()
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return Incarnation(
            f"http://{shown}:{port}",
            self.node,
            str(log),
            started_at,
            pids["pid"],
            pids["pgid"],
            pids["keeper_pid"],
            cores,
            exited=exited,
            handle=process,
        )

    async def stop(self, part: PartSpec, incarnation: Incarnation | None, graceful: bool = True) -> None:
        """Stop ``part``: its keeper stops the server's group (SIGTERM, then SIGKILL after the keeper's grace of
        10 s; ``graceful=False``: SIGKILL at once); anything left after that (a keeper that hung) is killed here."""
        if incarnation is None:
            return
        process: subprocess.Popen = incarnation.handle
        if not graceful and incarnation.pgid:
            try:
                os.killpg(incarnation.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30.0  # the keeper's grace (10 s) and its SIGKILL
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if process.poll() is None:
            process.kill()
            await asyncio.to_thread(process.wait)
        if incarnation.pgid and group_members(incarnation.pgid):
            try:
                os.killpg(incarnation.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def restart(self, part: PartSpec, incarnation: Incarnation | None, restarts: int) -> Incarnation:
        """Stop what is left of ``incarnation`` (briefly: it is unhealthy) and start ``part`` again."""
        await self.stop(part, incarnation, graceful=False)
        return await self.start(part, restarts)

    async def close(self) -> None:
        """Stop any keeper still running (one being started when the fleet was stopped) and release the cores."""
        for process in self._keepers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self._keepers:
            await asyncio.to_thread(process.wait)
        self._keepers = []
        self.close_sync()

    def close_sync(self) -> None:
        """:meth:`close` outside an event loop."""
        for fd in self._locks:
            os.close(fd)
        self._locks = []


def _visible_gpus() -> list[str]:
    """GPU indices this process may hand out: ``CUDA_VISIBLE_DEVICES``, else what ``nvidia-smi -L`` lists."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [gpu for gpu in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if gpu.strip()]
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(line for line in listed.splitlines() if line.startswith("GPU "))]
