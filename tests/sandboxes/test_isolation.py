"""One adversarial test per property the local and Docker backends claim (see their module docstrings)."""

from __future__ import annotations

import dataclasses
import os
import resource
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from agentgspo.sandboxes import Limits, SandboxUnavailable, Verdict, judge, run_python
from agentgspo.sandboxes.judge.core import _run_spec
from agentgspo.sandboxes.local import LocalSandbox

FAST = Limits(time_limit_s=0.5, memory_limit_mb=128, output_limit_mb=1, wall_limit_s=1.5)


def _procs_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_network_is_blocked(backend):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        end = time.time() + 4
        while time.time() < end:
            try:
                accepted.append(listener.accept())
            except socket.timeout:
                pass

    thread = threading.Thread(target=accept)
    thread.start()
    code = f"""
import socket
for host in ("127.0.0.1", "10.0.2.2", "8.8.8.8"):
    try:
        socket.create_connection((host, {port}), timeout=1).sendall(b"hi")
        print("connected", host)
    except OSError as e:
        print("blocked", host)
"""
    result = run_python(code, limits=Limits(time_limit_s=2, wall_limit_s=6), backend=backend)
    thread.join()
    listener.close()
    assert "connected" not in result.stdout and result.stdout.count("blocked") == 3, result
    assert accepted == []


def test_writes_outside_private_tmp_fail(backend, tmp_path):
    target = tmp_path / "escape.txt"
    code = f"""
import dataclasses
import os
for path in ("/usr/escape.txt", "/etc/escape.txt", "/escape.txt", {str(target)!r}, "/opt/escape.txt"):
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError:
        print("denied", path)
open("/tmp/ok.txt", "w").write("fine")
print("tmp ok", open("/tmp/ok.txt").read())
"""
    result = run_python(code, backend=backend)
    assert "wrote" not in result.stdout, result.stdout
    assert "tmp ok fine" in result.stdout
    assert not target.exists() and not os.path.exists("/usr/escape.txt")


@pytest.mark.slow
def test_fork_bomb_is_contained(backend):
    code = """
import dataclasses
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    start = time.time()
    result = judge(code, [("", "")], limits=FAST, backend=backend)
    assert time.time() - start < 30
    assert result.verdict in (Verdict.TLE, Verdict.RE, Verdict.MLE), result


def test_no_process_outlives_the_call(backend):
    marker = f"4242.{os.getpid()}{int(time.time() * 1000) % 100000}"
    code = f"""
import os, subprocess
subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{marker}"])
    os._exit(0)
print("spawned")
"""
    result = run_python(code, backend=backend)
    assert "spawned" in result.stdout, result
    time.sleep(0.3)
    assert _procs_with(marker) == []


def test_memory_bomb_is_mle(backend):
    # Room in time (5 s of CPU) so that the memory limit is the first one reached even on a loaded machine: the CI
    # run saw TLE at 0.53 s of CPU with FAST's 0.5 s while other tests ran beside it.
    roomy = dataclasses.replace(FAST, time_limit_s=5.0, wall_limit_s=15.0)
    code = "x = []\nwhile True:\n    x.append(bytearray(10**6))\n"
    result = judge(code, [("", "")], limits=roomy, backend=backend)
    assert result.verdict == Verdict.MLE, result


def test_infinite_output_is_ole_and_judge_memory_stays_small(backend):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    result = judge(code, [("", "")], limits=FAST, backend=backend)
    assert result.verdict == Verdict.OLE, result
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100, f"judge grew by {grown_mb} MB"


def test_answer_files_are_unreadable(backend):
    secret = f"SECRET-ANSWER-{os.getpid()}-{time.time()}"
    code = """
import dataclasses
import os
found = "notfound"
for root in ("/tmp", "/box", "/opt", "/home", "/root", "/var", "/etc", "/"):
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(base, d) not in ("/proc", "/sys", "/usr", "/dev")]
        for name in files:
            try:
                if b"SECRET-ANSWER" in open(os.path.join(base, name), "rb").read(1 << 20):
                    found = "found " + os.path.join(base, name)
            except OSError:
                pass
print(found)
"""
    result = judge(code, [("input", secret)], limits=Limits(time_limit_s=5, wall_limit_s=10), backend=backend)
    assert result.verdict == Verdict.WA, result
    assert "notfound" in result.tests[0].message, result.tests[0].message


def test_sleep_forever_is_tle_by_wall_guard(backend):
    start = time.time()
    result = judge("import time\ntime.sleep(10**6)\n", [("", "")], limits=FAST, backend=backend)
    assert result.verdict == Verdict.TLE, result
    assert result.tests[0].wall_time_s >= FAST.wall_s - 0.05 and result.tests[0].time_s < 0.5
    assert time.time() - start < 15


@pytest.mark.slow
def test_fork_bomb_in_one_test_spares_its_parallel_siblings(backend):
    code = """
