"""``fleet up``, ``fleet status`` and ``fleet down``: start a fleet's supervisor in the background and wait until every
part serves, print where each part stands, stop everything and check that nothing is left.

The supervisor (``agentgspo.fleet.supervisor``) runs detached in a session of its own, logging to
``NAME.fleet/supervisor.log`` beside the manifest; ``up`` returns once the manifest's state is ``running`` (every part
passed a probe), and otherwise stops what it started and says why (the supervisor's error, a failed part's log tail).
``down`` signals the supervisor, which stops every part through its launcher; then every process the manifest names
on this machine (each part's keeper and process group, the supervisor) is checked gone, and killed if it is not.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from agentgspo.fleet.local import group_members, pid_alive
from agentgspo.core.fleet_manifest import HEARTBEAT_S, Manifest, manifest_path, read_manifest, run_folder
from agentgspo.fleet.spec import FleetSpec, load_spec

__all__ = ["prepare", "fleet_up", "fleet_status", "fleet_down", "format_status", "supervisor_alive", "leftovers"]


def supervisor_alive(manifest: Manifest) -> bool:
    """Whether the manifest's supervisor still runs (on this machine: its pid; elsewhere: a fresh heartbeat)."""
    if manifest.supervisor.host == socket.gethostname():
        return pid_alive(manifest.supervisor.pid)
    return time.time() - manifest.updated_at < 3 * HEARTBEAT_S


def leftovers(manifest: Manifest) -> list[str]:
    """What the manifest names on this machine that still runs: the supervisor, keepers, part process groups."""
    here = socket.gethostname()
    found = []
    if manifest.supervisor.host == here and pid_alive(manifest.supervisor.pid):
        found.append(f"supervisor pid {manifest.supervisor.pid}")
    for part in manifest.parts:
        local = part.node == here or manifest.launcher == "local" or _local_address(part.node)
        if not local:
            continue
        if part.keeper_pid and pid_alive(part.keeper_pid):
            found.append(f"{part.id}: keeper pid {part.keeper_pid}")
        if part.pgid and group_members(part.pgid):
            found.append(f"{part.id}: process group {part.pgid} (pids {group_members(part.pgid)})")
    return found


def _local_address(address: str | None) -> bool:
    """Whether ``address`` (a Ray node IP) is one of this machine's."""
    if not address:
        return False
    if address.startswith("127."):
        return True
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def format_status(manifest: Manifest, alive: bool | None = None) -> str:
    """A table of every part: id, kind, status, URL, restarts, weights, last probe, last error."""
    alive = supervisor_alive(manifest) if alive is None else alive
    age = time.time() - manifest.updated_at
    lines = [
        f"fleet {manifest.fleet} ({manifest.launcher}{f', ray {manifest.ray_address}' if manifest.ray_address else ''}"
        f"): {manifest.state}; supervisor pid {manifest.supervisor.pid} on {manifest.supervisor.host} "
        f"{'running' if alive else 'NOT RUNNING'}; updated {age:.1f} s ago; learner weights version "
        f"{manifest.weight_version}",
    ]
    if manifest.error:
        lines.append(f"error: {manifest.error}")
    rows = [("part", "kind", "status", "url", "restarts", "weights", "probe", "last error")]
    for part in manifest.parts:
        probe = "-"
        if part.probe is not None:
            probe = f"{'ok' if part.probe.ok else 'FAIL'} {part.probe.latency_s:.2f}s"
            probe += f" ({part.probe.detail})" if part.probe.detail and part.probe.ok else ""
        weights = "-" if part.weight_version is None else str(part.weight_version)
        restarts = f"{part.restarts}/{part.max_restarts}"
        error = (part.last_error or "-")[:80]
        rows.append((part.id, part.kind, part.status, part.url or "-", restarts, weights, probe, error))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    return "\n".join(lines)


def _log_tail(path: str | None, lines: int = 25) -> str:
    if not path or not Path(path).is_file():
        return "(no log on this machine)"
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def prepare(spec_path: str | Path, manifest: str | Path | None = None) -> tuple[FleetSpec, Path]:
    """Check the fleet file (a wrong one fails here, naming its fields, before anything starts) and that its fleet is
    not already up; what a fleet whose supervisor died left running is killed. Returns (spec, manifest path)."""
    spec = load_spec(spec_path)
    path = (Path(manifest) if manifest else manifest_path(spec_path)).resolve()
    if path.exists():
        try:
            previous = read_manifest(path)
        except ValueError:  # not a manifest of ours: replaced
            previous = None
        if previous is not None and previous.state != "stopped" and supervisor_alive(previous):
            raise ValueError(
                f"fleet {previous.fleet} is already up (supervisor pid {previous.supervisor.pid}, manifest {path}): "
                f"agentgspo fleet down {spec_path}"
            )
        if previous is not None and leftovers(previous):
            print(f"fleet {previous.fleet}: its supervisor is gone; killing what it left: {leftovers(previous)}")
            _kill_all(previous)
        path.unlink()
    return spec, path


