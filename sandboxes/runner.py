"""In-sandbox runner: compiles once, then runs the tests of one submission in forked children, several at once.

This file is executed *inside* the sandbox by the system ``python3`` (standard library only, Python >= 3.8),
either from a read-only bind (local backend) or as ``python3 -c SOURCE`` (Docker backend). It never sees the
expected answers: it gets the inputs, runs the program, and reports raw facts (exit status, CPU time, wall time,
peak memory, output bytes). Verdicts are decided outside, by the judge.

Protocol: one dict (the spec, in ``marshal`` format) on stdin, framed by a 16-byte decimal length, JSON lines
(events) on the result stream: stdout in the ``compile`` and ``run`` modes, stderr in the ``interact`` mode (there
stdin/stdout are the pipes to the interactor and belong to the solution).

Spec fields:
    mode: "compile" | "run" | "interact"
    lang: "py" | "cpp"
    source: program text (py: run/interact; cpp: compile)
    binary: path of the compiled program (cpp run/interact; compile writes it)
    compile_cmd: argv for the compiler (cpp compile); compile_limits: {cpu_s, wall_s, memory_mb}
    program: (compile) the judge's cached program: written to ``binary`` (mode 0555) instead of compiling
    return_program: (compile) after a successful compile, send the program back (``program_b64`` of the compile
                    event) when it is at most this many bytes (the judge's compile cache stores it)
    tests: [{"path": FILE} | {"data": BYTES}]   (run mode; large inline inputs are moved out of the runner's
           memory first: see stash_inputs)
    limits: {cpu_s, wall_s, memory_mb, output_bytes, stderr_bytes, nproc}
    io_mode: "stdio" | "file"  (file: the program reads ./input.txt and writes ./output.txt)
    workers: how many tests run at once (run mode, default 1). Each test is its own forked child with its own
             rlimits, CPU timer, wall guard, working directory and output buffers; CPU time and peak memory are
             that child's own. Events still come out in test order.
    stop_on_error: start no test after one that fails on its own (exit != 0, signal, time); later tests that are
                   already running are killed and not reported.
    control_fd, relay_stdout: interact mode's command pipe and stdout relay (see mode_interact)
    tmp: the scratch directory (default /tmp; interactive tests running at once in one box each get their own)
    kill_strays: after each test kill what it left behind in the sandbox's pid namespace: every process but us and
                 init (kill(-1)) when no other test runs, else every process outside the running tests' process
                 groups (and kill(-1) once all are done); only set when the runner is inside its own pid namespace
                 or container.

Parallel tests of one submission share the box: a solution can disturb its own sibling tests (kill them, write
their scratch files), which can only hurt its own result; it still never sees an answer.

Event lines: {"event": "compile", "ok", "stderr", "cpu_s", "wall_s", "cached" (the program came in the spec),
 "program_b64" (see return_program)} |
{"event": "test", "index", "exit_code", "signal", "cpu_s", "wall_s", "memory_kb", "minor_faults", "wall_timeout",
 "stdout_b64", "stdout_bytes", "stderr", "image_kb" (C++: the program's static image, see image_kb),
 "peer_hung_up", "stopped", "deadlock" (interact: see mode_interact)} |
{"event": "started", "pid"} (interact: the runner's pid, for the judge's command signals) |
{"event": "done", "cpu_s" (the runner's own CPU time, its children's not counted)} | {"event": "error", "message"}.
"""

# _signal is the C module under signal: signal.signal() wraps results in enums, which costs a forked child copied
# pages, and importing signal (and enum) costs every sandbox start ~2 ms.
import _signal
import binascii
import builtins
import gc
import marshal
import os
import resource
import select
import stat  # already imported by os: free
import sys
import time

# Standard modules solutions often import: the ones a Python solution names are imported here once, before the
# forks, which makes them free in each of its tests (a solution importing nothing pays nothing).
PRELOADABLE = frozenset(
    (
        "array",
        "bisect",
        "collections",
        "copy",
        "decimal",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "math",
        "operator",
        "re",
        "statistics",
        "string",
        "typing",
    )
)

# Runs whose inline inputs total at least this move them out of the runner's memory (see stash_inputs).
STASH_MIN_BYTES = 1 << 20
# Scratch paths, under the sandbox's private tmp (spec["tmp"], default /tmp); set by set_scratch().
TMP = WORK = ERR = ""
# Python ignores SIGPIPE and SIGXFSZ; ignored dispositions survive exec, so children restore the defaults.
RESET_SIGNALS = (
    _signal.SIGPIPE,
    _signal.SIGXFSZ,
    _signal.SIGPROF,
    _signal.SIGXCPU,
    _signal.SIGINT,
    _signal.SIGTERM,
    _signal.SIGUSR1,
    _signal.SIGUSR2,
)
# Interact mode's commands from the judge (a byte on spec["control_fd"], or these signals, see mode_interact).
HANG_UP, STOP, PEER_IDLE = b"h", b"s", b"w"
COMMAND_SIGNALS = {_signal.SIGUSR1: HANG_UP, _signal.SIGUSR2: STOP, _signal.SIGURG: PEER_IDLE}
# A deadlock of an interactive test: the solution and the interactor both blocked (no thread runnable, no CPU used)
# for this long, with no byte in flight between them. Neither can wake the other, so the test ends at once (ILE)
# instead of at the wall guard. Each side is sampled this often (the judge the interactor, the runner the solution).
DEADLOCK_S = 0.2
ACTIVITY_SAMPLE_S = 0.05


def set_scratch(tmp):
    """Point the scratch paths (compile/interact working directory, compiler log) under ``tmp``."""
    global TMP, WORK, ERR
    TMP, WORK, ERR = tmp, os.path.join(tmp, "w"), os.path.join(tmp, "err")


