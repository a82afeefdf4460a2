"""Local backend: bubblewrap isolation plus rlimits, cgroups and CPU/wall limits (the default backend).

Each call starts one ``bwrap`` sandbox running the in-sandbox runner (``sandboxes/runner.py``), which runs the
tests of a submission in forked children, several at once (``workers``); a session (one submission) keeps a host
directory for the compiled binary and large test inputs, bound into each sandbox (small inputs travel in the spec).

Threat model.
Protects against (each property has an adversarial test in ``tests/sandboxes/test_isolation.py``):
  - network access: a new network namespace, no interfaces but its own loopback (the host's 127.0.0.1 is unreachable);
  - writing the host's files: the system (/usr and the /bin, /lib symlinks) is bound read-only, everything else is
    absent; the only writable place is a private size-limited tmpfs at /tmp that vanishes with the sandbox;
  - reading the expected answers or other host files: they are never bound in (inputs and the binary are read-only
    binds of a per-session directory that holds no answers);
  - processes outliving the call, including ones that call setsid(): a pid namespace (killed when its init exits),
    ``--die-with-parent``, after every test the kill of what it left (every process outside the running tests'
    process groups; ``kill(-1)`` once none runs), and, as root, a per-box cgroup (the sandbox is born in it)
    whose remaining processes are killed at the end;
  - fork bombs: a pids cgroup (root) or RLIMIT_NPROC (non-root); memory bombs: RLIMIT_AS per test (MLE) and a
    memory cgroup cap per box; infinite output: RLIMIT_FSIZE (OLE), and the runner reads at most the limit;
  - CPU burners and sleepers: ITIMER_PROF and RLIMIT_CPU per test, a wall-clock guard per test and per call;
  - terminal injection (TIOCSTI): ``--new-session``; all capabilities are dropped.
Does not protect against:
  - kernel exploits (bubblewrap shares the host kernel; use the Docker backend in a VM or gVisor for hostile code);
  - side channels and CPU contention between concurrent sandboxes; reading world-readable files under /usr;
  - a solution tampering with its own measurements or with its own tests running beside it (they share a uid with
    the runner inside the box): it can only hurt its own result, never see answers or affect other boxes.
Without bubblewrap it refuses to run; ``LocalSandbox(allow_unisolated=True)`` (or ``AGENTGSPO_ALLOW_UNISOLATED=1``)
runs the runner as a plain subprocess with rlimits only: for trusted code on machines without user namespaces.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from . import cgroups
from .peer import PeerWatch, mark_stop_requested
from .protocol import RUNNER_PATH, SandboxUnavailable, StartPeer, call_deadline_s, frame_spec, parse_events
from .runner import PEER_IDLE, STOP

__all__ = ["LocalSandbox", "LocalSession"]

INSTALL_HINT = (
    "bubblewrap is needed to isolate code: install it with `sudo apt-get install bubblewrap` "
    "(Fedora: `sudo dnf install bubblewrap`), and make sure unprivileged user namespaces are enabled "
    "(`sysctl kernel.unprivileged_userns_clone=1`). To run code WITHOUT isolation (trusted code only), pass "
    "allow_unisolated=True or set AGENTGSPO_ALLOW_UNISOLATED=1."
)
PYTHON = "/usr/bin/python3"
BOX_RUNNER = "/opt/agentgspo/runner.py"
BOX_RUNNER_CODE = "/opt/agentgspo/runner.code"
# Runs the runner from its code object, compiled once per process (compiling the source costs ~4 ms per sandbox).
RUNNER_LOADER = "import marshal\nwith open(%r, 'rb') as f:\n    code = marshal.load(f)\nexec(code)\n"
BOX_DATA = "/box"  # read-only bind of the session directory (inputs, compiled binary)
BOX_PCH = "/opt/agentgspo/pch"
BOX_PROCESS_MEMORY_MB = 2048  # the box's memory cgroup holds this much for processes, plus its tmpfs
# The box's pids cgroup holds this many times the session's pids limit. The box's own processes count there too: per
# call in flight a bwrap monitor, its pid namespace's init and the runner (interactive tests are a call each, up to a
# quarter of the limit at once: core.batch_workers), and so do processes that have just exited, which the kernel may
# go on counting for a while (measured here with 8 short interactive tests at once: 30 and more beyond the live ones,
# up to 69 in all against the default limit of 64, where bwrap or the runner failed to fork: a judge error).
BOX_PIDS_PER_LIMIT = 2
INLINE_INPUTS_MAX_BYTES = 16 << 20  # test inputs up to this total travel in the spec, larger ones as bound files
_probe_lock = threading.Lock()
_probe_result: str | None = None  # "" when bwrap works, else the reason
_code_lock = threading.Lock()
_code_path: str | None = None  # the compiled runner ("" when compiling it failed: run the source)


def _bwrap_problem() -> str:
    """ "" when bwrap can create a sandbox here, else why not (cached; thread-safe)."""
    global _probe_result
    with _probe_lock:
        if _probe_result is None:
            bwrap = shutil.which("bwrap")
            if bwrap is None:
                _probe_result = "bwrap not found on PATH"
            else:
                probe = subprocess.run(
                    [bwrap, "--unshare-all", "--die-with-parent", *_system_binds(), "/usr/bin/true"],
                    capture_output=True,
                    text=True,
                )
                _probe_result = "" if probe.returncode == 0 else f"bwrap failed: {probe.stderr.strip()}"
        return _probe_result


def _python() -> str:
    """The interpreter that runs the runner (the system python3, which the sandbox binds read-only)."""
    return PYTHON if os.path.exists(PYTHON) else shutil.which("python3") or "python3"


def _runner_code() -> str:
    """Path of the runner compiled by that interpreter (marshal format), made once per process (again if the file
    went missing, e.g. a /tmp cleaner); "" when compiling fails (the runner then runs from its source)."""
    global _code_path
    with _code_lock:
        if _code_path is None or (_code_path and not os.path.exists(_code_path)):
            _code_path = ""
            script = (
                "import marshal, sys\nsource = sys.stdin.read()\n"
                "sys.stdout.buffer.write(marshal.dumps(compile(source, 'runner.py', 'exec')))\n"
            )
            done = subprocess.run(
                [_python(), "-I", "-S", "-c", script], input=RUNNER_PATH.read_bytes(), capture_output=True
            )
            if done.returncode == 0 and done.stdout:
                directory = tempfile.mkdtemp(prefix="agentgspo-runner-")
                atexit.register(shutil.rmtree, directory, True)
                path = os.path.join(directory, "runner.code")
                with open(path, "wb") as f:
                    f.write(done.stdout)
                os.chmod(directory, 0o755)
                os.chmod(path, 0o644)
                _code_path = path
        return _code_path


def _system_binds() -> list[str]:
    """Read-only binds of the system: /usr plus the top-level symlinks or directories that point into it."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for extra in ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d"):
        args += ["--ro-bind-try", extra, extra]
    return args


