"""One command for a whole run, the fleet and the learner: ``agentgspo fleet run`` and ``agentgspo fleet submit``.

``fleet run FILE -- COMMAND ARGS...`` brings the fleet up (:func:`agentgspo.fleet.control.fleet_up`), runs COMMAND
(the learner, usually under ``accelerate launch``) with ``AGENTGSPO_FLEET_MANIFEST`` set to the manifest's absolute
path and every literal ``{manifest}`` in its arguments replaced by it (``--server-url 'fleet:{manifest}'``), and
brings the fleet down once COMMAND is over, whatever ended it (:func:`agentgspo.fleet.control.fleet_down`, which
checks that nothing is left). Its exit status is COMMAND's (128 + N for a command killed by signal N), or 1 when the
fleet could not be brought up or down.

COMMAND runs in a process group of its own, its output passed through, its stdin empty. SIGINT and SIGTERM that
``fleet run`` receives go to that group (the learner checkpoints on the first and exits 130 / 143), except in a Ray
job, whose stop (``ray job stop``) already signals every process of the job, COMMAND's included: passing it on would
deliver it twice, and the learner takes a second signal as "stop now, without saving". A third signal kills the
group. Processes of the group that outlive COMMAND (the learner under ``accelerate launch``, whose simple launcher
dies on SIGTERM at once) are waited for before the fleet comes down.

``fleet submit FILE -- COMMAND ARGS...`` submits ``agentgspo fleet run FILE -- COMMAND ARGS...`` as a Ray job
(Ray's Job Submission SDK, through the dashboard's address), so the fleet's supervisor and the learner both run on
the head node, and follows its logs until it ends.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentgspo.fleet.control import fleet_down, fleet_up, leftovers
from agentgspo.fleet.local import group_members
from agentgspo.core.fleet_manifest import manifest_path, read_manifest
from agentgspo.fleet.spec import load_spec

__all__ = [
    "MANIFEST_ENV",
    "STRAY_GRACE_S",
    "check_stray_grace",
    "command_with_manifest",
    "fleet_run",
    "dashboard_address",
    "job_entrypoint",
    "fleet_submit",
]

#: The environment variable that gives COMMAND the manifest's absolute path.
MANIFEST_ENV = "AGENTGSPO_FLEET_MANIFEST"
#: Replaced by the manifest's absolute path in COMMAND's arguments.
PLACEHOLDER = "{manifest}"
#: Seconds processes of COMMAND's group may outlive it, unsignalled, before they are told to stop (SIGTERM), and
#: again before they are killed: strays (a server the command left running), not a learner saving its checkpoint.
#: ``fleet run --stray-grace S`` sets it for one run.
STRAY_GRACE_S = 10.0
#: Ray's job supervisor sets this variable in the environment of a job's entrypoint (ray/dashboard/modules/job).
RAY_JOB_MARKER = "RAY_JOB_CONFIG_JSON_ENV_VAR"
#: The dashboard a Ray head started with `ray start --head` serves the Job Submission API on.
DEFAULT_DASHBOARD = "http://127.0.0.1:8265"
#: What Ray answers for jobs that are over.
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def missing_command(action: str, spec_path: str | Path) -> str:
    """The message for ``fleet run|submit FILE`` without a command: where it goes and an example."""
    return (
        f"fleet {action} needs the command to run after `--`: agentgspo fleet {action} {spec_path} -- COMMAND ARGS... "
        f"(e.g. -- agentgspo quickstart --backend server --server-url 'fleet:{PLACEHOLDER}')"
    )


def command_with_manifest(command: list[str], manifest: str | Path) -> list[str]:
    """``command`` with every literal ``{manifest}`` in its arguments replaced by ``manifest``."""
    return [argument.replace(PLACEHOLDER, str(manifest)) for argument in command]


def check_stray_grace(seconds: float | None) -> float:
    """The stray grace to use: ``seconds``, or :data:`STRAY_GRACE_S` when ``None``; refused unless a finite number of
    seconds >= 0 (``--stray-grace``)."""
    if seconds is None:
        return STRAY_GRACE_S
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"--stray-grace {seconds:g}: must be a number of seconds >= 0 (default {STRAY_GRACE_S:g})")
    return seconds


def _say(text: str) -> None:
    print(f"agentgspo fleet run: {text}", file=sys.stderr, flush=True)


class _Relay:
    """SIGINT and SIGTERM of ``fleet run``, by phase: while the fleet starts (``up``), the first interrupts the start
    (``KeyboardInterrupt``: ``fleet_up`` stops what it started); while COMMAND starts, they wait; while it (or its
    group) runs (``command``), they go to its group (a third one: SIGKILL), unless ``forward`` is off (a Ray job:
    Ray signalled the group itself); while the fleet comes down (``down``), they are noted. Strays of a group that
    was not told to stop get ``stray_grace_s`` (:meth:`wait_group`)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, forward: bool = True, stray_grace_s: float = STRAY_GRACE_S):
        self.phase = "up"
        self.forward = forward
        self.stray_grace_s = stray_grace_s
        self.group: int | None = None
        self.received: list[int] = []
        self.pending: list[int] = []
        self.forwarded = 0
        self.told = False  # whether COMMAND's group was told to stop (by us, or by Ray)
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Relay:
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        self.received.append(signum)
        name = signal.Signals(signum).name
        if self.phase == "up" and len(self.received) == 1:
            raise KeyboardInterrupt(name)
        if self.phase == "command" and self.group is None:
            self.pending.append(signum)
        elif self.phase == "command":
            self.relay(signum)
        else:
            _say(f"{name}: the fleet is being stopped; wait")

    def started(self, group: int) -> None:
        """COMMAND runs, in process group ``group``: signals received while it started go to it now."""
        self.group = group
        for signum in self.pending:
            self.relay(signum)
        self.pending.clear()

    def relay(self, signum: int) -> None:
        """Pass ``signum`` to COMMAND's group (the third time: SIGKILL), or say why not."""
        name = signal.Signals(signum).name
        self.told = True
        if not self.forward:
            _say(f"{name}: Ray's job stop signals every process of the job, the command's too; not passed on again")
            return
        self.forwarded += 1
        if self.forwarded == 1:
            _say(f"{name} passed to the command (process group {self.group}); the fleet stops once it has exited")
        elif self.forwarded == 2:
            _say(f"{name} passed to the command again (a third signal kills it)")
        else:
            _say(f"{name} a third time: killing the command's processes")
        self.signal_group(signum if self.forwarded < 3 else signal.SIGKILL)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to COMMAND's process group (gone already: nothing)."""
        try:
            os.killpg(self.group, signum)
        except ProcessLookupError:
            pass

    def wait_group(self) -> None:
        """Wait until no process of COMMAND's group is left. A group told to stop is waited for (the learner saves
        its checkpoint); strays of one that was not get ``stray_grace_s``, then SIGTERM, as long again, SIGKILL."""
        grace = self.stray_grace_s
        deadline = None if self.told else time.monotonic() + grace
        noted, strays = time.monotonic(), 0
        while members := group_members(self.group):
            now = time.monotonic()
            if self.told:
                deadline = None
            if deadline is not None and now > deadline:
                signum = signal.SIGTERM if strays == 0 else signal.SIGKILL
                _say(f"processes {members} outlived the command by {grace:g} s: {signum.name}")
                self.signal_group(signum)
                strays, deadline = strays + 1, now + grace
            elif deadline is None and now - noted > 30:
                _say(f"waiting for processes {members} of the command to exit")
                noted = now
            time.sleep(0.05)