import dataclasses
import os
if input() == "bomb":
    while True:
        try:
            os.fork()
        except OSError:
            pass
print("ok")
"""
    # A sibling's Python starts beside a spinning bomb: FAST's wall (1.5 s, 2.5 s with the starved extension) was
    # too short for that on a loaded machine (TLE for an "ok" test in a suite run with a training run beside it).
    roomy = dataclasses.replace(FAST, wall_limit_s=4.0)
    start = time.time()
    # Two workers: the first "ok" and the bomb start together, the second "ok" starts while the bomb still runs.
    # (A sibling that starts after a bomb ended, while its processes are being reaped, failed twice on a loaded
    # machine: not what this test claims; noted in the session-42 note.)
    result = judge(code, [("ok", "ok"), ("bomb", ""), ("ok", "ok")], limits=roomy, backend=backend, workers=2)
    assert time.time() - start < 40
    verdicts = [t.verdict for t in result.tests]
    assert verdicts[0] == verdicts[2] == Verdict.AC, result
    assert verdicts[1] in (Verdict.TLE, Verdict.RE, Verdict.MLE), result


def test_strays_of_a_finished_test_die_while_its_siblings_run(backend):
    marker = f"4343.{os.getpid()}{int(time.time() * 1000) % 100000}"
    code = f"""
import os, subprocess, time
if input() == "spawn":
    subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
    print("spawned")
else:
    time.sleep(1.0)  # the spawning test has ended meanwhile
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            alive += ["{marker}" in open(f"/proc/{{pid}}/cmdline").read()]
        except OSError:
            pass
    print("alive" if any(alive) else "gone")
"""
    tests = [("spawn", "spawned"), ("watch", "gone")]
    result = judge(code, tests, limits=Limits(time_limit_s=2, wall_limit_s=5), backend=backend, workers=2)
    assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.AC], result
    time.sleep(0.3)
    assert _procs_with(marker) == []


def test_sandbox_processes_are_born_in_the_box_cgroup():
    from agentgspo.sandboxes import cgroups

    if not cgroups.available():
        pytest.skip("per-box cgroups need root")
    before = open("/proc/thread-self/cgroup").read()
    box = cgroups.BoxCgroup(16, 256 << 20)
    try:
        with box.forking_inside() as inside:
            child = subprocess.Popen(["sleep", "5"])
        if not inside:
            box.add(child.pid)
        name = box.dirs[0].name
        assert all(name in line for line in open(f"/proc/{child.pid}/cgroup") if "pids" in line or "memory" in line)
        assert open("/proc/thread-self/cgroup").read() == before  # the spawning thread is back where it was
    finally:
        box.destroy()
        child.wait(timeout=5)
    assert child.returncode == -signal.SIGKILL


# --- warm sessions of the local backend (boxes started ahead of use, ``sandboxes/local.py``) --------------------
# A warm box must be as fresh as a box started by its call: nothing of an earlier submission (files, processes) is
# visible in it, each test still runs in a fresh forked child, and every limit holds.


@pytest.fixture(scope="module")
def warm():
    """A local backend of its own with one warm session per pids limit."""
    try:
        sandbox = LocalSandbox(warm_boxes=1)
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    yield sandbox
    sandbox.close_warm()


def _wait_warm(sandbox: LocalSandbox, pids: int = Limits().pids_limit) -> None:
    """Open (and close) one session so that the pool wants one, then wait until a warm one is ready."""
    if not sandbox.warm_count(pids):
        with sandbox.session(pids):
            pass
    deadline = time.monotonic() + 20
    while not sandbox.warm_count(pids):
        assert time.monotonic() < deadline, "no warm session became ready in 20 s"
        time.sleep(0.01)


def test_a_session_gets_a_box_started_ahead_and_its_run_call_uses_it(warm):
    _wait_warm(warm)
    limits = Limits()
    with warm.session(limits.pids_limit) as box:
        assert box.started_warm
        started = box._warm
        assert started is not None and started.poll() is None  # its runner waits for the spec
        events = box.call(_run_spec("print(int(input()) * 2)\n", "python3", box, limits, "stdio", "run"), [b"21\n"])
        assert box._warm is None and started.poll() is not None  # the call ran in it, and it is gone
    test = next(e for e in events if e["event"] == "test")
    assert test["exit_code"] == 0 and test["minor_faults"] > 0
    assert events[-1]["event"] == "done" and events[-1]["cpu_s"] >= 0


def test_a_warm_box_sees_nothing_of_an_earlier_submission(warm):
    marker = f"warm{os.getpid()}"
    leave = f"""