class LocalSandbox:
    """The bubblewrap backend (see the module docstring for the threat model). Thread-safe.

    allow_unisolated: run without bubblewrap (rlimits only) when it is unavailable; off by default.
    tmpfs_mb: size of each sandbox's private /tmp.
    """

    name = "local"

    def __init__(self, allow_unisolated: bool = False, tmpfs_mb: int = 512) -> None:
        problem = _bwrap_problem()
        allow_unisolated = allow_unisolated or os.environ.get("AGENTGSPO_ALLOW_UNISOLATED") == "1"
        if problem and not allow_unisolated:
            raise SandboxUnavailable(f"local sandbox unavailable ({problem}). {INSTALL_HINT}")
        self.isolated = not problem
        self.tmpfs_mb = tmpfs_mb
        _runner_code()  # compile it now rather than in the first sandbox call
        self.use_cgroups = self.isolated and cgroups.available()

    @contextmanager
    def session(self, limits_pids: int = 64) -> Iterator["LocalSession"]:
        """Open a box for one submission; its directory and processes are removed on exit."""
        box = LocalSession(self, limits_pids)
        try:
            yield box
        finally:
            box.close()


class LocalSession:
    """One submission's box on the local backend (see ``sandboxes.protocol.Session``)."""

    def __init__(self, backend: LocalSandbox, pids_max: int) -> None:
        self.backend = backend
        self.isolated = backend.isolated
        self.host_dir = Path(tempfile.mkdtemp(prefix="agentgspo-box-"))
        os.chmod(self.host_dir, 0o755)
        (self.host_dir / "bin").mkdir()
        (self.host_dir / "in").mkdir()
        root = BOX_DATA if self.isolated else str(self.host_dir)
        self.bin_dir = f"{root}/bin"
        self.inputs_dir = f"{root}/in"
        from .judge.compile import host_pch_dir  # local import: compile imports nothing from here

        self._host_pch = host_pch_dir()
        self.pch_dir = (BOX_PCH if self.isolated else str(self._host_pch)) if self._host_pch else ""
        self.cgroup = None
        if backend.use_cgroups:
            self.cgroup = cgroups.BoxCgroup(
                BOX_PIDS_PER_LIMIT * pids_max, (backend.tmpfs_mb + BOX_PROCESS_MEMORY_MB) << 20
            )
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self._scratch: str | None = None
        self.memory_budget_mb = BOX_PROCESS_MEMORY_MB
        self.toolchain = "host"  # the box binds this machine's /usr: its compilers are the host's

    # --- command lines ---------------------------------------------------------------------------------
    def _runner_argv(self, code: str) -> list[str]:
        """python3 running the runner: from its compiled ``code`` file when there is one, else from its source."""
        if not self.isolated:
            return [_python(), "-I", "-S", *(["-c", RUNNER_LOADER % code] if code else [str(RUNNER_PATH)])]
        return [PYTHON, "-I", "-S", *(["-c", RUNNER_LOADER % BOX_RUNNER_CODE] if code else [BOX_RUNNER])]

    def _argv(self, writable_bin: bool) -> list[str]:
        code = _runner_code()
        if not self.isolated:
            return self._runner_argv(code)
        runner_bind = ["--ro-bind", code, BOX_RUNNER_CODE] if code else ["--ro-bind", str(RUNNER_PATH), BOX_RUNNER]
        argv = [
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
            *_system_binds(),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(self.backend.tmpfs_mb << 20),
            "--tmpfs",
            "/tmp",
            *runner_bind,
            "--ro-bind",
            str(self.host_dir / "in"),
            self.inputs_dir,
            "--bind" if writable_bin else "--ro-bind",
            str(self.host_dir / "bin"),
            self.bin_dir,
        ]
        if self._host_pch:
            argv += ["--ro-bind", str(self._host_pch), BOX_PCH]
        argv += [
            "--remount-ro",
            "/",
            "--chdir",
            "/tmp",
            "--unshare-user",
            "--uid",
            "65534",
            "--gid",
            "65534",
            *self._runner_argv(code),
        ]
        return argv

    def _prepare(self, spec: dict) -> dict:
        spec = dict(spec, kill_strays=self.isolated)
        if not self.isolated:  # private scratch directory instead of the sandbox's tmpfs
            if self._scratch is None:
                self._scratch = tempfile.mkdtemp(prefix="agentgspo-scratch-")
            spec["tmp"] = self._scratch
        if not self.backend.use_cgroups and self.isolated and os.geteuid() != 0:
            # No pids cgroup: bound processes with RLIMIT_NPROC, which counts all of this uid's processes.
            spec["limits"] = dict(spec.get("limits", {}), nproc=_user_process_count() + 64)
        return spec

    def _popen(self, argv: list[str], stdin, stdout, stderr, pass_fds=()) -> subprocess.Popen:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
        if self.cgroup is None:
            proc = subprocess.Popen(
                argv, stdin=stdin, stdout=stdout, stderr=stderr, env=env, start_new_session=True, pass_fds=pass_fds
            )
        else:
            with self.cgroup.forking_inside() as inside:  # born in the box's cgroups where possible (fast)
                proc = subprocess.Popen(
                    argv, stdin=stdin, stdout=stdout, stderr=stderr, env=env, start_new_session=True, pass_fds=pass_fds
                )
            if not inside:
                self.cgroup.add(proc.pid)  # before the spec is written, i.e. before any untrusted code runs
        with self._lock:
            self._procs.append(proc)
        return proc

    def _tests(self, inputs: list[bytes]) -> list[dict]:
        """The spec's test list: the inputs themselves when small (no file writes), else files bound read-only."""
        for stale in (self.host_dir / "in").iterdir():
            stale.unlink()
        if sum(len(data) for data in inputs) <= INLINE_INPUTS_MAX_BYTES:
            return [{"data": bytes(data)} for data in inputs]
        for i, data in enumerate(inputs):
            (self.host_dir / "in" / str(i)).write_bytes(data)
        return [{"path": f"{self.inputs_dir}/{i}"} for i in range(len(inputs))]

    @staticmethod
    def _deadline(spec: dict, n_tests: int) -> float:
        return call_deadline_s(spec, n_tests, overhead_s=15.0)

    # --- Session protocol ----------------------------------------------------------------------------------
    def call(self, spec: dict, inputs: list[bytes] | None = None) -> list[dict]:
        """Run the runner once (modes compile/run); see ``sandboxes.protocol.Session.call``."""
        spec = self._prepare(spec)
        if inputs is not None:
            spec["tests"] = self._tests(inputs)
        writable_bin = spec.get("mode") == "compile"
        try:
            proc = self._popen(self._argv(writable_bin), subprocess.PIPE, subprocess.PIPE, subprocess.PIPE)
        except OSError as exc:
            return [{"event": "error", "message": f"could not start the sandbox: {exc}"}]
        try:
            out, err = proc.communicate(frame_spec(spec), timeout=self._deadline(spec, len(inputs or [])))
        except subprocess.TimeoutExpired:
            self._kill(proc)
            out, err = proc.communicate()
            return parse_events(out, "sandbox call exceeded its overall deadline")[:-1] + [
                {"event": "error", "message": "sandbox call exceeded its overall deadline"}
            ]
        return parse_events(out, err.decode("utf-8", "replace"))

    def interact(self, spec: dict, start_peer: StartPeer, stop_when=None) -> list[dict]:
        """Run one interactive test: solution stdin <- peer stdout, solution stdout -> peer stdin. When the peer
        exits with a status ``stop_when`` accepts, the solution is stopped at once (through a command pipe the
        runner inherits). Several may run at once in one session."""
        spec = self._prepare(spec)
        if not self.isolated:  # each interaction its own scratch directory (isolated: its own tmpfs)
            spec["tmp"] = tempfile.mkdtemp(prefix="i", dir=spec["tmp"])
        to_box_r, to_box_w = os.pipe()
        from_box_r, from_box_w = os.pipe()
        control_r, control_w = os.pipe()
        spec["control_fd"] = control_r
        try:
            proc = self._popen(self._argv(False), to_box_r, from_box_w, subprocess.PIPE, pass_fds=(control_r,))
        except OSError as exc:
            for fd in (to_box_r, to_box_w, from_box_r, from_box_w, control_r, control_w):
                os.close(fd)
            return [{"event": "error", "message": f"could not start the sandbox: {exc}"}]
        for fd in (to_box_r, from_box_w, control_r):
            os.close(fd)
        # The spec goes first on the solution's stdin pipe; the runner reads exactly its frame.
        framed = frame_spec(spec)
        writer = threading.Thread(target=_write_all, args=(to_box_w, framed), daemon=True)
        writer.start()
        writer.join(timeout=10)
        try:
            peer = start_peer(from_box_r, to_box_w)
        finally:
            os.close(from_box_r)
            os.close(to_box_w)
        watch = PeerWatch(
            peer,
            stop_when,
            lambda stop: stop and os.write(control_w, STOP),
            on_idle=lambda: os.write(control_w, PEER_IDLE),
        )
        try:
            _, err = proc.communicate(timeout=self._deadline(spec, 1))
        except subprocess.TimeoutExpired:
            self._kill(proc)
            _, err = proc.communicate()
        finally:
            stop_requested = watch.finish()
            os.close(control_w)
        del peer
        return mark_stop_requested(parse_events(err), stop_requested)

    # --- teardown ------------------------------------------------------------------------------------------
    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass

    def close(self) -> None:
        """Kill whatever is left of this box and remove its files."""
        with self._lock:
            procs, self._procs = self._procs, []
        for proc in procs:
            if proc.poll() is None:
                self._kill(proc)
                proc.wait()
        if self.cgroup is not None:
            self.cgroup.destroy()
        shutil.rmtree(self.host_dir, ignore_errors=True)
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except OSError:
            return
        view = view[written:]


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                pass
    time.sleep(0)
    return count
