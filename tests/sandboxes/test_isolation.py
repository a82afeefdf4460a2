"""One adversarial test per property the local and Docker backends claim (see their module docstrings)."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import threading
import time

import pytest

from agentgspo.sandboxes import Limits, Verdict, judge, run_python

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
    code = "x = []\nwhile True:\n    x.append(bytearray(10**6))\n"
    result = judge(code, [("", "")], limits=FAST, backend=backend)
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
import os
if input() == "bomb":
    while True:
        try:
            os.fork()
        except OSError:
            pass
print("ok")
"""
    start = time.time()
    result = judge(
        code, [("ok", "ok"), ("bomb", ""), ("ok", "ok"), ("bomb", "")], limits=FAST, backend=backend, workers=2
    )
    assert time.time() - start < 40
    verdicts = [t.verdict for t in result.tests]
    assert verdicts[0] == verdicts[2] == Verdict.AC, result
    assert verdicts[1] in (Verdict.TLE, Verdict.RE, Verdict.MLE) and verdicts[3] in (
        Verdict.TLE,
        Verdict.RE,
        Verdict.MLE,
    ), result


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