def _own_group() -> dict[str, Any]:
    """Popen arguments that start the child in a process group of its own."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}


def _run_command(argv: list[str], env: dict[str, str], relay: _Relay) -> int:
    """Run ``argv`` in a process group of its own until it and its group are gone; its exit status."""
    relay.phase = "command"
    sys.stdout.flush()
    try:
        child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, **_own_group())
    except OSError as exc:
        _say(f"cannot run {argv[0]!r}: {exc.strerror or exc} (is it installed, on PATH, executable?)")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    relay.started(child.pid)
    status = child.wait()
    relay.wait_group()
    return 128 - status if status < 0 else status


def _bring_down(path: Path) -> int:
    """``fleet_down`` of the manifest at ``path``; 1, with the reason, if it cannot."""
    try:
        return fleet_down(path)
    except (OSError, ValueError) as exc:
        _say(f"could not bring the fleet down: {exc}; see `agentgspo fleet status` and `fleet down`")
        return 1


def fleet_run(
    spec_path: str | Path,
    command: list[str],
    manifest: str | Path | None = None,
    timeout_s: float = 1800.0,
    stray_grace_s: float | None = None,
) -> int:
    """Bring the fleet of ``spec_path`` up, run ``command`` with its manifest (``AGENTGSPO_FLEET_MANIFEST``, and
    ``{manifest}`` replaced in its arguments), bring the fleet down whatever happened. Returns the command's exit
    status (128 + N when signal N killed it), or 1 when the fleet could not be brought up or down. Processes the
    command left running get ``stray_grace_s`` (default :data:`STRAY_GRACE_S`) before SIGTERM, as long again before
    SIGKILL."""
    if not command:
        raise ValueError(missing_command("run", spec_path))
    stray_grace_s = check_stray_grace(stray_grace_s)
    path = (Path(manifest) if manifest else manifest_path(spec_path)).resolve()
    argv = command_with_manifest(command, path)
    env = {**os.environ, MANIFEST_ENV: str(path)}
    with _Relay(forward=RAY_JOB_MARKER not in os.environ, stray_grace_s=stray_grace_s) as relay:
        try:
            if fleet_up(spec_path, path, timeout_s=timeout_s) != 0:
                return 1
        except KeyboardInterrupt:
            relay.phase = "down"
            _down_if_left(path)
            signum = relay.received[0] if relay.received else signal.SIGINT
            _say(f"{signal.Signals(signum).name} while the fleet started: stopped it; the command did not run")
            return 128 + signum
        status = 1
        try:
            status = _run_command(argv, env, relay)
        finally:
            relay.phase = "down"
            down = _bring_down(path)
    _say(f"the command exited with status {status}; the fleet is {'down' if down == 0 else 'NOT down'}")
    return status if down == 0 else 1


def _down_if_left(path: Path) -> None:
    """Bring down a fleet whose start was interrupted before ``fleet_up`` could (its manifest names live parts)."""
    try:
        current = read_manifest(path)
    except (OSError, ValueError):
        return
    if current.state != "stopped" or leftovers(current):
        _bring_down(path)


# --- fleet submit: the same, as a Ray job --------------------------------------------------------------------------


def dashboard_address(address: str | None = None) -> str:
    """The Ray dashboard to submit to: ``address``, else ``$RAY_API_SERVER_ADDRESS``, else ``$RAY_ADDRESS`` when it is
    an http(s) URL, else :data:`DEFAULT_DASHBOARD`."""
    if address:
        return address
    if os.environ.get("RAY_API_SERVER_ADDRESS"):
        return os.environ["RAY_API_SERVER_ADDRESS"]
    ray_address = os.environ.get("RAY_ADDRESS", "")
    return ray_address if ray_address.startswith(("http://", "https://")) else DEFAULT_DASHBOARD


def job_entrypoint(
    spec_path: str | Path,
    command: list[str],
    working_dir: str | Path | None = None,
    manifest: str | Path | None = None,
    timeout_s: float | None = None,
    stray_grace_s: float | None = None,
) -> str:
    """The Ray job's shell command: ``agentgspo fleet run FILE [--manifest M] [--timeout T] [--stray-grace S] --
    COMMAND...``, quoted; FILE absolute, or relative to ``working_dir`` (which Ray uploads and runs the job in) when
    one is given."""
    spec = Path(spec_path).resolve()
    if working_dir is not None:
        folder = Path(working_dir).resolve()
        if not spec.is_relative_to(folder):
            raise ValueError(
                f"fleet file {spec_path}: not inside --working-dir {working_dir} (Ray uploads that folder and runs the "
                "job there): put the fleet file in it, or leave --working-dir out"
            )
        spec = spec.relative_to(folder)
    words = ["agentgspo", "fleet", "run", str(spec)]
    words += ["--manifest", str(manifest)] if manifest else []
    words += ["--timeout", f"{timeout_s:g}"] if timeout_s is not None else []
    words += ["--stray-grace", f"{stray_grace_s:g}"] if stray_grace_s is not None else []
    return shlex.join([*words, "--", *command])


def _job_client(address: str):
    """A ``JobSubmissionClient`` of the dashboard at ``address``, or ``None`` (the reason printed) if none answers."""
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:
        raise ImportError(f"fleet submit needs Ray's job SDK ({exc}): pip install 'agentgspo[ray]'") from exc
    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError) as exc:
        print(
            f"agentgspo fleet submit: no Ray dashboard answers at {address} ({exc}); start a head with "
            "`ray start --head --dashboard-host 127.0.0.1` (its dashboard: http://127.0.0.1:8265) or pass "
            "--address http://HEAD:8265",
            file=sys.stderr,
        )
        return None


def fleet_submit(
    spec_path: str | Path,
    command: list[str],
    address: str | None = None,
    working_dir: str | Path | None = None,
    wait: bool = True,
    manifest: str | Path | None = None,
    timeout_s: float | None = None,
    stop_timeout_s: float = 600.0,
    stray_grace_s: float | None = None,
) -> int:
    """Submit ``agentgspo fleet run spec_path -- command`` as a Ray job to the dashboard at ``address``
    (:func:`dashboard_address`); print its id and, with ``wait``, follow its logs until it ends: 0 if it
    SUCCEEDED, 1 otherwise (130 after a Ctrl-C, which stops the job and waits for it). ``stop_timeout_s``: how long
    Ray lets the job's processes exit after a stop before it kills them (``RAY_JOB_STOP_WAIT_TIME_S``);
    ``stray_grace_s``: passed to the job's ``fleet run`` (its default when ``None``)."""
    if not command:
        raise ValueError(missing_command("submit", spec_path))
    check_stray_grace(stray_grace_s)
    load_spec(spec_path)  # a wrong fleet file is refused here, naming its fields, before Ray is asked anything
    entrypoint = job_entrypoint(spec_path, command, working_dir, manifest, timeout_s, stray_grace_s)
    address = dashboard_address(address)
    client = _job_client(address)
    if client is None:
        return 1
    runtime_env: dict[str, Any] = {"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": str(int(stop_timeout_s))}}
    if working_dir is not None:
        runtime_env["working_dir"] = str(Path(working_dir).resolve())
    job_id = client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env)
    print(f"submitted Ray job {job_id} to {address}: {entrypoint}", flush=True)
    if not wait:
        print(f"follow it: ray job logs -f {job_id} --address {address}; stop it: ray job stop {job_id}", flush=True)
        return 0
    printed = [0]  # characters of the job's log printed so far
    tail = _LogTail(client, job_id, printed)
    try:
        tail.follow()
        status = _wait_terminal(client, job_id, timeout_s=60.0)
        if tail.error is not None:
            tail.print_rest()
    except KeyboardInterrupt:
        print(f"\nstopping Ray job {job_id} (its processes get SIGTERM) ...", file=sys.stderr, flush=True)
        client.stop_job(job_id)
        status = _wait_terminal(client, job_id, timeout_s=stop_timeout_s + 60)
        tail.join(timeout_s=10.0)  # the tail ends with the job
        tail.print_rest()  # what the stop made it say
        print(f"Ray job {job_id}: {status}", file=sys.stderr, flush=True)
        return 130
    info = client.get_job_info(job_id)
    message = f": {info.message}" if info.message else ""
    print(f"Ray job {job_id}: {status}{message}", flush=True)
    return 0 if status == "SUCCEEDED" else 1


