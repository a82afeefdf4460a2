"""In-sandbox runner: compiles once, then runs every test of one submission in forked children.

This file is executed *inside* the sandbox by the system ``python3`` (standard library only, Python >= 3.8),
either from a read-only bind (local backend) or as ``python3 -c SOURCE`` (Docker backend). It never sees the
expected answers: it gets the inputs, runs the program, and reports raw facts (exit status, CPU time, wall time,
peak memory, output bytes). Verdicts are decided outside, by the judge.

Protocol: one dict (the spec, in ``marshal`` format) on stdin, framed by a 16-byte decimal length, JSON lines (events) on the result stream: stdout in the
``compile`` and ``run`` modes, stderr in the ``interact`` mode (there stdin/stdout are the pipes to the
interactor and belong to the solution).

Spec fields:
    mode: "compile" | "run" | "interact"
    lang: "py" | "cpp"
    source: program text (py: run/interact; cpp: compile)
    binary: path of the compiled program (cpp run/interact; compile writes it)
    compile_cmd: argv for the compiler (cpp compile); compile_limits: {cpu_s, wall_s, memory_mb}
    tests: [{"path": FILE} | {"data": BYTES}]   (run mode)
    limits: {cpu_s, wall_s, memory_mb, output_bytes, stderr_bytes, nproc}
    io_mode: "stdio" | "file"  (file: the program reads ./input.txt and writes ./output.txt)
    stop_on_error: stop after the first test that fails on its own (exit != 0, signal, time)
    kill_strays: after each test kill every other process of the sandbox's pid namespace (kill(-1));
                 only set when the runner is inside its own pid namespace or container.

Event lines: {"event": "ready"} | {"event": "compile", "ok", "stderr", "cpu_s", "wall_s"} |
{"event": "test", "index", "exit_code", "signal", "cpu_s", "wall_s", "memory_kb", "wall_timeout",
 "stdout_b64", "stdout_bytes", "stderr"} | {"event": "done"} | {"event": "error", "message"}.
"""

import binascii
import builtins
import gc
import marshal
import os
import resource
import gc
import select
import signal
import sys
import time

# Modules a typical solution imports: importing them here once makes them free in every forked child.
import bisect, collections, functools, heapq, itertools, math, string  # noqa: E401,F401

# Scratch paths, under the sandbox's private tmp (spec["tmp"], default /tmp); set by set_scratch().
WORK = OUT = ERR = IN = ""


def set_scratch(tmp):
    global WORK, OUT, ERR, IN
    WORK, OUT, ERR, IN = (os.path.join(tmp, name) for name in ("w", "out", "err", "in"))


# A tiny JSON encoder: importing the json module costs more than a whole test (startup matters at 700 tests/s).
_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def to_json(value):
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
    stream.write(to_json(record) + "\n")
    stream.flush()


def set_child_limits(limits):
    """rlimits for one test, set in the forked child before it runs the solution."""
    mem = int(limits["memory_mb"] * 1024 * 1024)
    cpu = float(limits["cpu_s"])
    hard_cpu = int(cpu) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (hard_cpu, hard_cpu))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_STACK, (mem, mem))
    out = int(limits["output_bytes"]) + 1
    resource.setrlimit(resource.RLIMIT_FSIZE, (out, out))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    if limits.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
    # A precise CPU-time stop (SIGPROF kills by default); RLIMIT_CPU above is the backstop. Kept across exec.
    signal.setitimer(signal.ITIMER_PROF, cpu + 0.05)


def reset_signals():
    # Python ignores SIGPIPE and SIGXFSZ; ignored dispositions survive exec, so restore the defaults.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGPROF, signal.SIGXCPU, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _site_exit(code=None):
    raise SystemExit(code)


def run_python_child(code):
    """Body of the forked child for Python: exec the compiled code as __main__ and _exit with its status."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as in a normal python3 process
    sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)
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


def spawn(spec, program, stdin_fd, stdout_fd, stderr_fd):
    """Fork one child that runs the program with the given fds and limits; returns its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setpgid(0, 0)
        # Lowest priority: under a fork bomb the runner (nice 0) still gets the CPU to enforce the wall guard.
        # Time limits are on CPU time, so this does not change verdicts.
        os.nice(19)
        os.chdir(WORK)
        if stdin_fd != 0:
            os.dup2(stdin_fd, 0)
        if stdout_fd != 1:
            os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        os.closerange(3, 1024)
        reset_signals()
        set_child_limits(spec["limits"])
        if spec["lang"] == "py":
            run_python_child(program)
        else:
            os.execv(program, [program])
    except BaseException as exc:  # setup failure: report through stderr and a distinctive status
        try:
            os.write(2, ("runner: child setup failed: %r\n" % (exc,)).encode())
        finally:
            os._exit(127)
    os._exit(127)


def wait_with_guard(pid, wall_s):
    """Wait for the child at most wall_s seconds (then SIGKILL its group); returns (status, rusage, wall, timeout)."""
    start = time.monotonic()
    timed_out = False
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(0.0, wall_s) * 1000):
            timed_out = True
        os.close(pidfd)
    else:  # old kernels: poll with short sleeps
        while True:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break
            if time.monotonic() - start > wall_s:
                timed_out = True
                break
            time.sleep(0.002)
    if timed_out:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    _, status, usage = os.wait4(pid, 0)
    return status, usage, time.monotonic() - start, timed_out