# A tiny JSON encoder: importing the json module costs more than a whole test (startup matters at 700 tests/s).
_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def to_json(value):
    """JSON text of None, bools, numbers, strings and (nested) dicts with string keys."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    return "{" + ",".join(to_json(k) + ":" + to_json(v) for k, v in value.items()) + "}"


def emit(stream, record):
    """Write one event line and flush it."""
    stream.write(to_json(record) + "\n")
    stream.flush()


def child_plan(limits):
    """The per-test rlimits and CPU timer as plain tuples, built once so that each forked child only applies them.

    Returns (((resource, (soft, hard)), ...), cpu_timer_s)."""
    mem = int(limits["memory_mb"] * 1024 * 1024)
    cpu = float(limits["cpu_s"])
    hard_cpu = int(cpu) + 2
    out = int(limits["output_bytes"]) + 1
    # The main thread's stack may use the whole memory limit (RLIMIT_AS bounds it). Unlimited rather than = the
    # limit where we may: glibc gives every new thread a stack of RLIMIT_STACK, and a std::thread reserving the
    # whole limit could never start.
    unlimited = resource.RLIM_INFINITY
    stack = (unlimited, unlimited) if resource.getrlimit(resource.RLIMIT_STACK)[1] == unlimited else (mem, mem)
    rlimits = [
        (resource.RLIMIT_CPU, (hard_cpu, hard_cpu)),
        (resource.RLIMIT_AS, (mem, mem)),
        (resource.RLIMIT_STACK, stack),
        (resource.RLIMIT_FSIZE, (out, out)),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_NOFILE, (64, 64)),
    ]
    if limits.get("nproc"):
        rlimits.append((resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"])))
    # A precise CPU-time stop (SIGPROF kills by default); RLIMIT_CPU is the backstop. Kept across exec.
    return tuple(rlimits), cpu + 0.05


def apply_plan(plan):
    """In the forked child: default signal dispositions, then the rlimits and the CPU timer of ``plan``."""
    reset_signals()
    rlimits, cpu_timer = plan
    for which, value in rlimits:
        resource.setrlimit(which, value)
    _signal.setitimer(_signal.ITIMER_PROF, cpu_timer)


def reset_signals():
    """Restore the default dispositions of the signals Python changes (before exec of a program)."""
    for sig in RESET_SIGNALS:
        _signal.signal(sig, _signal.SIG_DFL)


def _site_exit(code=None):
    raise SystemExit(code)


def open_stdio():
    """Text streams on fds 0, 1, 2 as a python3 process has them (utf-8; stderr line-buffered)."""
    return (
        open(0, "r", encoding="utf-8", closefd=False),
        open(1, "w", encoding="utf-8", closefd=False),
        open(2, "w", encoding="utf-8", closefd=False, buffering=1),
    )


def prepare_stdio():
    """Build the children's stdio streams once, in the runner, over a regular file standing in for fds 0-2.

    Each forked child then finds fresh, unused streams whose cached facts (seekable, position 0) match its real
    fds 0-2 (regular files), instead of building them itself: that spares every child a few dozen copied pages.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    stand_in = scratch_fd(os.path.join(TMP, "stdio"))
    try:
        for fd in (0, 1, 2):
            os.dup2(stand_in, fd)
        return open_stdio()
    finally:
        for fd, copy in zip((0, 1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(stand_in)


def run_python_child(code, stdio=None):
    """Body of the forked child for Python: exec the compiled code as __main__ and _exit with its status.

    stdio: unused streams on fds 0-2 from prepare_stdio(), or None to open them here."""
    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)  # as in a normal python3 process
    sys.stdin, sys.stdout, sys.stderr = stdio or open_stdio()
    sys.argv = ["solution.py"]
    builtins.exit = builtins.quit = _site_exit  # python3 -S skips site, which defines them
    status = 0
    try:
        exec(code, {"__name__": "__main__", "__builtins__": builtins, "__file__": "solution.py"})
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code & 0xFF
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException as exc:
        import traceback

        # Skip the runner's own frame: the solution sees the traceback a plain python3 would print.
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        status = 1
    try:
        sys.stdout.flush()
    except BaseException:
        import traceback

        traceback.print_exc()
        status = status or 1
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(status)


def spawn(plan, lang, program, cwd, stdin_fd, stdout_fd, stderr_fd, stdio=None):
    """Fork one child in its own process group that runs the program with the given fds and limits; returns its pid.

    stdio: prepared Python streams for fds 0-2 (see prepare_stdio), when those fds are regular files."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        try:  # also here, so that the group exists before the parent looks for strays
            os.setpgid(pid, pid)
        except OSError:
            pass
        return pid
    try:
        os.setpgid(0, 0)
        # Lowest priority: under a fork bomb the runner (nice 0) still gets the CPU to enforce the wall guard.
        # Time limits are on CPU time, so this does not change verdicts.
        os.nice(19)
        os.chdir(cwd)
        if stdin_fd != 0:
            os.dup2(stdin_fd, 0)
        if stdout_fd != 1:
            os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        try:
            _signal.set_wakeup_fd(-1)  # interact mode's command pipe belongs to the runner
        except (ValueError, OSError):
            pass
        os.closerange(3, 1024)
        apply_plan(plan)
        if lang == "py":
            run_python_child(program, stdio)
        else:
            os.execv(program, [program])
    except BaseException as exc:  # setup failure: report through stderr and a distinctive status
        try:
            os.write(2, ("runner: child setup failed: %r\n" % (exc,)).encode())
        finally:
            os._exit(127)
    os._exit(127)


def kill_group(pid):
    """SIGKILL the process group ``pid`` and the process itself (either may be gone already)."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, _signal.SIGKILL)
        except OSError:
            pass


def starved_deadline(pid, start, wall_s, cpu_s):
    """At the wall deadline of ``pid`` (started at ``start``): a later deadline when it is waiting for a CPU rather
    than idle (see cpu_left_if_starved), up to ``start + wall_s + 2 * cpu_s`` in all; None: the guard ends it."""
    now, last = time.monotonic(), start + wall_s + 2 * cpu_s
    left = cpu_left_if_starved(pid, cpu_s) if now < last else 0.0
    return min(now + left, last) if left else None


def cpu_left_if_starved(pid, cpu_s):
    """The CPU seconds ``pid`` may still use when it is waiting for a CPU rather than idle (a thread of it is
    runnable, and it has used less than ``cpu_s``); else 0.

    The wall guard is for sleepers and blocked programs: a program starved by a busy machine (other boxes, other
    jobs; the tests run at nice 19) would otherwise get TLE having used a fraction of its CPU time limit."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, all threads
        if used >= cpu_s:
            return 0.0
        runnable = fields[0] == b"R"
        if not runnable:
            for tid in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/stat" % (pid, tid), "rb") as f:
                    if f.read().rsplit(b")", 1)[1].split()[0] == b"R":
                        runnable = True
                        break
    except (OSError, IndexError, ValueError):
        return 0.0
    return cpu_s - used if runnable else 0.0


def tree_activity(pid):
    """(CPU nanoseconds used so far by ``pid``, its threads and its descendants; whether any of their threads is
    runnable or in an uninterruptible wait), from /proc (``schedstat``: time on a CPU, exact to the nanosecond).
    None when /proc does not tell (a process just ended, no schedstat): then nothing counts as idle."""
    used, busy, todo, seen = 0, False, [pid], set()
    try:
        while todo:
            proc = todo.pop()
            if proc in seen:
                continue
            seen.add(proc)
            for tid in os.listdir("/proc/%d/task" % proc):
                base = "/proc/%d/task/%s/" % (proc, tid)
                with open(base + "stat", "rb") as f:
                    busy = busy or f.read().rsplit(b")", 1)[1].split()[0] in (b"R", b"D")
                with open(base + "schedstat", "rb") as f:
                    used += int(f.read().split()[0])
                with open(base + "children", "rb") as f:
                    todo.extend(int(child) for child in f.read().split())
    except (OSError, IndexError, ValueError):
        return None
    return used, busy


class IdleClock:
    """Since when a process tree has been blocked: no thread runnable and no CPU time used from one ``sample`` to
    the next. It counts from the first quiet sample, so it never overstates the idle time."""

    def __init__(self, pid):
        self.pid, self.used, self.since = pid, None, None

    def sample(self, now):
        """Look at the tree now; returns for how many seconds it has been idle (0.0 when it is not)."""
        seen = tree_activity(self.pid)
        if seen is None or seen[1] or seen[0] != self.used:
            self.since = None
            self.used = None if seen is None else seen[0]
            return 0.0
        if self.since is None:
            self.since = now
        return now - self.since


def unread_bytes(fd):
    """Bytes waiting in the pipe (or socket) ``fd`` belongs to, either end; None when the kernel does not say."""
    import array
    import fcntl
    import termios

    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count)
    except OSError:
        return None
    return count[0]


def wait_with_guard(pid, wall_s, cpu_s=0.0):
    """Wait for the child at most wall_s seconds (then SIGKILL its group), longer while it is starved of CPU below
    ``cpu_s`` (see starved_deadline); returns (status, rusage, wall, timeout)."""
    start = time.monotonic()
    waiter = Waiter()
    waiter.add(pid, start + wall_s)
    while True:
        timed_out = not waiter.wait()
        later = starved_deadline(pid, start, wall_s, cpu_s) if timed_out else None
        if later is None:
            break
        waiter.deadlines[pid] = later
    if timed_out:
        kill_group(pid)
    waiter.remove(pid)
    _, status, usage = os.wait4(pid, 0)
    return status, usage, time.monotonic() - start, timed_out


class Waiter:
    """Waits for any of several children, each with its own wall-clock deadline.

    Uses a pidfd per child where the kernel has them (Linux >= 5.3, Python >= 3.9), else polls with short sleeps.
    """

    def __init__(self):
        self.deadlines = {}  # pid -> monotonic deadline
        self.pidfds = {}  # pid -> pidfd
        self.poller = select.poll()

    def add(self, pid, deadline):
        """Watch child ``pid`` until ``deadline`` (time.monotonic())."""
        self.deadlines[pid] = deadline
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        self.pidfds[pid] = pidfd
        self.poller.register(pidfd, select.POLLIN)

    def remove(self, pid):
        """Stop watching ``pid`` (call before reaping it)."""
        del self.deadlines[pid]
        pidfd = self.pidfds.pop(pid, None)
        if pidfd is not None:
            self.poller.unregister(pidfd)
            os.close(pidfd)

    def overdue(self):
        """The watched pids whose deadline has passed."""
        now = time.monotonic()
        return [pid for pid, deadline in self.deadlines.items() if deadline <= now]

    def wait(self):
        """Block until watched children exit (returns their pids) or a deadline passes (returns [])."""
        while True:
            exited = [
                pid
                for pid in self.deadlines
                if pid not in self.pidfds and os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            ]
            if exited:
                return exited
            left = min(self.deadlines.values()) - time.monotonic()
            # Children without a pidfd (old kernels) are polled every 2 ms; poll() with no fds just sleeps.
            step = left if len(self.pidfds) == len(self.deadlines) else min(left, 0.002)
            ready = self.poller.poll(max(0.0, step) * 1000)
            if ready:
                by_fd = {fd: pid for pid, fd in self.pidfds.items()}
                return [by_fd[fd] for fd, _ in ready]
            if left <= 0:
                return []


def _namespace_strays(me, live_groups):
    """Processes of our pid namespace outside the live process groups (not us, not init, not zombies)."""
    strays = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in (1, me) or pid in live_groups:
            continue
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] != b"Z" and int(fields[2]) not in live_groups:
            strays.append(pid)
    return strays


def kill_strays(enabled, pid, live_groups=()):
    """Kill what the test ``pid`` left behind: its process group and, when ``enabled``, strays of the namespace.

    With no other test running (``live_groups`` empty) that is every process but us and init (kill(-1)); else
    every process outside the running tests' process groups (a few passes, for strays that fork meanwhile).
    """
    try:
        os.killpg(pid, _signal.SIGKILL)
    except OSError:
        pass
    me = os.getpid()
    if not enabled or me == 1:
        return
    if live_groups:
        for _ in range(3):
            strays = _namespace_strays(me, live_groups)
            for stray in strays:
                try:
                    os.kill(stray, _signal.SIGKILL)
                except OSError:
                    pass
            if not strays:
                break
        return
    try:
        os.kill(-1, _signal.SIGKILL)
    except OSError:
        pass
    while True:  # reap anything that was our child (no test is running, so no test's status is lost)
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if reaped == 0:
            break


def read_path_capped(path, cap):
    """(first cap+1 bytes, total size) of a regular file; (b"", 0) when there is none that we may read at ``path``
    (missing, or what a solution put there instead: a FIFO, a directory, a symlink, an unreadable file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return b"", 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"", 0
        return read_fd_capped(fd, cap)
    finally:
        os.close(fd)


def read_fd_capped(fd, cap):
    """(first min(size, cap+1) bytes, total size) of an open regular file, read from offset 0."""
    size = os.fstat(fd).st_size
    want, chunks, offset = min(size, cap + 1), [], 0
    while offset < want:
        chunk = os.pread(fd, min(want - offset, 1 << 24), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks), size


def describe(status, usage, wall, timed_out, index):
    """The raw facts of one finished test as an event record (outputs are added by the caller)."""
    return {
        "event": "test",
        "index": index,
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 6),
        "wall_s": round(wall, 6),
        "memory_kb": usage.ru_maxrss,
        "minor_faults": usage.ru_minflt,
        "wall_timeout": timed_out,
    }


def failed_on_its_own(record, limits):
    """True when the test failed without looking at its output (exit code, signal, CPU or wall time)."""
    return record["exit_code"] != 0 or record["wall_timeout"] or record["cpu_s"] > limits["cpu_s"]


def image_kb(path):
    """Address space (KiB) the ELF program ``path`` maps before main: its PT_LOAD segments (code, data, bss),
    page-rounded. 0 when the file is not a readable ELF program. Read once per call from the program headers.

    A static array beyond the memory limit makes exec fail (SIGSEGV while mapping the bss, or the loader cannot map
    the libraries beside it); the judge reads that as MLE because of this number."""
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            if len(header) < 52 or header[:4] != b"\x7fELF" or header[4] not in (1, 2) or header[5] not in (1, 2):
                return 0
            order = "little" if header[5] == 1 else "big"
            wide = header[4] == 2  # ELFCLASS64

            def field(data, offset, size):
                return int.from_bytes(data[offset : offset + size], order)

            if wide:
                phoff, entsize, count = field(header, 32, 8), field(header, 54, 2), field(header, 56, 2)
                memsz_at, vaddr_at, size = 40, 16, 8
            else:
                phoff, entsize, count = field(header, 28, 4), field(header, 42, 2), field(header, 44, 2)
                memsz_at, vaddr_at, size = 20, 8, 4
            if not count or entsize < memsz_at + size or count > 4096:
                return 0
            f.seek(phoff)
            table = f.read(entsize * count)
    except OSError:
        return 0
    total = 0
    for at in range(0, len(table) - entsize + 1, entsize):
        if field(table, at, 4) == 1:  # PT_LOAD
            start = field(table, at + vaddr_at, size)
            end = start + field(table, at + memsz_at, size)
            total += ((end + 4095) & ~4095) - (start & ~4095)
    return total // 1024


def load_program(spec, result_stream):
    """Python: compile the source once (SyntaxError -> compile event with ok=False) and preload the standard modules
    it names. C++: the binary path."""
    if spec["lang"] != "py":
        return spec["binary"]
    try:
        code = compile(spec["source"], "solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        import traceback

        emit(
            result_stream,
            {
                "event": "compile",
                "ok": False,
                "stderr": "".join(traceback.format_exception_only(type(exc), exc)),
                "cpu_s": 0.0,
                "wall_s": 0.0,
            },
        )
        return None
    preload(code)
    return code


def names_of(code):
    """Every name the code object and the code nested in it use (imported modules among them)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= names_of(const)
    return names


def preload(code):
    """Import the PRELOADABLE modules the solution names (a miss only costs time: the child imports it itself)."""
    for name in sorted(names_of(code) & PRELOADABLE):
        try:
            __import__(name)
        except Exception:
            pass


def mode_compile(spec):
    """Compile with the given argv, limited; the binary lands where compile_cmd says. With ``program`` (a cached
    compile), write it there instead (mode 0555; the source is written too: an interpreted program reads it)."""
    for path in [WORK] + spec.get("make_dirs", []):
        os.makedirs(path, exist_ok=True)
    src_path = spec["source_path"]
    with open(src_path, "w") as f:
        f.write(spec["source"])
    if spec.get("program") is not None:
        start = time.monotonic()
        fd = os.open(spec["binary"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o555)
        with os.fdopen(fd, "wb") as f:
            f.write(spec["program"])
        os.chmod(spec["binary"], 0o555)
        wall = time.monotonic() - start
        emit(sys.stdout, {"event": "compile", "ok": True, "stderr": "", "cpu_s": 0.0, "wall_s": wall, "cached": True})
        return
    lim = spec["compile_limits"]
    with open(ERR, "wb") as err:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
                os.dup2(err.fileno(), 1)
                os.dup2(err.fileno(), 2)
                reset_signals()
                mem = int(lim["memory_mb"] * 1024 * 1024)
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
                cpu = int(lim["cpu_s"]) + 1
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
                resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
                os.execvp(spec["compile_cmd"][0], spec["compile_cmd"])
            finally:
                os._exit(127)
        status, usage, wall, timed_out = wait_with_guard(pid, lim["wall_s"], float(lim["cpu_s"]))
    kill_strays(spec.get("kill_strays"), pid)
    stderr, _ = read_path_capped(ERR, 64 * 1024)
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and not timed_out
    message = stderr.decode("utf-8", "replace")
    if timed_out:
        message += "\ncompilation exceeded %.1f s wall time" % lim["wall_s"]
    event = {"event": "compile", "ok": ok, "stderr": message, "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall}
    if ok and spec.get("return_program"):
        try:
            if 0 < os.stat(spec["binary"]).st_size <= spec["return_program"]:
                with open(spec["binary"], "rb") as f:
                    event["program_b64"] = binascii.b2a_base64(f.read(), newline=False).decode("ascii")
        except OSError:
            pass  # not sent: the judge then stores nothing
    emit(sys.stdout, event)


def scratch_fd(path):
    """A fresh empty read-write file for one test: an anonymous memfd, or ``path`` (recreated) without memfd."""
    try:
        return os.memfd_create("scratch", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        try:
            os.unlink(path)  # a new inode: a stray still holding the old one cannot write into this test
        except FileNotFoundError:
            pass
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)


def fresh_input_file(work):
    """File mode: remove ./output.txt and ./input.txt of ``work`` and create a new input.txt (opened for writing,
    never through a symlink or a FIFO a previous test put there)."""
    for name in ("output.txt", "input.txt"):
        try:
            os.unlink(os.path.join(work, name))
        except FileNotFoundError:
            pass
    return os.open(
        os.path.join(work, "input.txt"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )


def copy_into(fd, source, offset, size):
    """Copy ``size`` bytes at ``offset`` of the file ``source`` to the file ``fd`` (in the kernel where it can)."""
    end = offset + size
    while offset < end:
        try:
            sent = os.sendfile(fd, source, offset, min(end - offset, 1 << 30))
        except OSError:
            sent = os.write(fd, os.pread(source, min(end - offset, 1 << 24), offset))
        if not sent:
            raise EOFError("input store ended early")
        offset += sent


def write_all(fd, data):
    """Write all of ``data`` to ``fd``."""
    view, offset = memoryview(data), 0
    while offset < len(view):
        offset += os.write(fd, view[offset:])


def libc_call(name, *args):
    """Call the C library's ``name`` with integer ``args``; nothing when it cannot (another libc, no symbol).

    Through _ctypes directly: importing ctypes would add ~3 ms to every sandbox start; ctypes only as a fallback."""
    try:
        import _ctypes

        _ctypes.call_function(_ctypes.dlsym(_ctypes.dlopen(None), name), args)
    except Exception:
        try:
            import ctypes

            getattr(ctypes.CDLL(None), name)(*args)
        except Exception:
            pass


def malloc_trim():
    """Give the heap's free memory back to the system (glibc malloc_trim(0)); nothing elsewhere."""
    libc_call("malloc_trim", 0)


def stash_inputs(tests, path):
    """Move the tests' inline inputs out of our memory into one scratch file (a memfd), so that the address space
    the children inherit holds none of them: each test entry becomes {"at", "size"}. Returns the file's fd.

    A Python child keeps that address space (RLIMIT_AS counts it); a C++ child's peak RSS starts from it (the
    kernel keeps the high-water mark across exec)."""
    store, offset, data = scratch_fd(path), 0, b""
    for test in tests:
        if "data" in test:  # (an input file stays where it is)
            data = test.pop("data")
            write_all(store, data)
            test["at"], test["size"] = offset, len(data)
            offset += len(data)
    del data
    malloc_trim()
    return store


class Running:
    """One test in flight: its index, child, slot (working directory and scratch), fds and start time."""

    def __init__(self, index, slot, pid, fds, output_path, start):
        self.index, self.slot, self.pid, self.fds = index, slot, pid, fds
        self.output_path, self.start = output_path, start


class TestRun:
    """Runs the tests of one spec (run mode) on ``workers`` forked children at once; emits events in test order."""

    def __init__(self, spec, program, stream):
        self.spec, self.program, self.stream = spec, program, stream
        self.limits = spec["limits"]
        self.cpu_s, self.wall_s = float(self.limits["cpu_s"]), float(self.limits["wall_s"])
        self.plan = child_plan(self.limits)
        self.tests = spec["tests"]
        self.file_mode = spec.get("io_mode") == "file"
        self.kill_strays = bool(spec.get("kill_strays"))
        self.stop_on_error = bool(spec.get("stop_on_error"))
        self.out_cap = int(self.limits["output_bytes"])
        self.err_cap = int(self.limits.get("stderr_bytes", 4096))
        workers = max(1, min(int(spec.get("workers") or 1), len(self.tests)))
        self.free_slots = list(range(workers - 1, -1, -1))
        self.slot_dirs = [os.path.join(TMP, "w%d" % slot) for slot in range(workers)]
        for path in self.slot_dirs:
            os.makedirs(path, exist_ok=True)
        self.running = {}  # pid -> Running
        self.waiter = Waiter()
        self.store = spec.get("input_store")  # see stash_inputs
        self.stdio = prepare_stdio() if spec["lang"] == "py" else None
        self.image_kb = image_kb(program) if spec["lang"] != "py" else 0
        self.finished = {}  # index -> record, until its turn to be emitted
        self.next_test = self.next_emit = 0
        self.end = len(self.tests)  # tests from this index on are not run (stop_on_error)

    def run(self):
        """Launch, wait, report, until every test (or every test up to the first failure) is done."""
        while True:
            self._launch_while_free()
            if not self.running:
                break
            exited = self.waiter.wait()
            for pid in exited or self.waiter.overdue():
                test = self.running.get(pid)  # None when an earlier failure (stop_on_error) killed it meanwhile
                if test is not None:
                    if not exited:
                        later = starved_deadline(pid, test.start, self.wall_s, self.cpu_s)
                        if later is not None:  # waiting for a CPU, not idle: time to use what it may
                            self.waiter.deadlines[pid] = later
                            continue
                        kill_group(pid)
                    self._finish(test, timed_out=not exited)
        self._emit_ready()

    # --- launching ---------------------------------------------------------------------------------------------
    def _launch_while_free(self):
        # At most `window` tests past the oldest one not yet reported, so that held-back events stay few.
        window = 4 * len(self.slot_dirs)
        while self.free_slots and self.next_test < min(self.end, self.next_emit + window):
            try:
                self._launch(self.next_test, self.free_slots[-1])
            except OSError:
                if not self.running:
                    raise
                return  # e.g. a sibling's fork bomb holds every pid: retry once a running test has ended
            self.free_slots.pop()
            self.next_test += 1

    def _stdin_fd(self, test, slot):
        """The test's stdin: its input file, or its data in a fresh scratch file. In file mode the input goes to
        a new ./input.txt instead (a stale ./output.txt is removed) and stdin is /dev/null."""
        if self.file_mode:
            work = self.slot_dirs[slot]
            try:
                fd = fresh_input_file(work)
            except OSError:
                # The previous test left something in the way (a directory or FIFO named input.txt, a read-only
                # working directory...): move its directory aside (it only wasted its own tmpfs) and start anew.
                os.rename(work, "%s.old-%s" % (work, binascii.hexlify(os.urandom(6)).decode()))
                os.mkdir(work)
                fd = fresh_input_file(work)
            try:
                self._fill(fd, test)
            finally:
                os.close(fd)
            return os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        if "path" in test:
            return os.open(test["path"], os.O_RDONLY | os.O_CLOEXEC)
        fd = scratch_fd(os.path.join(TMP, "in%d" % slot))
        self._fill(fd, test)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def _fill(self, fd, test):
        """Write the test's input to the file ``fd``: its inline data, its part of the store, or its input file."""
        if "data" in test:
            write_all(fd, test["data"])
        elif "at" in test:
            copy_into(fd, self.store, test["at"], test["size"])
        else:
            source = os.open(test["path"], os.O_RDONLY | os.O_CLOEXEC)
            try:
                copy_into(fd, source, 0, os.fstat(source).st_size)
            finally:
                os.close(source)

    def _launch(self, index, slot):
        work = self.slot_dirs[slot]
        fds = []
        try:
            fds.append(self._stdin_fd(self.tests[index], slot))
            fds.append(scratch_fd(os.path.join(TMP, "out%d" % slot)))
            fds.append(scratch_fd(os.path.join(TMP, "err%d" % slot)))
            pid = spawn(self.plan, self.spec["lang"], self.program, work, fds[0], fds[1], fds[2], self.stdio)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        start = time.monotonic()
        os.close(fds[0])
        output_path = os.path.join(work, "output.txt") if self.file_mode else None
        self.running[pid] = Running(index, slot, pid, fds[1:], output_path, start)
        self.waiter.add(pid, start + float(self.limits["wall_s"]))

    # --- finishing ---------------------------------------------------------------------------------------------
    def _reap(self, test):
        self.waiter.remove(test.pid)
        del self.running[test.pid]
        _, status, usage = os.wait4(test.pid, 0)
        return status, usage, time.monotonic() - test.start

    def _finish(self, test, timed_out):
        status, usage, wall = self._reap(test)
        kill_strays(self.kill_strays, test.pid, set(self.running))
        record = describe(status, usage, wall, timed_out, test.index)
        out_fd, err_fd = test.fds
        if test.output_path is None:
            stdout, size = read_fd_capped(out_fd, self.out_cap)
        else:
            stdout, size = read_path_capped(test.output_path, self.out_cap)
        stderr, _ = read_fd_capped(err_fd, self.err_cap)
        for fd in test.fds:
            os.close(fd)
        self.free_slots.append(test.slot)
        record["stdout_b64"] = binascii.b2a_base64(stdout[: self.out_cap], newline=False).decode()
        record["stdout_bytes"] = size
        record["stderr"] = stderr[: self.err_cap].decode("utf-8", "replace")
        if self.image_kb:
            record["image_kb"] = self.image_kb
        if test.index < self.end:
            self.finished[test.index] = record
            if self.stop_on_error and failed_on_its_own(record, self.limits):
                self._stop_after(test.index)
        self._emit_ready()

    def _stop_after(self, index):
        """stop_on_error: run nothing after test ``index``; kill the later tests already running."""
        self.end = index + 1
        for test in [t for t in self.running.values() if t.index > index]:
            kill_group(test.pid)
            self._reap(test)
            for fd in test.fds:
                os.close(fd)
            self.free_slots.append(test.slot)
        for later in [i for i in self.finished if i > index]:
            del self.finished[later]

    def _emit_ready(self):
        while self.next_emit in self.finished:
            emit(self.stream, self.finished.pop(self.next_emit))
            self.next_emit += 1


def mode_run(spec):
    """Run every test in its own forked child, ``workers`` at a time; emit one event per test, in test order."""
    program = load_program(spec, sys.stdout)
    if program is None:
        return
    run = TestRun(spec, program, sys.stdout)
    # Prefork habit: park the runner's objects outside the collector, so a child's garbage collections do not
    # touch (and copy-on-write) the parent's pages.
    gc.freeze()
    run.run()


def hung_up(fd):
    """True when the writing side of ``fd`` (a copy of the solution's stdin) is closed: the interactor hung up."""
    poller = select.poll()
    rdhup = getattr(select, "POLLRDHUP", 0x2000)  # a socket shut for writing (a pipe says POLLHUP)
    poller.register(fd, select.POLLIN | rdhup)
    return any(events & (select.POLLHUP | rdhup) for _, events in poller.poll(0))


class Interaction:
    """Waits for an interactive solution while obeying the judge's commands (see mode_interact)."""

    def __init__(self, pid, limits, command_fds, relay_fd, in_fd, out_fd):
        self.pid, self.limits = pid, limits
        self.cpu_s, self.wall_s = float(limits["cpu_s"]), float(limits["wall_s"])
        self.relay_fd, self.out_fd = relay_fd, out_fd  # relay: the solution's stdout pipe -> out_fd
        self.in_fd = in_fd  # a copy of the solution's stdin
        self.stopped = self.hung_up = self.timed_out = self.deadlock = False
        self.idle = IdleClock(pid)
        self.poller = select.poll()
        try:
            self.pidfd = os.pidfd_open(pid)
            self.poller.register(self.pidfd, select.POLLIN)
        except (AttributeError, OSError):
            self.pidfd = None
        self.command_fds = list(command_fds)
        for fd in self.command_fds + ([relay_fd] if relay_fd is not None else []):
            self.poller.register(fd, select.POLLIN)

    def exited(self):
        """True once the solution has exited (not reaped yet: ``wait`` reaps it)."""
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def wait(self):
        """Run until the solution ends (on its own, by the guard, or stopped); returns (status, rusage, wall)."""
        start = time.monotonic()
        deadline = start + self.wall_s
        while not self.exited():
            left = deadline - time.monotonic()
            if left <= 0:
                later = starved_deadline(self.pid, start, self.wall_s, self.cpu_s)
                if later is None:
                    self.timed_out = True
                    kill_group(self.pid)
                    break
                deadline = later
                continue
            step = min(left, ACTIVITY_SAMPLE_S) if self.pidfd is not None else min(left, 0.002)
            for fd, _ in self.poller.poll(step * 1000):
                if fd in self.command_fds:
                    self.command(fd)
                elif fd == self.relay_fd:
                    self.relay()
            if not self.deadlock:
                self.idle.sample(time.monotonic())
        _, status, usage = os.wait4(self.pid, 0)
        wall = time.monotonic() - start
        while self.relay_fd is not None and self.relay(block=False):
            pass  # what the solution wrote before it ended
        if self.pidfd is not None:
            os.close(self.pidfd)
        return status, usage, wall

    def command(self, fd):
        """Obey what ``fd`` brought: stop the solution, end a deadlock, or hang up; a closed ``fd`` is dropped."""
        try:
            data = os.read(fd, 64)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            self.poller.unregister(fd)
            self.command_fds.remove(fd)
            return
        for byte in data:  # a signal's number from the wakeup pipe, or a command letter from the judge's pipe
            command = COMMAND_SIGNALS.get(byte, bytes([byte]))
            if command == STOP and not self.exited():
                self.stopped = True
                kill_group(self.pid)
            if command == PEER_IDLE and not self.deadlock and not self.exited() and self.deadlocked():
                self.deadlock = self.timed_out = True
                kill_group(self.pid)
            if command in (STOP, HANG_UP):
                self.hang_up()

    def deadlocked(self):
        """Told that the interactor has been blocked for DEADLOCK_S: whether the solution has been too, with nothing
        in flight (its stdin empty; its output all read by the interactor, or all relayed)."""
        if self.idle.sample(time.monotonic()) < DEADLOCK_S:
            return False
        out = self.relay_fd if self.relay_fd is not None else self.out_fd
        return unread_bytes(self.in_fd) == 0 and unread_bytes(out) == 0

    def hang_up(self):
        """The interactor is gone: close the read end of the solution's stdout, so that its writes fail (EPIPE,
        SIGPIPE) as they would with the interactor's own pipe."""
        self.hung_up = True
        if self.relay_fd is not None:
            self.poller.unregister(self.relay_fd)
            os.close(self.relay_fd)
            self.relay_fd = None

    def relay(self, block=True):
        """Copy what the solution wrote to out_fd; False at EOF or (block=False) when nothing is waiting."""
        if not block and not select.select([self.relay_fd], [], [], 0)[0]:
            return False
        data = os.read(self.relay_fd, 1 << 16)
        if not data:
            self.poller.unregister(self.relay_fd)
            os.close(self.relay_fd)
            self.relay_fd = None
            return False
        try:
            write_all(self.out_fd, data)
        except OSError:
            self.hang_up()
        return True


def command_pipe():
    """A pipe the interact-mode command signals (SIGUSR1 hang up, SIGUSR2 stop) write their bytes to."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    for sig in COMMAND_SIGNALS:
        _signal.signal(sig, lambda *_: None)  # a handler, so that the signal is delivered to the wakeup fd
    _signal.set_wakeup_fd(write_end)
    return read_end


def mode_interact(spec):
    """One test; the solution inherits our stdin/stdout (pipes to the interactor); events go to stderr.

    The event says whether the interactor had closed the solution's stdin when the solution ended
    (``peer_hung_up``): then a crash of the solution may be its reaction to EOF, and the interactor's verdict
    decides. Our copy of the solution's stdout is held until then, so a solution that closes its stdout but keeps
    running gives the interactor EOF only when it ends.

    Commands from the judge while the solution runs, one byte each on ``spec["control_fd"]`` (an inherited pipe)
    or as a signal to this process (a ``started`` event gives its pid): ``s`` / SIGUSR2 stops the solution (the
    interactor rejected: the event then says ``stopped``), ``h`` / SIGUSR1 hangs up its stdout, ``w`` / SIGURG says
    the interactor has been blocked for DEADLOCK_S: if the solution has been too, with no byte in flight, it is
    killed (a deadlock: the event says ``deadlock`` and ``wall_timeout``, so ILE at once, not at the wall guard). With
    ``relay_stdout`` (where our stdout is not the interactor's own pipe, as with ``docker exec``) the solution
    writes into a pipe of ours that we copy to stdout; a hang-up closes it, so that the solution's next write fails
    as it would when the interactor exits."""
    result_stream = sys.stderr
    program = load_program(spec, result_stream)
    if program is None:
        return
    os.makedirs(WORK, exist_ok=True)
    emit(result_stream, {"event": "started", "pid": os.getpid()})
    command_fds = [command_pipe()]
    if spec.get("control_fd") is not None:
        command_fds.append(int(spec["control_fd"]))
    ferr = scratch_fd(ERR)
    relay_fd, stdout_fd = None, 1
    if spec.get("relay_stdout"):
        relay_fd, stdout_fd = os.pipe()
    pid = spawn(child_plan(spec["limits"]), spec["lang"], program, WORK, 0, stdout_fd, ferr)
    if relay_fd is not None:
        os.close(stdout_fd)
    # Which end hung up first: we keep a copy of both pipes until the solution is reaped, so the interactor cannot
    # see EOF (or a broken pipe) from the solution's death before we look whether it had closed its side already.
    kept = (os.dup(0), os.dup(1))
    # The solution owns the pipes now; fds 0 and 1 become /dev/null, our copies are closed after the event.
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    interaction = Interaction(pid, spec["limits"], command_fds, relay_fd, kept[0], kept[1])
    status, usage, wall = interaction.wait()
    peer_hung_up = hung_up(kept[0]) or interaction.hung_up
    kill_strays(spec.get("kill_strays"), pid)
    record = describe(status, usage, wall, interaction.timed_out, 0)
    record["peer_hung_up"] = peer_hung_up
    record["stopped"] = interaction.stopped
    record["deadlock"] = interaction.deadlock
    cap = int(spec["limits"].get("stderr_bytes", 4096))
    stderr, _ = read_fd_capped(ferr, cap)
    os.close(ferr)
    record.update(stdout_b64="", stdout_bytes=0, stderr=stderr[:cap].decode("utf-8", "replace"))
    if spec["lang"] != "py":
        record["image_kb"] = image_kb(program)
    # The event goes out before the pipes close: once the interactor sees the solution's end (and exits), the
    # judge may stop waiting for us, and the event must already be on its way.
    emit(result_stream, record)
    for fd in kept:
        os.close(fd)


def read_exact(fd, count):
    """Exactly ``count`` bytes from ``fd`` (EOFError if it ends first), read into one buffer: a large spec is then a
    single mapping, returned to the system when freed (not pieces left behind in the heap)."""
    buf = bytearray(count)
    view, got = memoryview(buf), 0
    while got < count:
        n = os.readv(fd, [view[got:]])
        if not n:
            raise EOFError("spec ended early")
        got += n
    view.release()
    return buf


def read_spec(fd):
    """The spec is framed as a 16-byte decimal length then the marshal bytes (trusted: written by the judge), so
    that in interact mode the bytes after it (the interactor's) stay unread in the pipe for the solution."""
    return read_exact(fd, int(read_exact(fd, 16)))


def make_undumpable():
    """prctl(PR_SET_DUMPABLE, 0): the solution (same uid) can then neither open /proc/<runner>/fd nor ptrace us."""
    libc_call("prctl", 4, 0, 0, 0, 0)


def main():
    """Read the spec, run its mode, end with a ``done`` event (an ``error`` event first if the runner failed).

    What needs no spec is done first: a warm box (``local.py``) does it before its call is made."""
    make_undumpable()
    spec = marshal.loads(read_spec(0))
    set_scratch(spec.get("tmp", "/tmp"))
    mode = spec["mode"]
    stream = sys.stderr if mode == "interact" else sys.stdout
    try:
        if mode == "run" and sum(len(t.get("data", b"")) for t in spec["tests"]) >= STASH_MIN_BYTES:
            # First thing after loading, while the inputs still lie at the top of the heap, so that the memory
            # they held can go back to the system.
            spec["input_store"] = stash_inputs(spec["tests"], os.path.join(TMP, "inputs"))
        # Freeze the runner's objects out of the collector: forked children then do not write to (copy) their
        # pages.
        gc.freeze()
        if mode == "compile":
            mode_compile(spec)
        elif mode == "run":
            mode_run(spec)
        elif mode == "interact":
            mode_interact(spec)
        else:
            raise ValueError("unknown mode %r" % (mode,))
    except Exception as exc:
        import traceback

        emit(stream, {"event": "error", "message": "%s\n%s" % (exc, traceback.format_exc())})
    usage = resource.getrusage(resource.RUSAGE_SELF)
    emit(stream, {"event": "done", "cpu_s": round(usage.ru_utime + usage.ru_stime, 6)})


if __name__ == "__main__":
    main()
    # Every child is reaped and every event written: skip the interpreter's teardown (~1.5 ms per box).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