def fleet_up(
    spec_path: str | Path, manifest: str | Path | None = None, timeout_s: float = 1800.0, quiet: bool = False
) -> int:
    """Start the fleet of ``spec_path`` in the background; return 0 once every part serves, 1 (having stopped it
    and printed why) if the supervisor fails, a part is given up or ``timeout_s`` passes first. A KeyboardInterrupt
    while it waits stops what it started, then propagates."""
    spec, path = prepare(spec_path, manifest)
    run_dir = run_folder(path)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "supervisor.log"
    command = [
        sys.executable,
        "-m",
        "agentgspo.fleet.supervisor",
        str(Path(spec_path).resolve()),
        "--manifest",
        str(path),
    ]
    with open(log, "w") as handle:
        supervisor = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    say = (lambda text: None) if quiet else (lambda text: print(text, flush=True))
    say(f"fleet {spec.name}: supervisor pid {supervisor.pid} ({spec.launcher} launcher), log {log}")
    try:
        return _wait_until_up(spec, path, supervisor, log, timeout_s, say)
    except KeyboardInterrupt:  # Ctrl-C (or a caller's signal handler) while waiting: stop what was started
        print(f"fleet {spec.name}: interrupted while starting; stopping it", file=sys.stderr, flush=True)
        _stop_started(path, supervisor)
        raise


def _stop_started(path: Path, supervisor: subprocess.Popen) -> None:
    """Stop a fleet ``fleet_up`` started: through its manifest once the supervisor wrote one, else the supervisor."""
    try:
        read_manifest(path)
    except (FileNotFoundError, ValueError):
        if supervisor.poll() is None:
            supervisor.terminate()
            supervisor.wait()
        return
    fleet_down(path, quiet=True)


def _wait_until_up(spec: FleetSpec, path: Path, supervisor: subprocess.Popen, log: Path, timeout_s: float, say) -> int:
    """``fleet_up``'s wait: 0 once the manifest says running; 1 (the fleet stopped, why printed) on a failure."""
    started, seen = time.monotonic(), {}
    while True:
        failure = None
        if supervisor.poll() is not None:
            failure = f"the supervisor exited with status {supervisor.returncode}"
        current = None
        try:
            current = read_manifest(path)
        except (FileNotFoundError, ValueError):
            pass
        if current is not None:
            for part in current.parts:
                if seen.get(part.id) != (part.status, part.restarts):
                    seen[part.id] = (part.status, part.restarts)
                    at = f" at {part.url}" if part.url and part.status != "unhealthy" else ""
                    note = f" ({part.last_error})" if part.status in ("unhealthy", "failed") else ""
                    say(f"  {time.monotonic() - started:6.1f} s  {part.id}: {part.status}{at}{note}")
            if current.state == "running":
                say(f"fleet {spec.name} is up in {time.monotonic() - started:.1f} s; manifest {path}")
                return 0
            failed = [part for part in current.parts if part.status == "failed"]
            if current.state == "failed":
                failure = f"the fleet failed: {current.error}"
            elif failed:
                failure = "given up: " + "; ".join(f"{p.id}: {p.last_error}\n{_log_tail(p.log)}" for p in failed)
        if failure is None and time.monotonic() - started > timeout_s:
            failure = f"not every part served within {timeout_s} s (--timeout)"
        if failure is not None:
            print(f"fleet {spec.name}: {failure}\nsupervisor log ({log}):\n{_log_tail(str(log))}", file=sys.stderr)
            if current is not None:
                print(format_status(current), file=sys.stderr)
            _stop_started(path, supervisor)
            return 1
        time.sleep(0.2)


def fleet_status(manifest: str | Path) -> tuple[int, str]:
    """(0 if the supervisor runs and every part serves, else 1; the status table)."""
    current = read_manifest(manifest)
    alive = supervisor_alive(current)
    return (0 if alive and current.state == "running" else 1), format_status(current, alive)


def fleet_down(manifest: str | Path, timeout_s: float = 120.0, quiet: bool = False) -> int:
    """Stop the fleet of ``manifest``: SIGTERM its supervisor (which stops every part), wait up to ``timeout_s``, kill
    whatever the manifest names that is still running on this machine; 0 when nothing is left, else 1."""
    path = Path(manifest)
    current = read_manifest(path)
    say = (lambda text: None) if quiet else (lambda text: print(text, flush=True))
    here = current.supervisor.host == socket.gethostname()
    if not here:
        raise ValueError(
            f"fleet {current.fleet}'s supervisor runs on {current.supervisor.host}, not here: run fleet down there"
        )
    started = time.monotonic()
    if pid_alive(current.supervisor.pid):
        os.kill(current.supervisor.pid, signal.SIGTERM)
        while pid_alive(current.supervisor.pid) and time.monotonic() - started < timeout_s:
            time.sleep(0.05)
    current = read_manifest(path)  # the supervisor's last word: every part stopped
    left = leftovers(current)
    if left:
        say(f"fleet {current.fleet}: still running after {time.monotonic() - started:.1f} s, killing: {left}")
        _kill_all(current)
        left = leftovers(current)
    if left:
        print(f"fleet {current.fleet}: could not stop {left}", file=sys.stderr)
        return 1
    say(f"fleet {current.fleet} stopped in {time.monotonic() - started:.1f} s; nothing of it is left running")
    return 0


def _kill_all(manifest: Manifest) -> None:
    """SIGKILL the supervisor's session and every part's keeper and process group (on this machine)."""
    targets = [(os.killpg, manifest.supervisor.pid)]
    for part in manifest.parts:
        targets += [(os.kill, part.keeper_pid)] if part.keeper_pid else []
        targets += [(os.killpg, part.pgid)] if part.pgid else []
    for kill, target in targets:
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 10
    while leftovers(manifest) and time.monotonic() < deadline:
        time.sleep(0.05)