def kill_strays(spec, pid):
    """Kill what the test left behind: its process group, and with kill_strays every process but us and init."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if spec.get("kill_strays") and os.getpid() != 1:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    # reap anything that was our child
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if reaped == 0:
            break


def read_capped(path, cap):
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
            f.seek(0, 2)
            return data, f.tell()
    except FileNotFoundError:
        return b"", 0


def describe(status, usage, wall, timed_out, index):
    record = {
        "event": "test",
        "index": index,
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 6),
        "wall_s": round(wall, 6),
        "memory_kb": usage.ru_maxrss,
        "wall_timeout": timed_out,
    }
    return record


def failed_on_its_own(record, limits):
    return record["exit_code"] != 0 or record["wall_timeout"] or record["cpu_s"] > limits["cpu_s"]


def load_program(spec, result_stream):
    """Python: compile the source once (SyntaxError -> compile event with ok=False). C++: the binary path."""
    if spec["lang"] == "py":
        try:
            return compile(spec["source"], "solution.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            import traceback

            emit(result_stream, {"event": "compile", "ok": False, "stderr": "".join(
                traceback.format_exception_only(type(exc), exc)), "cpu_s": 0.0, "wall_s": 0.0})
            return None
    return spec["binary"]


def mode_compile(spec):
    """Compile C++ with the given argv, limited; the binary lands where compile_cmd says."""
    for path in [WORK] + spec.get("make_dirs", []):
        os.makedirs(path, exist_ok=True)
    src_path = spec["source_path"]
    with open(src_path, "w") as f:
        f.write(spec["source"])
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
        status, usage, wall, timed_out = wait_with_guard(pid, lim["wall_s"])
    kill_strays(spec, pid)
    stderr, _ = read_capped(ERR, 64 * 1024)
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and not timed_out
    message = stderr.decode("utf-8", "replace")
    if timed_out:
        message += "\ncompilation exceeded %.1f s wall time" % lim["wall_s"]
    emit(sys.stdout, {"event": "compile", "ok": ok, "stderr": message,
                      "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall})


def mode_run(spec):
    """Run every test in its own forked child; emit one event per test."""
    out_stream = sys.stdout
    program = load_program(spec, out_stream)
    if program is None:
        return
    limits = spec["limits"]
    os.makedirs(WORK, exist_ok=True)
    file_mode = spec.get("io_mode") == "file"
    # Prefork habit: park the runner's objects outside the collector, so a child's garbage collections do not
    # touch (and copy-on-write) the parent's pages.
    gc.freeze()
    for index, test in enumerate(spec["tests"]):
        if "path" in test:
            in_path = test["path"]
        else:
            in_path = IN
            with open(IN, "wb") as f:
                f.write(test["data"])
        out_path = os.path.join(WORK, "output.txt") if file_mode else OUT
        for stale in (out_path, ERR):
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
        if file_mode:
            with open(in_path, "rb") as src, open(os.path.join(WORK, "input.txt"), "wb") as dst:
                dst.write(src.read())
            in_path = "/dev/null"
        fin = os.open(in_path, os.O_RDONLY)
        fout = os.open(OUT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        ferr = os.open(ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        pid = spawn(spec, program, fin, fout, ferr)
        for fd in (fin, fout, ferr):
            os.close(fd)
        status, usage, wall, timed_out = wait_with_guard(pid, limits["wall_s"])
        kill_strays(spec, pid)
        record = describe(status, usage, wall, timed_out, index)
        stdout, size = read_capped(out_path, int(limits["output_bytes"]))
        stderr, _ = read_capped(ERR, int(limits.get("stderr_bytes", 4096)))
        record["stdout_b64"] = binascii.b2a_base64(stdout[: int(limits["output_bytes"])], newline=False).decode()
        record["stdout_bytes"] = size
        record["stderr"] = stderr.decode("utf-8", "replace")
        emit(out_stream, record)
        if spec.get("stop_on_error") and failed_on_its_own(record, limits):
            break


def mode_interact(spec):
    """One test; the solution inherits our stdin/stdout (pipes to the interactor); events go to stderr."""
    result_stream = sys.stderr
    program = load_program(spec, result_stream)
    if program is None:
        return
    os.makedirs(WORK, exist_ok=True)
    ferr = os.open(ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = spawn(spec, program, 0, 1, ferr)
    os.close(ferr)
    # The solution owns the pipes now: close ours so EOF propagates when it exits.
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    status, usage, wall, timed_out = wait_with_guard(pid, spec["limits"]["wall_s"])
    kill_strays(spec, pid)
    record = describe(status, usage, wall, timed_out, 0)
    stderr, _ = read_capped(ERR, int(spec["limits"].get("stderr_bytes", 4096)))
    record.update(stdout_b64="", stdout_bytes=0, stderr=stderr.decode("utf-8", "replace"))
    emit(result_stream, record)


def read_exact(fd, count):
    chunks = []
    while count:
        chunk = os.read(fd, min(count, 1 << 20))
        if not chunk:
            raise EOFError("spec ended early")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_spec(fd):
    """The spec is framed as a 16-byte decimal length then the marshal bytes (trusted: written by the judge), so that in interact mode the
    bytes after it (the interactor's) stay unread in the pipe for the solution."""
    return read_exact(fd, int(read_exact(fd, 16)))


def main():
    spec = marshal.loads(read_spec(0))
    try:  # non-dumpable: the solution (same uid) cannot open /proc/<runner>/fd or ptrace the runner
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass
    set_scratch(spec.get("tmp", "/tmp"))
    mode = spec["mode"]
    # Freeze the runner's objects out of the collector: forked children then do not write to (copy) their pages.
    gc.freeze()
    stream = sys.stderr if mode == "interact" else sys.stdout
    try:
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
    emit(stream, {"event": "done"})


if __name__ == "__main__":
    main()
