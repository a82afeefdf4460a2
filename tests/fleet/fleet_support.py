"""Shared by the fleet tests: `agentgspo fleet` run as a command (and a fleet up for a block), waits on the manifest,
a part killed and watched until it is back, the processes a manifest names, and a local Ray cluster started and
stopped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from agentgspo.fleet.control import format_status, leftovers
from agentgspo.fleet.local import free_ports, group_members, pid_alive
from agentgspo.core.fleet_manifest import Manifest, manifest_path, read_manifest

ROOT = Path(__file__).resolve().parents[2]
#: The openenv venv's Python (tests/interop/openenv_support.py): env servers run there, or are left out.
OPENENV_PYTHON = Path(os.environ.get("AGENTGSPO_OPENENV_PYTHON", ROOT / ".venv-openenv" / "bin" / "python"))
SERVING = ("healthy", "needs_weights")
#: the issue's bound on noticing a dead part (measured: well under 1 s for a killed process).
NOTICE_BOUND_S = 10.0
#: a restarted vLLM replica on one loaded core: 30-80 s measured; generous for a busy CI machine.
BACK_BOUND_S = 900.0
RAY = str(Path(sys.executable).with_name("ray"))


def fleet(action: str, spec: Path, *extra: str, timeout_s: float = 1800.0) -> subprocess.CompletedProcess:
    """``agentgspo fleet ACTION SPEC EXTRA...`` as a command (a fresh process, as a user runs it)."""
    return subprocess.run(
        [sys.executable, "-m", "agentgspo.cli", "fleet", action, str(spec), *extra],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
    )


@contextlib.contextmanager
def fleet_running(spec: Path):
    """``agentgspo fleet up SPEC`` (which must succeed); yields the manifest's path; ``fleet down`` at the end,
    whatever happened."""
    up = fleet("up", spec)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield manifest_path(spec)
    finally:
        fleet("down", spec)


def wait_for(path: Path, condition, timeout_s: float, what: str) -> Manifest:
    """The first manifest read for which ``condition(manifest)`` holds (the file is polled every 20 ms)."""
    deadline = time.monotonic() + timeout_s
    while True:
        manifest = read_manifest(path)
        if condition(manifest):
            return manifest
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s\n{format_status(manifest)}")
        time.sleep(0.02)


def kill_and_watch(path: Path, part_id: str, kill) -> dict:
    """Kill part ``part_id`` with ``kill(entry)``; measure when the manifest takes it out of service and when it is
    back (a new incarnation passing its probe). Returns the timings and the manifests at both moments."""
    before = read_manifest(path).part(part_id)
    started = time.monotonic()
    kill(before)
    out = wait_for(path, lambda m: m.part(part_id).status not in SERVING, 60, f"{part_id} taken out of service")
    noticed_s = time.monotonic() - started
    back = wait_for(
        path,
        lambda m: m.part(part_id).status in SERVING and m.part(part_id).restarts > before.restarts,
        BACK_BOUND_S,
        f"{part_id} back",
    )
    timings = {"noticed_s": round(noticed_s, 3), "back_s": round(time.monotonic() - started, 1)}
    print(f"{part_id}: {timings}", flush=True)
    return {**timings, "before": before, "out": out, "back": back}


def kill_all_and_watch(path: Path, kills: dict) -> dict[str, dict]:
    """:func:`kill_and_watch` for several parts at once (part id -> kill), each watched by a thread of its own: the
    restarts overlap, as they would in a real failure, and the test waits for the slowest only."""
    results: dict[str, dict] = {}
    errors: dict[str, BaseException] = {}

    def watch(part_id: str) -> None:
        try:
            results[part_id] = kill_and_watch(path, part_id, kills[part_id])
        except BaseException as exc:  # re-raised below, in the test's thread
            errors[part_id] = exc

    threads = [threading.Thread(target=watch, args=(part_id,)) for part_id in kills]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise next(iter(errors.values()))
    return results


def processes(manifest: Manifest) -> dict[str, list[int]]:
    """Every live process a manifest names on this machine: the supervisor, keepers, part groups, Ray actors."""
    found = {"supervisor": [manifest.supervisor.pid] if pid_alive(manifest.supervisor.pid) else []}
    for part in manifest.parts:
        pids = [pid for pid in (part.keeper_pid, part.actor_pid) if pid and pid_alive(pid)]
        found[part.id] = pids + (group_members(part.pgid) if part.pgid else [])
    return found


def generates(url: str) -> bool:
    """Whether the vLLM server at ``url`` generates a token from prompt ids."""
    body = {"model": "policy", "prompt": [5, 6, 7], "max_tokens": 2, "temperature": 0.0}
    reply = httpx.post(f"{url}/v1/completions", json=body, timeout=120)
    return reply.status_code == 200 and bool(reply.json()["choices"][0]["text"] is not None)


def closed(url: str) -> bool:
    """Whether nothing listens at ``url``'s port any more."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as sock:
        return sock.connect_ex((host.strip("[]"), int(port))) != 0


def nothing_left(manifest: Manifest) -> None:
    """Assert that no process the manifest names is alive and no part's port answers."""
    assert not leftovers(manifest), leftovers(manifest)
    assert not any(processes(manifest).values()), processes(manifest)
    assert all(closed(part.url) for part in manifest.parts if part.url)


@contextlib.contextmanager
def ray_head():
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs, 100 MiB object store), its ports free ones, this venv first on
    its PATH (a Ray job's entrypoint finds `agentgspo` there), with its dashboard (the Job Submission API). Yields
    (the cluster's address, the dashboard's URL); stopped with its `ray start --block` process group at the end,
    which must leave nothing."""
    temp = tempfile.mkdtemp(prefix="rayf", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    flags = (
        "--port", "--dashboard-port", "--ray-client-server-port", "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port", "--node-manager-port",
        "--object-manager-port",
    )  # fmt: skip
    # chosen together, so distinct: Ray refuses a port named twice
    ports = dict(zip(flags, map(str, free_ports("127.0.0.1", len(flags))), strict=True))
    port, dashboard_port = ports.pop("--port"), ports.pop("--dashboard-port")
    dashboard = [
        "--include-dashboard",
        "true",
        "--dashboard-host",
        "127.0.0.1",
        "--dashboard-port",
        dashboard_port,
    ]
    command = [RAY, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", port]
    command += ["--num-cpus", "2", "--object-store-memory", str(100 * 2**20), *dashboard]
    command += ["--disable-usage-stats", "--temp-dir", temp, *[part for item in ports.items() for part in item]]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    head = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env
    )
    started = threading.Event()
    output: list[str] = []

    def read() -> None:
        for line in head.stdout:
            output.append(line)
            if "Ray runtime started" in line:
                started.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 300
        while not started.wait(0.1):
            assert head.poll() is None and time.monotonic() < deadline, "ray start failed:\n" + "".join(output)
        yield f"127.0.0.1:{port}", f"http://127.0.0.1:{dashboard_port}"
    finally:
        with contextlib.suppress(ProcessLookupError):  # a `ray start` that failed has already exited
            os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=120)
        deadline = time.monotonic() + 60
        while group_members(head.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = group_members(head.pid)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"Ray's processes outlived the cluster: {left}"
