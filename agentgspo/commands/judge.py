"""`agentgspo judge`: judge one solution on a problem package or on a folder of NAME.in / NAME.ans tests.

    agentgspo judge --problem problems/different --solution sol.cpp --json     # Kattis, own or Polygon package
    agentgspo judge --problem nwerc/a --solution sol.cpp --calibrate            # its limit scaled to this machine
    agentgspo judge --tests problems/aplusb/tests --solution sol.cpp --time-limit 1
Exit status: 0 when accepted, 1 for any other verdict, 2 for bad arguments or a package the judge refuses.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from agentgspo.sandboxes import Limits, judge, judge_problem, load_any_problem, read_tests_dir
from agentgspo.sandboxes.judge.formats import FORMATS, format_of
from agentgspo.sandboxes.judge.formats.polygon import polygon_submissions
from agentgspo.sandboxes.judge.languages import LANGUAGES, normalize_language, submission_language
from agentgspo.sandboxes.judge.problems import calibrate_problem

DEFAULT_TIME_LIMIT_S = 2.0
DEFAULT_MEMORY_LIMIT_MB = 256.0
CALIBRATED_FORMATS = ("kattis", "polygon")  # formats whose packages ship accepted and too-slow submissions


def _language(value: str) -> str:
    """``--lang``: a language the judge runs (its name), else argparse's error listing them."""
    try:
        return normalize_language(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `agentgspo judge`."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--problem",
        type=Path,
        help="problem folder in any registered format: the project's (problem.json), an "
        "ICPC/Kattis package (problem.yaml) or a Polygon package (problem.xml); its limits and "
        "checker are used",
    )
    where.add_argument("--tests", type=Path, help="folder of NAME.in / NAME.ans pairs")
    parser.add_argument("--solution", required=True, type=Path, help="source file (Python 3 .py or C++ .cpp/.cc)")
    parser.add_argument(
        "--lang",
        type=_language,
        help=f"language: {', '.join(LANGUAGES)} or an alias (py, pypy, c++...); default: from the file suffix",
    )
    parser.add_argument(
        "--checker",
        default=None,
        help="with --tests: tokens (default) | float:EPS | icpc:FLAGS | testlib:PATH | openr1:PATH | kattis:PATH",
    )
    parser.add_argument("--interactor", type=Path, help="with --tests: interactor, run as `interactor INPUT LOG`")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help=f"CPU seconds per test (default: the package's, or {DEFAULT_TIME_LIMIT_S:g} with --tests)",
    )
    parser.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        help=f"MB per test (default: the package's, or {DEFAULT_MEMORY_LIMIT_MB:g} with --tests)",
    )
    parser.add_argument(
        "--output-limit",
        type=float,
        default=None,
        help="MB of output per test; more is OLE (default: the package's, else 64)",
    )
    parser.add_argument(
        "--testlib-h",
        type=Path,
        default=None,
        help="testlib.h to compile C++ testlib checkers/interactors against (default: the one beside "
        "the source, or $AGENTGSPO_TESTLIB_H)",
    )
    parser.add_argument(
        "--backend",
        choices=["local", "docker", "remote"],
        default="local",
        help="sandbox backend (default local = bubblewrap; remote: $AGENTGSPO_SANDBOX_URLS)",
    )
    parser.add_argument("--stop-on-failure", action="store_true", help="with --tests: stop at the first failing test")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="with a Kattis/DOMjudge or Polygon --problem: scale its fixed time limit to this machine from its own "
        "accepted and too-slow submissions (measured once per package and machine, cached; refused when the "
        "scaled limit would let a too-slow submission pass); the factor is in the verdict",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _show_judge_progress() -> None:
    """Print the judge's progress lines (timing submissions, calibrating) on stderr, once per process."""
    judge_logger = logging.getLogger("agentgspo.sandboxes.judge")
    if not judge_logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("agentgspo judge: %(message)s"))
        judge_logger.addHandler(handler)
        judge_logger.setLevel(logging.INFO)


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")


def _tests_folder_error(folder: Path) -> str | None:
    """A hint when --tests was given a problem folder instead of its tests."""
    if (folder / "tests").is_dir() and any((folder / "tests").glob("*.in")):
        return (
            f"{folder} is a problem folder: pass its tests as --tests {folder / 'tests'}, or the whole "
            f"problem as --problem {folder}"
        )
    if format_of(folder) is not None:
        return f"{folder} is a problem package: pass it as --problem {folder}"
    return None


