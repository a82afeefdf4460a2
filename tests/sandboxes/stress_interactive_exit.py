"""Stress (a script, not a test): accepted solutions that exit right after their last answer, judged many times on a
Kattis interactive package whose validator then writes a final line they never read; prints verdict counts.

    python tests/sandboxes/stress_interactive_exit.py [--runs 20] [--tests 49] [--backends local,docker]
                                                       [--langs py,cpp] [--json]

The package is built in a temporary folder from ``fixtures/kattis_exit_early`` (its problem.yaml and its C++
validator, written in validate.h's style): ``--tests`` tests of 1 to 20 sums each, in the order validate.h
validators use ("reply-first": the final line, then the check that the solution wrote nothing more), so whether the
solution is still there at that write is a matter of timing; every seventh test writes it only after the solution's
output has ended ("eof-first"), and every fourteenth makes that line 256 KiB. ``on_reject: continue``, so every
test runs and each one's verdict counts. Kattis's rule (problemtools' interactive.cc) accepts every run: the
validator's exit code decides, its writes to a solution that has exited do not fail. Before that rule was
followed here, such packages got WA on a timing-dependent share of their tests ("the solution closed its input
before the interactor was done"). A backend that is unavailable (no bubblewrap, no Docker daemon or image) is
reported and skipped. Exit status: 0 when every run of every backend and language is AC, else 1.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from agentgspo.sandboxes import SandboxUnavailable, Verdict, get_sandbox, judge_kattis, load_kattis_package

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "kattis_exit_early"
SOLUTIONS = {  # accepted: answer each pair, then exit without reading the validator's last line
    "py": "k = int(input())\nfor _ in range(k):\n    a, b = map(int, input().split())\n    print(a + b, flush=True)\n",
    "cpp": (
        '#include <cstdio>\nint main(){int k; if(scanf("%d",&k)!=1) return 1; while(k--){long long a,b;'
        ' scanf("%lld %lld",&a,&b); printf("%lld\\n",a+b); fflush(stdout);}}\n'
    ),
}
LONG_FINAL_LINE = 256 << 10


def build_package(folder: Path, n_tests: int, seed: int = 0) -> Path:
    """A copy of the fixture with ``n_tests`` generated tests (see the module docstring); returns its folder."""
    shutil.copy(FIXTURE / "problem.yaml", folder / "problem.yaml")
    shutil.copytree(FIXTURE / "output_validator", folder / "output_validator")
    secret = folder / "data" / "secret"
    secret.mkdir(parents=True)
    (secret / "testdata.yaml").write_text("on_reject: continue\n")
    rng = random.Random(seed)
    for index in range(1, n_tests + 1):
        mode = "eof-first" if index % 7 == 0 else "reply-first"
        final_bytes = LONG_FINAL_LINE if index % 14 == 0 else 4
        pairs = [(rng.randint(-(10**9), 10**9), rng.randint(-(10**9), 10**9)) for _ in range(rng.randint(1, 20))]
        lines = [f"{mode} {len(pairs)} {final_bytes}"] + [f"{a} {b}" for a, b in pairs]
        (secret / f"{index:02d}.in").write_text("\n".join(lines) + "\n")
        (secret / f"{index:02d}.ans").write_text("")
    return folder


def stress(package, backend, lang: str, runs: int) -> dict:
    """Judge ``lang``'s accepted solution ``runs`` times; verdict counts per run and the tests that were not AC."""
    runs_by_verdict: collections.Counter = collections.Counter()
    failed_tests: collections.Counter = collections.Counter()
    start = time.monotonic()
    for _ in range(runs):
        result = judge_kattis(package, SOLUTIONS[lang], lang, backend=backend)
        runs_by_verdict[result.verdict.value] += 1
        for test in result.tests:
            if test.verdict != Verdict.AC:
                failed_tests[f"{test.name} {test.verdict.value}: {test.message[:80]}"] += 1
    return {
        "runs": runs,
        "verdicts": dict(runs_by_verdict),
        "tests_not_ac": sum(failed_tests.values()),
        "failures": dict(failed_tests.most_common(10)),
        "seconds": round(time.monotonic() - start, 1),
    }


def main() -> int:
    """Build the package, stress every backend and language, print the counts; 0 when every run was AC."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="judgings per backend and language")
    parser.add_argument("--tests", type=int, default=49, help="tests in the generated package")
    parser.add_argument("--backends", default="local,docker", help="comma-separated: local, docker")
    parser.add_argument("--langs", default="py,cpp", help="comma-separated: py, cpp")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = parser.parse_args()
    report: dict = {"tests_per_run": args.tests, "backends": {}}
    all_ac = True
    with tempfile.TemporaryDirectory(prefix="agentgspo-stress-") as tmp:
        package = load_kattis_package(build_package(Path(tmp), args.tests))
        for name in args.backends.split(","):
            try:
                backend = get_sandbox(name)
            except SandboxUnavailable as exc:
                report["backends"][name] = {"skipped": str(exc)}
                if not args.json:
                    print(f"{name}: skipped ({exc})")
                continue
            report["backends"][name] = {}
            for lang in args.langs.split(","):
                counts = stress(package, backend, lang, args.runs)
                report["backends"][name][lang] = counts
                all_ac = all_ac and counts["verdicts"] == {"AC": args.runs}
                if not args.json:
                    print(
                        f"{name} {lang}: {counts['verdicts']} over {args.runs} runs of {args.tests} tests; "
                        f"tests not AC: {counts['tests_not_ac']} ({counts['seconds']} s)"
                    )
                    for failure, times in counts["failures"].items():
                        print(f"    {times}x {failure}")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0 if all_ac else 1


if __name__ == "__main__":
    sys.exit(main())
