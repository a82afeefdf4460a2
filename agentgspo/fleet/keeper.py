"""The keeper: the small process between a launcher and one part's server, so that a part never outlives its
launcher and never leaves helpers behind.

    python -m agentgspo.fleet.keeper --pidfile PART.pid [--cores 0,1] [--grace-s 10] -- COMMAND...

It starts COMMAND in a process group of its own (pinned to ``--cores``), writes ``{"pid", "pgid", "keeper_pid"}`` to
the pid file, and then:

- when the server exits (killed, crashed), kills what is left of its group (vLLM's engine core outlives its API
  server otherwise: measured) and exits with the server's status (128 + N for signal N);
- on SIGTERM, SIGINT or SIGHUP, or when its parent dies (the supervisor, a Ray actor killed by Ray: checked every
  ``POLL_S`` seconds, since a parent killed with SIGKILL sends nothing), stops the group: SIGTERM, then SIGKILL after
  ``--grace-s`` seconds;
- reaps every descendant (it is their subreaper), so no zombie of a part is left either.

Linux only (process groups, ``prctl``). The keeper imports nothing heavy and holds no lock a part needs.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

__all__ = ["POLL_S", "main"]

#: how often the keeper checks that its parent is alive and its server still runs.
POLL_S = 0.25
_PR_SET_CHILD_SUBREAPER = 36


def _log(message: str) -> None:
    print(f"[keeper {os.getpid()}] {message}", file=sys.stderr, flush=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _reap() -> None:
    """Collect every exited descendant (this process is their subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM the group, SIGKILL it after ``grace_s``; returns once nothing of it is left (reaped)."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            _reap()
            if not _group_alive(pgid):
                return
            time.sleep(0.05)
    _reap()


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str] | None = None) -> int:
    """Run the keeper (module docstring); returns the exit status to leave with."""
    parser = argparse.ArgumentParser(prog="python -m agentgspo.fleet.keeper")
    parser.add_argument("--pidfile", required=True)
    parser.add_argument("--cores", default="", help="comma-separated cores the server is pinned to")
    parser.add_argument("--grace-s", type=float, default=10.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: orphans go to init instead
        pass
    stop = {"signal": None}

    def on_signal(number, frame):
        stop["signal"] = number

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, on_signal)
    cores = {int(core) for core in args.cores.split(",") if core.strip()}
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    server = subprocess.Popen(command, start_new_session=True, preexec_fn=pin, stdin=subprocess.DEVNULL)
    pgid = server.pid
    temporary = f"{args.pidfile}.tmp"
    with open(temporary, "w") as handle:
        json.dump({"pid": server.pid, "pgid": pgid, "keeper_pid": os.getpid()}, handle)
    os.replace(temporary, args.pidfile)
    _log(f"started pid {server.pid} (group {pgid}{f', cores {sorted(cores)}' if cores else ''}): {' '.join(command)}")
    while True:
        try:
            returncode = server.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            returncode = None
        if returncode is not None:
            _log(f"server exited with status {_status(returncode)}; stopping what is left of group {pgid}")
            _stop_group(pgid, 0.0)
            return _status(returncode)
        reason = (
            f"signal {signal.Signals(stop['signal']).name}"
            if stop["signal"] is not None
            else ("parent gone" if os.getppid() != parent else None)
        )
        if reason is not None:
            _log(f"{reason}: stopping group {pgid}")
            _stop_group(pgid, args.grace_s)
            server.poll()
            return 0 if stop["signal"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