import os, subprocess
open("/tmp/{marker}", "w").write("secret")
subprocess.Popen(["sleep", "30"], start_new_session=True)
try:
    import _posixshmem  # a POSIX shared memory object, where the box allows one
    _posixshmem.shm_open("/{marker}", os.O_CREAT | os.O_RDWR, 0o600)
except Exception:
    pass
print("left")
"""
    look = f"""
import os, sys
seen = [p for p in ("/tmp/{marker}", "/dev/shm/{marker}") if os.path.exists(p)]
sleepers = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if open(f"/proc/{{pid}}/cmdline").read().startswith("sleep"):
            sleepers.append(pid)
    except OSError:
        pass
print("clean" if not seen and not sleepers else f"seen {{seen}} {{sleepers}}")
"""
    _wait_warm(warm)
    assert judge(leave, [("", "left")], limits=FAST, backend=warm).accepted
    _wait_warm(warm)  # started while the first submission ran or after it: it must not see its leftovers
    result = judge(look, [("", "clean")], limits=FAST, backend=warm)
    assert result.accepted, result


def test_each_test_of_a_warm_box_runs_in_a_fresh_process_state(warm):
    # Module and builtins state left by test 1 (and a replaced sys.stdin) must not reach test 2.
    code = """
import builtins, math, sys
first = input() == "first"
if first:
    builtins.LEFT = 1
    math.LEFT = 1
    sys.LEFT = 1
    sys.stdin = None
    print("set")
else:
    print("clean" if not any(hasattr(m, "LEFT") for m in (builtins, math, sys)) else "leaked")
"""
    _wait_warm(warm)
    result = judge(code, [("first", "set"), ("second", "clean")], limits=FAST, backend=warm, workers=1)
    assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.AC], result


@pytest.mark.parametrize(
    ("code", "verdict"),
    [
        ("while True:\n    pass\n", Verdict.TLE),
        ("import time\ntime.sleep(10)\n", Verdict.TLE),
        ("x = []\nwhile True:\n    x.append(bytearray(10**6))\n", Verdict.MLE),
        ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", Verdict.OLE),
        ("raise SystemExit(3)\n", Verdict.RE),
        ("print(int(input()) + 1)\n", Verdict.WA),
    ],
)
def test_limits_and_verdicts_hold_in_a_warm_box(warm, code, verdict):
    _wait_warm(warm)
    result = judge(code, [("1", "1")], limits=FAST, backend=warm)
    assert result.verdict == verdict, result


def test_a_warm_box_killed_while_waiting_is_replaced_by_a_fresh_one(warm):
    _wait_warm(warm)
    pids = Limits().pids_limit
    victim = warm._pool.idle[pids][-1]
    os.killpg(victim._warm.pid, signal.SIGKILL)
    victim._warm.wait()
    result = judge("print(int(input()) + 1)\n", [("1", "2")], backend=warm)
    assert result.accepted, result


def test_closing_a_session_kills_its_box_then_removes_its_files_and_cgroup(warm):
    _wait_warm(warm)
    with warm.session(64) as box:
        host_dir, cgroup_dirs = box.host_dir, list(box.cgroup.dirs) if box.cgroup is not None else []
        warm_proc = box._warm  # never used: killed at close
    assert warm_proc.poll() is not None
    deadline = time.monotonic() + 10
    while host_dir.exists() or any(Path(d).exists() for d in cgroup_dirs):
        assert time.monotonic() < deadline, "the closed session's directory or cgroup was not removed"
        time.sleep(0.02)


def test_a_forked_child_judges_with_its_own_boxes_and_leaves_the_parents_alone(warm):
    _wait_warm(warm)
    pids = Limits().pids_limit
    parents = [box._warm.pid for box in warm._pool.idle[pids]]
    child = os.fork()
    if child == 0:  # pragma: no cover (runs in the child)
        try:
            ok = judge("print(int(input()) + 1)\n", [("1", "2")], backend=warm).accepted
            warm.close_warm()  # os._exit runs no atexit handler
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert all(warm_box._warm.poll() is None for warm_box in warm._pool.idle[pids] if warm_box._warm.pid in parents)
    assert judge("print(int(input()) + 1)\n", [("1", "2")], backend=warm).accepted


def test_warm_boxes_must_be_a_count():
    with pytest.raises(ValueError, match="warm_boxes must be an integer >= 0"):
        LocalSandbox(warm_boxes=-1)
