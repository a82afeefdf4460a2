"""Local backend: bubblewrap isolation plus rlimits, cgroups and CPU/wall limits (the default backend).

Each call starts one ``bwrap`` sandbox running the in-sandbox runner (``sandboxes/runner.py``), which runs the
tests of a submission in forked children, several at once (``workers``); a session (one submission) keeps a host
directory for the compiled binary and large test inputs, bound into each sandbox (small inputs travel in the spec).

Warm sessions. Starting a box (bubblewrap's namespaces and mounts, the runner's interpreter) costs tens of
milliseconds, as much as dozens of tests. So the backend keeps a few sessions started ahead of use (``warm_boxes``,
default: the usable CPUs, at most 8; never more than were open at once lately): each is a fresh session (its own
directory and cgroup) whose first run box is already started, its runner blocked reading its spec. A warm box has
run nothing; it is used by at most one call, like any box, and killed unused when its session closes. A pool thread
starts them (it lives as long as the process: ``--die-with-parent`` follows the thread that started a box). Closing
a session kills every process of its box before it returns; removing its cgroup and directory (which waits for the
killed processes to be gone) happens on a background thread.

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
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from . import cgroups
from .judge.compile import host_pch_dir
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
WARM_BOXES_MAX = 8  # default ceiling of warm sessions per backend (each holds a bwrap, a runner (~10 MB) and a cgroup)
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


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class LocalSandbox:
    """The bubblewrap backend (see the module docstring for the threat model). Thread-safe.

    allow_unisolated: run without bubblewrap (rlimits only) when it is unavailable; off by default.
    tmpfs_mb: size of each sandbox's private /tmp.
    warm_boxes: how many sessions to keep started ahead of use (see "Warm sessions" in the module docstring);
    default (None) the usable CPUs, at most 8; 0 turns them off (every call then starts its box when it is made).
    """

    name = "local"

    def __init__(self, allow_unisolated: bool = False, tmpfs_mb: int = 512, warm_boxes: int | None = None) -> None:
        problem = _bwrap_problem()
        allow_unisolated = allow_unisolated or os.environ.get("AGENTGSPO_ALLOW_UNISOLATED") == "1"
        if problem and not allow_unisolated:
            raise SandboxUnavailable(f"local sandbox unavailable ({problem}). {INSTALL_HINT}")
        if warm_boxes is not None and (not isinstance(warm_boxes, int) or warm_boxes < 0):
            raise ValueError(f"warm_boxes must be an integer >= 0 (0: no warm sessions), got {warm_boxes!r}")
        self.isolated = not problem
        self.tmpfs_mb = tmpfs_mb
        _runner_code()  # compile it now rather than in the first sandbox call
        self.use_cgroups = self.isolated and cgroups.available()
        self.warm_boxes = min(WARM_BOXES_MAX, _usable_cpus()) if warm_boxes is None else warm_boxes
        self._pool = _WarmPool(self, self.warm_boxes) if self.warm_boxes else None

    @contextmanager
    def session(self, limits_pids: int = 64) -> Iterator["LocalSession"]:
        """Open a box for one submission (a warm one when there is one); its processes are killed on exit, its
        directory and cgroup removed soon after."""
        box = self._pool.take(limits_pids) if self._pool is not None else None
        if box is None:
            box = LocalSession(self, limits_pids)
        try:
            yield box
        finally:
            box.close()
            if self._pool is not None:
                self._pool.closed(limits_pids)

    def warm_count(self, limits_pids: int = 64) -> int:
        """How many warm sessions for ``limits_pids`` are ready now (0 without warm sessions)."""
        if self._pool is None:
            return 0
        with self._pool.cond:
            return len(self._pool.idle.get(limits_pids, []))

    def close_warm(self) -> None:
        """Kill the warm sessions and remove them, and what closed sessions left for the reaper thread, now (both
        also happen at exit; call this before ``os._exit``)."""
        if self._pool is not None:
            self._pool.close_all()
        _drain_reaps()


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
        self._warm: subprocess.Popen | None = None  # a run box started ahead, its runner waiting for its spec
        self.started_warm = False  # True for a session of the warm pool (its first run box was started ahead)
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

    def start_warm(self) -> None:
        """Start this session's first run box now; it waits for its spec (the pool's thread calls this)."""
        self._warm = self._popen(self._argv(False), subprocess.PIPE, subprocess.PIPE, subprocess.PIPE)
        self.started_warm = True

    def _take_warm(self) -> subprocess.Popen | None:
        """The warm run box, once, while its runner is still waiting (None when there is none or it died)."""
        with self._lock:
            proc, self._warm = self._warm, None
        return proc if proc is not None and proc.poll() is None else None

    # --- Session protocol ----------------------------------------------------------------------------------
    def call(self, spec: dict, inputs: list[bytes] | None = None) -> list[dict]:
        """Run the runner once (modes compile/run); see ``sandboxes.protocol.Session.call``."""
        spec = self._prepare(spec)
        if inputs is not None:
            spec["tests"] = self._tests(inputs)
        writable_bin = spec.get("mode") == "compile"
        proc = None if writable_bin else self._take_warm()
        try:
            if proc is None:
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
        """Kill whatever is left of this box (every process of it has a SIGKILL when this returns); its cgroup and
        files are removed on the reaper thread (``_reap_later``)."""
        with self._lock:
            procs, self._procs, self._warm = self._procs, [], None
        for proc in procs:
            if proc.poll() is None:
                self._kill(proc)
                proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        if self.cgroup is not None:
            self.cgroup.kill()
        _reap_later(self.cgroup, [self.host_dir] + ([Path(self._scratch)] if self._scratch else []))

    def forget(self) -> None:
        """In a forked child of the process that owns this session: drop it without touching its processes or
        files (they are the parent's)."""
        with self._lock:
            procs, self._procs, self._warm = self._procs, [], None
        for proc in procs:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            proc.returncode = 0  # not ours to wait for


class _WarmPool:
    """Sessions of one backend started ahead of use, keyed by their pids limit (see "Warm sessions" in the module
    docstring). ``take`` hands one out (or None) and asks for a replacement; the pool thread keeps, per key,
    min(``size``, the most sessions open at once so far) warm."""

    def __init__(self, backend: LocalSandbox, size: int) -> None:
        self.backend, self.size = backend, size
        self._reset()
        _pools.add(self)

    def _reset(self) -> None:
        self.cond = threading.Condition()
        self.idle: dict[int, list[LocalSession]] = {}
        self.wanted: dict[int, int] = {}
        self.open: dict[int, int] = {}
        self.thread: threading.Thread | None = None
        self.failures = 0
        self.owner = os.getpid()

    def take(self, pids_max: int) -> LocalSession | None:
        """A warm session for ``pids_max`` whose box is still waiting, or None; counts the session as open."""
        with self.cond:
            self.open[pids_max] = self.open.get(pids_max, 0) + 1
            self.wanted[pids_max] = min(self.size, max(self.wanted.get(pids_max, 0), self.open[pids_max]))
            idle = self.idle.get(pids_max, [])
            box = idle.pop() if idle else None
            if self.thread is None and self.failures < 3:
                self.thread = threading.Thread(target=self._fill, name="agentgspo-warm-boxes", daemon=True)
                self.thread.start()
            self.cond.notify()
        if box is not None and box._warm is not None and box._warm.poll() is not None:
            box.close()  # its box died while it waited (killed from outside): the caller starts a fresh one
            return None
        return box

    def closed(self, pids_max: int) -> None:
        """A session taken for ``pids_max`` was closed."""
        with self.cond:
            self.open[pids_max] -= 1

    def _short(self) -> int | None:
        for pids_max, wanted in self.wanted.items():
            if len(self.idle.get(pids_max, [])) < wanted:
                return pids_max
        return None

    def _fill(self) -> None:
        # A session binds the C++ precompiled header that exists when it starts. Built first (once per machine, on
        # this thread): a warm session started before it would compile without it, slower and under another
        # compile-cache key than every session after it.
        host_pch_dir(build=True)
        while True:
            with self.cond:
                while (pids_max := self._short()) is None:
                    self.cond.wait()
            try:
                box = LocalSession(self.backend, pids_max)
            except Exception:
                self.failures += 1
                time.sleep(0.1 * self.failures)
                continue
            try:
                box.start_warm()
            except Exception:
                box.close()
                self.failures += 1
                if self.failures >= 3:  # give up: sessions are then started when they are opened, as without
                    with self.cond:
                        self.thread = None
                    return
                time.sleep(0.1 * self.failures)
                continue
            with self.cond:
                if os.getpid() != self.owner:
                    return
                self.idle.setdefault(pids_max, []).append(box)

    def close_all(self) -> None:
        """Kill and remove every warm session (at exit, or on request)."""
        with self.cond:
            boxes = [box for idle in self.idle.values() for box in idle]
            self.idle, self.wanted = {}, {}
        for box in boxes:
            box.close()

    def after_fork_in_child(self) -> None:
        """The warm sessions belong to the parent: forget them (the child starts its own when it needs them)."""
        boxes = [box for idle in self.idle.values() for box in idle]
        self._reset()
        for box in boxes:
            box.forget()


_pools: "weakref.WeakSet[_WarmPool]" = weakref.WeakSet()
_reap_queue: "queue.SimpleQueue[tuple[cgroups.BoxCgroup | None, list[Path]]]" = queue.SimpleQueue()
_reaper_lock = threading.Lock()
_reaper: threading.Thread | None = None


def _remove(cgroup: "cgroups.BoxCgroup | None", dirs: list[Path]) -> None:
    if cgroup is not None:
        cgroup.destroy()
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def _reaper_loop() -> None:
    while True:
        _remove(*_reap_queue.get())


def _reap_later(cgroup: "cgroups.BoxCgroup | None", dirs: list[Path]) -> None:
    """Remove a closed session's cgroup (waiting for its killed processes to be gone) and directories on the
    reaper thread; whatever is left at exit is removed then."""
    global _reaper
    with _reaper_lock:
        if _reaper is None or not _reaper.is_alive():
            try:
                thread = threading.Thread(target=_reaper_loop, name="agentgspo-box-reaper", daemon=True)
                thread.start()
            except RuntimeError:  # no new threads at interpreter shutdown (Python >= 3.12): remove them now
                _remove(cgroup, dirs)
                return
            _reaper = thread
    _reap_queue.put((cgroup, dirs))


def _drain_reaps() -> None:
    """Remove, on this thread, what is still queued for the reaper thread."""
    while True:
        try:
            item = _reap_queue.get_nowait()
        except queue.Empty:
            return
        _remove(*item)


def _at_exit() -> None:
    for pool in list(_pools):
        if pool.owner == os.getpid():
            pool.close_all()
    _drain_reaps()


def _after_fork_in_child() -> None:
    global _reaper, _reap_queue
    for pool in list(_pools):
        pool.after_fork_in_child()
    _reaper, _reap_queue = None, queue.SimpleQueue()  # the parent removes what it queued


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)


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
