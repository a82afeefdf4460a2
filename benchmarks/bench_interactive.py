"""Wall time of an interactive submission that hangs, over 10 tests: this tree against a baseline tree, same run.

    git worktree add /tmp/old <baseline commit>
    python benchmarks/bench_interactive.py --baseline /tmp/old [--time-limit 1] [--tests 10] [--json]

Scenarios (guess-the-number interactor of tests/sandboxes/fixtures/interactive, local backend, default workers):
  rejected-spins   the solution answers wrong (the interactor exits WA at once), then spins on the CPU
  rejected-sleeps  the same, then blocks forever without using the CPU
  deadlock         the solution never flushes its first query: it and the interactor wait for each other
Each scenario is judged by each tree in a fresh process (``judge()`` wall time, verdict); the ratio is
baseline / this tree. Timing, not verdicts, is the point; the verdicts are printed so that a fast wrong answer shows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "rejected-spins": "n = int(input())\nprint('!', n + 1, flush=True)\nwhile True:\n    pass\n",
    "rejected-sleeps": "import time\nn = int(input())\nprint('!', n + 1, flush=True)\ntime.sleep(1000)\n",
    "deadlock": "import sys\nn = int(input())\nsys.stdout.write('? 1\\n')\nsys.stdin.readline()\n",
}
RUN = """
import json, sys, time
from sandboxes import Limits, judge
source, n, time_limit, interactor = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
tests = [("1000 %d\\n" % (i + 1), "") for i in range(n)]
start = time.perf_counter()
result = judge(source, tests, interactor=interactor, limits=Limits(time_limit_s=time_limit, memory_limit_mb=256))
print(json.dumps({"wall_s": time.perf_counter() - start, "verdict": result.verdict.value,
                  "tests": [t.verdict.value for t in result.tests]}))
"""


def measure(tree: Path, source: str, n: int, time_limit: float) -> dict:
    """Judge ``source`` with the code of ``tree`` in a fresh interpreter; its wall time and verdicts."""
    interactor = HERE / "tests" / "sandboxes" / "fixtures" / "interactive" / "interactor.py"
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", RUN, source, str(n), str(time_limit), str(interactor)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        timeout=1200,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    """Time each scenario in the baseline tree and in this one; print a line per scenario, or JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the baseline commit")
    parser.add_argument("--tests", type=int, default=10, help="tests per submission (default 10)")
    parser.add_argument("--time-limit", type=float, default=1.0, help="CPU seconds per test (default 1)")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    rows = []
    for name in args.scenario or list(SCENARIOS):
        old = measure(args.baseline, SCENARIOS[name], args.tests, args.time_limit)
        new = measure(HERE, SCENARIOS[name], args.tests, args.time_limit)
        rows.append(
            {
                "scenario": name,
                "baseline_s": round(old["wall_s"], 2),
                "baseline_verdict": old["verdict"],
                "this_s": round(new["wall_s"], 2),
                "this_verdict": new["verdict"],
                "ratio": round(old["wall_s"] / new["wall_s"], 1),
                "this_in_time_limits": round(new["wall_s"] / args.time_limit, 2),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{args.tests} tests, time limit {args.time_limit} s, {os.cpu_count()} CPUs")
        for row in rows:
            print(
                f"{row['scenario']:>16}: baseline {row['baseline_s']:6.2f} s ({row['baseline_verdict']}), "
                f"this {row['this_s']:6.2f} s ({row['this_verdict']}) = {row['this_in_time_limits']} time "
                f"limits, {row['ratio']}x faster"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