class _LogTail:
    """The job's logs printed as they come, by a daemon thread with its own event loop, until the job ends;
    ``printed[0]`` counts the characters printed.

    The main thread only waits on the thread, so a Ctrl-C reaches it as ``KeyboardInterrupt`` at once. Under
    ``asyncio.run`` in the main thread a SIGINT only cancels the tail's task, and a cancel that the log websocket's
    receive did not act on left ``fleet submit`` deaf to Ctrl-C, its job running (seen in a loaded test run)."""

    def __init__(self, client, job_id: str, printed: list[int]) -> None:
        self.client, self.job_id, self.printed = client, job_id, printed
        self.lock = threading.Lock()  # printing and counting vs the main thread's final print
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"ray-job-logs-{job_id}", daemon=True)

    async def _print(self) -> None:
        async for lines in self.client.tail_job_logs(self.job_id):
            with self.lock:
                print(lines, end="", flush=True)
                self.printed[0] += len(lines)

    def _run(self) -> None:
        try:
            asyncio.run(self._print())
        except Exception as exc:  # noqa: BLE001 - reported by follow(); the job's status still decides
            self.error = exc

    def follow(self) -> None:
        """Until the log stream ends; a stream that broke is said, and what it missed printed from the job's log."""
        self.thread.start()
        while self.thread.is_alive():
            self.thread.join(0.2)
        if self.error is not None:
            print(f"the job's log stream broke ({self.error}); the rest of its log follows", file=sys.stderr)

    def join(self, timeout_s: float) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout_s)

    def print_rest(self) -> None:
        """What the job logged that the tail has not printed (yet): once, whatever the tail does next."""
        with self.lock:
            rest = self.client.get_job_logs(self.job_id)[self.printed[0] :]
            print(rest, end="", flush=True)
            self.printed[0] += len(rest)


def _wait_terminal(client, job_id: str, timeout_s: float) -> str:
    """The job's status once it is over (or as it stands after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = str(client.get_job_status(job_id).value)
        if status in TERMINAL or time.monotonic() > deadline:
            return status
        time.sleep(0.2)
