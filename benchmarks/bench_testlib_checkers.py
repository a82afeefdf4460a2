"""Acceptance: testlib's standard checkers given to the judge as C++ source agree with the same checkers compiled by
hand and run directly.

    python benchmarks/bench_testlib_checkers.py TESTLIB_DIR [--json]

TESTLIB_DIR is a checkout of https://github.com/MikeMirzayanov/testlib (``testlib.h`` and ``checkers/*.cpp``). Each
checker is compiled twice: by hand (``g++ -std=gnu++17 -O2 -I TESTLIB_DIR``), and by the judge from
``testlib:checkers/NAME.cpp`` with ``testlib_h=TESTLIB_DIR/testlib.h``. Both run on every (answer, output) pair
below, outputs made to hit every outcome (AC, WA, PE, FAIL, points) across the checkers; the built-in ``tokens``
and ``float:1e-6`` checkers are compared with wcmp and rcmp6 where those do not FAIL. The direct run's exit
status is read with testlib's own table (0 ok, 1 wrong answer, 2 presentation error, 3 FAIL, 7 points with the value
on its ``points`` line); the judge's result is (verdict, score). A pair agrees when both say the same. Exit status 1
when any pair disagrees.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandboxes.judge.checkers import make_checker  # noqa: E402
from sandboxes.results import Verdict  # noqa: E402

# (answer, output) pairs: numbers, sequences, doubles, words, YES/NO, lines, "Case #i:" answers, broken answers.
CASES = [
    ("3\n", "3\n"),
    ("3\n", "4\n"),
    ("3\n", "x\n"),
    ("3\n", ""),
    ("3\n", "3 3\n"),
    ("3\n", "  3\n\n"),
    ("3\n", "3\x0c\n"),
    ("3\n", "3.0000001\n"),
    ("-7\n", "-7"),
    ("123456789012345678901234567890\n", "123456789012345678901234567890\n"),
    ("123456789012345678901234567890\n", "123456789012345678901234567891\n"),
    ("3\n", "03\n"),
    ("1 2 3\n", "1 2 3\n"),
    ("1 2 3\n", "3 2 1\n"),
    ("1 2 3\n", "1 2\n"),
    ("1 2 3\n", "1 2 3 4\n"),
    ("1 2 3\n", "1\t2\r\n3\n"),
    ("1 2 3\n", "1\x0b2 3\n"),
    ("0.333333333\n", "0.3333333\n"),
    ("0.333333333\n", "0.334\n"),
    ("0.333333333\n", "0.33333333333333\n"),
    ("1000000\n", "1000000.5\n"),
    ("1e-9\n", "0\n"),
    ("0.5\n", "abc\n"),
    ("0.5 0.25\n", "0.5 0.2500001\n"),
    ("hello world\n", "hello world\n"),
    ("hello world\n", "Hello world\n"),
    ("hello world\n", "hello\n"),
    ("hello world\n", "hello\x0bworld\n"),
    ("hello world\n", "hello  world \n"),
    ("YES\n", "YES\n"),
    ("YES\n", "yes\n"),
    ("YES\n", "NO\n"),
    ("YES\n", "maybe\n"),
    ("NO\n", ""),
    ("YES NO YES\n", "yes no yes\n"),
    ("YES NO YES\n", "YES YES YES\n"),
    ("a b\nc\n", "a b\nc\n"),
    ("a b\nc\n", "a  b\nc\n"),
    ("a b\nc\n", "a b\n\nc\n"),
    ("a b\nc\n", "a b c\n"),
    ("Case #1: 5\nCase #2: 7\n", "Case #1: 5\nCase #2: 7\n"),
    ("Case #1: 5\nCase #2: 7\n", "Case #1: 5\nCase #2: 8\n"),
    ("Case #1: 5\nCase #2: 7\n", "Case #1: 5\n"),
    ("Case #1: 5\nCase #2: 7\n", "Case 1: 5\nCase 2: 7\n"),
    ("Case #1: a b\nCase #2: c\n", "Case #1: a b\nCase #2: c\n"),
    ("Case #1: a b\nCase #2: c\n", "Case #1: a c\nCase #2: c\n"),
    ("10\n", "7.5\n"),
    ("10\n", "10\n"),
    ("2.5\n", "1.25\n"),
    ("not_a_number\n", "3\n"),
    ("\n", "3\n"),
    ("maybe\n", "YES\n"),
    ("1.5e999\n", "1\n"),
]


def direct_label(returncode: int, stderr: str) -> str:
    """testlib's exit-code table (testlib.h resultExitCode, default build), written out independently of the judge."""
    if returncode == 7:
        for line in reversed(stderr.strip().splitlines()):
            words = line.split()
            if words[:1] == ["points"] and len(words) > 1:
                if words[1].startswith("points_info="):
                    return "AC"
                return f"POINTS {float(words[1]):.9g}"
        return "POINTS ?"
    return {0: "AC", 1: "WA", 2: "PE", 3: "FAIL"}.get(returncode, f"exit {returncode}")