def _judge_tests(args: argparse.Namespace, source: str, lang: str):
    if args.calibrate:
        raise ValueError("--calibrate goes with --problem: it times the package's own submissions")
    if args.tests.is_dir() and not any(args.tests.glob("*.in")) and (hint := _tests_folder_error(args.tests)):
        raise ValueError(hint)
    tests = read_tests_dir(args.tests, require_answers=args.interactor is None)
    if args.interactor is not None and not args.interactor.exists():
        raise ValueError(f"interactor {str(args.interactor)!r} does not exist")
    extra = {"output_limit_mb": args.output_limit} if args.output_limit is not None else {}
    limits = Limits(
        time_limit_s=args.time_limit or DEFAULT_TIME_LIMIT_S,
        memory_limit_mb=args.memory_limit or DEFAULT_MEMORY_LIMIT_MB,
        **extra,
    )
    header = {"testlib_h": args.testlib_h} if args.testlib_h is not None else {}
    result = judge(
        source,
        tests,
        lang=lang,
        checker=args.checker or "tokens",
        interactor=args.interactor,
        limits=limits,
        stop_on_failure=args.stop_on_failure,
        backend=args.backend,
        **header,
    )
    result.time_limit_s = limits.time_limit_s
    result.time_limit_source = "given" if args.time_limit else "default"
    return result


def _judge_package(args: argparse.Namespace, source: str, lang: str):
    """Judge on a problem folder in any registered format (``agentgspo.sandboxes.judge.formats``)."""
    if args.checker is not None or args.interactor is not None:
        raise ValueError("--checker and --interactor go with --tests; a --problem package names its own")
    header = {"testlib_h": args.testlib_h} if args.testlib_h is not None else {}
    found = format_of(args.problem) if args.problem.is_dir() else None
    if header and (found is None or "testlib_h" not in found.options):
        takers = " or ".join(f"a {f.description} ({f.marker})" for f in FORMATS.values() if "testlib_h" in f.options)
        raise ValueError(f"--testlib-h goes with --tests or {takers}")
    if args.calibrate and (found is None or found.name not in CALIBRATED_FORMATS):
        raise ValueError(
            "--calibrate goes with a Kattis/DOMjudge (problem.yaml) or Polygon (problem.xml) package, whose "
            "submissions it times"
        )
    if args.calibrate and args.time_limit is not None:
        raise ValueError("--calibrate scales the package's own time limit and --time-limit replaces it: pass one")
    if found is not None and found.judge_folder is not None:  # judged whole (Kattis: groups and grading)
        return found.judge_folder(
            args.problem,
            source,
            lang,
            backend=args.backend,
            time_limit_s=args.time_limit,
            memory_limit_mb=args.memory_limit,
            output_limit_mb=args.output_limit,
            **({"calibrate": True} if args.calibrate else {}),
        )
    problem = load_any_problem(args.problem, **header)
    time_limit, scale = args.time_limit, 1.0
    source_of_limit = "given" if time_limit is not None else problem.metadata.get("time_limit_source", found.marker)
    if args.calibrate:  # a Polygon package (a Kattis one is judged whole above)
        calibration = calibrate_problem(args.problem, problem, *polygon_submissions(args.problem), args.backend)
        time_limit, scale = calibration.time_limit_s, calibration.scale
    overrides = {
        key: value
        for key, value in (
            ("time_limit_s", time_limit),
            ("memory_limit_mb", args.memory_limit),
            ("output_limit_mb", args.output_limit),
        )
        if value is not None
    }
    limits = problem.limits(**overrides)
    result = judge_problem(
        problem, source, lang, backend=args.backend, stop_on_failure=args.stop_on_failure, limits=limits
    )
    result.time_limit_s, result.time_limit_source, result.time_limit_scale = limits.time_limit_s, source_of_limit, scale
    return result


def run(args: argparse.Namespace) -> int:
    """Judge and print the result; 0 on AC."""
    _show_judge_progress()
    try:
        for name, value in (
            ("--time-limit", args.time_limit),
            ("--memory-limit", args.memory_limit),
            ("--output-limit", args.output_limit),
        ):
            _positive(name, value)
        source = args.solution.read_text()
        lang = args.lang or submission_language(args.solution, source.encode()[:200])
        result = _judge_package(args, source, lang) if args.problem is not None else _judge_tests(args, source, lang)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"agentgspo judge: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        for test in result.tests:
            print(
                f"{test.name:>12}  {test.verdict.value:<4} {test.time_s:7.3f} s {test.memory_mb:8.1f} MB  "
                f"{test.message[:80]}"
            )
        if result.compile_output:
            print(result.compile_output.rstrip())
        for group in result.groups:
            score = "" if group.get("score") is None else f" score {group['score']:g}"
            print(f"group {group['name']}: {group['verdict']}{score}")
        if result.time_limit_s is not None:
            scaled = (
                f", x {result.time_limit_scale:g} calibrated for this machine" if result.time_limit_scale != 1 else ""
            )
            print(f"time limit: {result.time_limit_s:g} s ({result.time_limit_source}{scaled})")
        print(
            f"verdict: {result.verdict.value} ({result.passed}/{len(result.tests)} tests passed)"
            + (f": {result.message}" if result.message else "")
        )
    return 0 if result.accepted else 1
