"""`agentgspo judge`: judge one solution on a folder of NAME.in / NAME.ans tests.

    agentgspo judge --tests problems/aplusb/tests --solution sol.cpp --time-limit 1 --json
Exit status: 0 when accepted, 1 for any other verdict, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `agentgspo judge`."""
    parser.add_argument("--tests", required=True, type=Path, help="folder of NAME.in / NAME.ans pairs")
    parser.add_argument("--solution", required=True, type=Path, help="source file (.py or .cpp)")
    parser.add_argument("--lang", choices=["py", "cpp"], help="language (default: from the file suffix)")
    parser.add_argument("--checker", default="tokens",
                        help="tokens (default) | float:EPS | icpc:FLAGS | testlib:PATH | openr1:PATH | kattis:PATH")
    parser.add_argument("--interactor", type=Path, help="interactor program, run as `interactor INPUT LOG`")
    parser.add_argument("--time-limit", type=float, default=2.0, help="CPU seconds per test (default 2)")
    parser.add_argument("--memory-limit", type=float, default=256.0, help="MB per test (default 256)")
    parser.add_argument("--backend", choices=["local", "docker", "remote"], default="local",
                        help="sandbox backend (default local = bubblewrap)")
    parser.add_argument("--stop-on-failure", action="store_true", help="stop at the first failing test")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def run(args: argparse.Namespace) -> int:
    """Judge and print the result; 0 on AC."""
    from agentgspo.sandboxes import Limits, judge, language_of, read_tests_dir

    try:
        tests = read_tests_dir(args.tests, require_answers=args.interactor is None)
        lang = args.lang or language_of(args.solution)
        source = args.solution.read_text()
        if args.interactor is not None and not args.interactor.exists():
            raise ValueError(f"interactor {str(args.interactor)!r} does not exist")
        limits = Limits(time_limit_s=args.time_limit, memory_limit_mb=args.memory_limit)
        result = judge(source, tests, lang=lang, checker=args.checker, interactor=args.interactor, limits=limits,
                       stop_on_failure=args.stop_on_failure, backend=args.backend)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"agentgspo judge: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        for test in result.tests:
            print(f"{test.name:>12}  {test.verdict.value:<4} {test.time_s:7.3f} s {test.memory_mb:8.1f} MB  "
                  f"{test.message[:80]}")
        if result.compile_output:
            print(result.compile_output.rstrip())
        print(f"verdict: {result.verdict.value} ({result.passed}/{len(result.tests)} tests passed)"
              + (f": {result.message}" if result.message else ""))
    return 0 if result.accepted else 1