def judge_label(outcome: tuple) -> str:
    """The judge's (verdict, message[, score]) in the same words."""
    verdict, message, *scored = outcome
    if verdict == Verdict.JE:
        return "FAIL" if "FAIL" in message else f"JE {message[:60]}"
    if scored and scored[0] is not None:
        return f"POINTS {scored[0]:.9g}"
    return verdict.value


def compile_by_hand(source: Path, testlib_dir: Path, out: Path) -> Path:
    """g++ the checker against the checkout's testlib.h, as a jury would by hand (at -O0: an independent build of
    the same source and header, and quicker than the judge's -O2 one)."""
    subprocess.run(
        ["g++", "-std=gnu++17", "-O0", "-I", str(testlib_dir), "-o", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    return out


# The judge's built-in checkers and the testlib checker each mirrors (where the testlib one calls the output
# well-formed, i.e. does not FAIL on the jury's answer).
BUILT_INS = {"wcmp": "tokens", "rcmp6": "float:1e-6"}


def compare(source: Path, testlib_dir: Path, tmp_path: Path) -> tuple[str, collections.Counter, list[dict]]:
    """Both builds of one checker on every case (and the built-in that mirrors it, if any): (name, direct outcome
    counts, disagreements)."""
    binary = compile_by_hand(source, testlib_dir, tmp_path / source.stem)
    checker = make_checker(f"testlib:{source}", testlib_h=testlib_dir / "testlib.h")
    work = tmp_path / f"{source.stem}.files"
    work.mkdir()
    files = {name: work / name for name in ("input", "output", "answer")}
    files["input"].write_bytes(b"1\n")
    labels, disagreements = collections.Counter(), []
    for answer, output in CASES:
        files["answer"].write_text(answer)
        files["output"].write_text(output)
        done = subprocess.run(
            [str(binary), *(str(files[k]) for k in ("input", "output", "answer"))], capture_output=True, timeout=60
        )
        expected = direct_label(done.returncode, done.stderr.decode("utf-8", "replace"))
        got = judge_label(checker.check(b"1\n", output.encode(), answer.encode()))
        labels[expected.split()[0]] += 1
        if expected != got:
            disagreements.append(
                {"checker": source.stem, "answer": answer, "output": output, "direct": expected, "judge": got}
            )
        if source.stem in BUILT_INS and expected != "FAIL":
            built_in = judge_label(make_checker(BUILT_INS[source.stem]).check(b"", output.encode(), answer.encode()))
            labels["built-in compared"] += 1
            if built_in != expected:
                disagreements.append(
                    {
                        "checker": BUILT_INS[source.stem],
                        "answer": answer,
                        "output": output,
                        "direct": expected,
                        "judge": built_in,
                    }
                )
    return source.stem, labels, disagreements


def main() -> int:
    """Compare every checker on every pair; print the summary (or JSON) and the disagreements; 1 when any."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("testlib_dir", type=Path, help="a testlib checkout (testlib.h, checkers/)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--jobs", type=int, default=2, help="checkers compiled and compared at once (default 2)")
    parser.add_argument("--checkers", help="comma-separated checker names (default: every checkers/*.cpp)")
    args = parser.parse_args()
    header = args.testlib_dir / "testlib.h"
    sources = sorted((args.testlib_dir / "checkers").glob("*.cpp"))
    if args.checkers:
        sources = [s for s in sources if s.stem in args.checkers.split(",")]
    if not header.is_file() or not sources:
        parser.error(f"{args.testlib_dir} has no testlib.h or no checkers/*.cpp")
    per_checker, labels, disagreements = {}, collections.Counter(), []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("AGENTGSPO_CACHE", str(Path(tmp) / "cache"))
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for name, counts, wrong in pool.map(lambda source: compare(source, args.testlib_dir, Path(tmp)), sources):
                per_checker[name] = f"{len(CASES) - sum(w['checker'] == name for w in wrong)}/{len(CASES)}"
                labels.update(counts)
                disagreements += wrong
    runs = len(sources) * len(CASES)
    summary = {
        "checkers": len(sources),
        "outputs": runs,
        "agree": runs - sum(d["checker"] not in BUILT_INS.values() for d in disagreements),
        "direct_outcomes": dict(labels),
        "per_checker": per_checker,
        "disagreements": disagreements,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(
            f"{summary['checkers']} checkers, {runs} outputs: {summary['agree']} agree "
            f"({dict(labels)}) in {summary['seconds']} s"
        )
        for item in disagreements:
            print("DISAGREE", item)
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
