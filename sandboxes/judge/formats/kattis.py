"""Kattis / ICPC packages judged the way Kattis problemtools judges them (its ``judge/`` code and
``support/default_grader`` are the reference, reimplemented here); the package itself: ``kattis_package.py``,
the grading of groups: ``kattis_grading.py``.

  - Output: the default validator (``icpc:FLAGS``, checkers.py) with ``validator_flags`` plus each group's
    ``output_validator_flags``, or the package's validator run as ``validator IN ANS FEEDBACK_DIR/ FLAGS < OUTPUT``
    (exit 42 accepted, 43 wrong, anything else a judge error; ``judgemessage.txt`` is the message; ``score.txt``
    is the test's score where the problem allows custom scores, a judge error where it does not or on a 43).
  - Interactive problems: the validator talks to the submission (its stdin is the submission's stdout and the
    reverse), through ``kattis_interactor.py``; verdict precedence as in ``judge.core``.
  - Multi-pass problems (``type: multi-pass``, legacy ``validation: custom multi-pass``): a test whose validator
    accepts and writes ``nextpass.in`` runs again with that file as its input (its feedback folder kept), up to
    ``limits.validation_passes`` (default 2) runs; a rejection ends it, a ``nextpass.in`` beside a rejection or
    after the last pass is a judge error (problemtools' ``_run_multipass``). Each pass compiles the source again.
  - All tests of a submission run in one sandbox; when every group breaks on a rejection, the first failing test
    ends the run (problemtools cancels the rest too), else all run and grading skips what a break leaves.
  - Limits: memory ``limits.memory`` (MiB, default 1024), output ``limits.output`` (MiB, default 8), validator
    time ``limits.validation_time`` (default 60 s). Time limit: ``limits.time_limit`` (2023-07), ``.timelimit`` or
    ``domjudge-problem.ini`` (in that order, ``../time_limits.py``; ``calibrate=True`` scales it to this machine,
    ``../calibration.py``); otherwise problemtools' rule: the slowest accepted submission's CPU time times
    ``ac_to_time_limit`` (legacy ``time_multiplier``, default 5; 2023-07 ``time_multipliers.ac_to_time_limit``,
    default 2), rounded up to ``time_resolution`` (default 1 s) and at least that. Only the Python and C++ accepted
    submissions are run for it, up to the usable CPUs at once (cached per package content and machine).

Verdict names: the judge's own (AC WA TLE MLE OLE RE JE, ILE for an idle interactive solution); Kattis calls RE
"RTE". problemtools itself reports a solution killed at the memory limit as RTE (its ``run_time_error``
folder holds such submissions), where this judge says MLE.

Registered as the format ``kattis`` (marker ``problem.yaml``, see ``registry.py``): its ``submissions/accepted`` are
an env's references, ``wrong_answer``, ``time_limit_exceeded`` and ``run_time_error`` its wrong solutions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import logging
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

from ...registry import get_sandbox
from ...results import JudgeResult, Limits, TestResult, Verdict
from ...submission import TestCase
from ..checkers import IcpcDefaultChecker
from ..core import judge
from .kattis_grading import FROM_KATTIS, grade, grade_group
from .kattis_package import KattisGroup, KattisPackage, KattisTest, OutputValidator, cache_root, load_kattis_package
from ..languages import kattis_language, submission_language
from ..calibration import (
    Calibration,
    calibrate,
    content_digest,
    folder_submissions,
    machine_fingerprint,
    machine_slowdown,
)
from ..testdata import Problem
from ..time_limits import time_submissions
from .registry import ProblemFormat, ProblemPackage, solution_files

logger = logging.getLogger(__name__)

EXIT_AC, EXIT_WA = 42, 43
INTERACTOR_ADAPTER = Path(__file__).with_name("kattis_interactor.py")
KATTIS_WRONG_DIRS = ("wrong_answer", "time_limit_exceeded", "run_time_error")  # submissions an env may show
TIME_LIMIT_PROBE_S = 60.0  # CPU limit while timing the accepted submissions (problemtools allows up to 300 s)


# --- checking one test's output ---------------------------------------------------------------------------------
def _feedback(feedback_dir: Path) -> str:
    try:
        return (feedback_dir / "judgemessage.txt").read_text(errors="replace").strip()[:500]
    except OSError:
        return ""


def _validator_score(package: KattisPackage, feedback_dir: Path, verdict: Verdict) -> tuple[Verdict, str, float | None]:
    """Apply problemtools' score.txt rules to a validator's verdict (AC/WA); returns (verdict, message, score)."""
    message = _feedback(feedback_dir)
    score_file = feedback_dir / "score.txt"
    if verdict == Verdict.WA:
        if score_file.is_file():
            return Verdict.JE, "output validator wrote score.txt with a wrong-answer verdict", None
        return verdict, message, None
    if score_file.is_file() and not package.custom_score_allowed:
        return Verdict.JE, "output validator wrote score.txt but the problem has no custom scores", None
    if score_file.is_file():
        try:
            return verdict, message, float(score_file.read_text())
        except ValueError as exc:
            return Verdict.JE, f"output validator wrote an unreadable score.txt: {exc}", None
    if (feedback_dir / "nextpass.in").is_file():
        return verdict, message, None  # multi-pass: the verdict (and score) comes from a later pass
    if package.custom_score_mandatory:
        return Verdict.JE, "the problem has custom scores but the output validator wrote no score.txt", None
    return verdict, message, None


class KattisOutputChecker:
    """Checks a test's output with the package's validator (or the default one) and its group's flags."""

    def __init__(
        self, package: KattisPackage, flags_by_test: dict[str, list[str]], feedback_dirs: dict[str, Path] | None = None
    ) -> None:
        self.package, self.flags_by_test, self.feedback_dirs = package, flags_by_test, feedback_dirs or {}
        self._default: dict[str, IcpcDefaultChecker] = {}

    def check(self, input_data: bytes, output: bytes, answer: bytes):
        """Check with the problem-wide flags only (the judge calls ``check_case``, which knows the test's group)."""
        return self._check(input_data, output, answer, self.package.validator_flags, None)

    def check_case(self, case: TestCase, output: bytes):
        """Check ``output`` of test ``case`` with its group's output_validator_flags (and its own feedback folder,
        kept between the passes of a multi-pass problem); (verdict, message, score)."""
        return self._check(
            case.input, output, case.answer, self.flags_by_test.get(case.name, []), self.feedback_dirs.get(case.name)
        )

    def _check(self, input_data: bytes, output: bytes, answer: bytes, flags: list[str], feedback: Path | None):
        if self.package.validator is None:
            key = " ".join(flags)
            if key not in self._default:
                self._default[key] = IcpcDefaultChecker.from_flags(key)
            verdict, message = self._default[key].check(input_data, output, answer)
            return verdict, message, None
        with tempfile.TemporaryDirectory(prefix="agentgspo-kattis-") as tmp:
            tmp_path = Path(tmp)
            feedback = feedback or tmp_path / "feedback"
            feedback.mkdir(parents=True, exist_ok=True)
            (tmp_path / "in").write_bytes(input_data)
            (tmp_path / "ans").write_bytes(answer)
            (tmp_path / "out").write_bytes(output)
            argv = self.package.validator.argv + [
                str(tmp_path / "in"),
                str(tmp_path / "ans"),
                str(feedback) + os.sep,
                *flags,
            ]
            try:
                with open(tmp_path / "out", "rb") as stdin:
                    done = subprocess.run(
                        argv, stdin=stdin, capture_output=True, cwd=tmp, timeout=self.package.validation_time_s
                    )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return Verdict.JE, f"output validator failed to run: {exc}", None
            if done.returncode in (EXIT_AC, EXIT_WA):
                return _validator_score(
                    self.package, feedback, Verdict.AC if done.returncode == EXIT_AC else Verdict.WA
                )
            detail = (_feedback(feedback) or done.stderr.decode("utf-8", "replace").strip())[-500:]
            return (
                Verdict.JE,
                (
                    f"output validator exited with {done.returncode} (judge failure, not the "
                    f"solution's; expected 42 or 43): {detail}"
                ),
                None,
            )


# --- judging ---------------------------------------------------------------------------------------------------
def _flags_by_test(package: KattisPackage) -> dict[str, list[str]]:
    flags: dict[str, list[str]] = {}
    for group in package.root.groups():
        for item in group.items:
            if isinstance(item, KattisTest):
                flags[item.name] = (
                    package.validator_flags + str(group.config.get("output_validator_flags") or "").split()
                )
    return flags


def _stops_at_first_failure(package: KattisPackage) -> bool:
    """Every group breaks on a rejection: the first failing test (in order) ends the judging, as in problemtools."""
    return all(group.config["on_reject"] == "break" for group in package.root.groups())


def _interactive_cases(
    package: KattisPackage,
    tests: list[KattisTest],
    inputs: dict[str, Path],
    flags: dict,
    feedback_dirs: dict[str, Path],
) -> list[TestCase]:
    cases = []
    for test in tests:
        manifest = {
            "argv": package.validator.argv,
            "input": str(inputs[test.name].resolve()),
            "answer": str(test.answer_path.resolve()),
            "feedback_dir": str(feedback_dirs[test.name]),
            "flags": flags.get(test.name, []),
        }
        cases.append(TestCase(json.dumps(manifest).encode(), b"", test.name))
    return cases


def _run_pass(
    package: KattisPackage,
    source: str,
    lang: str,
    tests: list[KattisTest],
    inputs: dict[str, Path],
    feedback_dirs: dict[str, Path],
    limits: Limits,
    sandbox,
    workers: int | None,
) -> JudgeResult:
    """One run of the submission on ``tests``, each on its current input: batch outputs checked by the validator,
    or interaction with it; every test keeps its own feedback folder."""
    flags = _flags_by_test(package)
    stop = _stops_at_first_failure(package)
    if not package.interactive:
        cases = [TestCase(inputs[t.name].read_bytes(), t.answer_path.read_bytes(), t.name) for t in tests]
        return judge(
            source,
            cases,
            lang=lang,
            checker=KattisOutputChecker(package, flags, feedback_dirs),
            limits=limits,
            stop_on_failure=stop,
            backend=sandbox,
            workers=workers,
        )
    cases = _interactive_cases(package, tests, inputs, flags, feedback_dirs)
    result = judge(
        source,
        cases,
        lang=lang,
        interactor=INTERACTOR_ADAPTER,
        limits=limits,
        stop_on_failure=stop,
        backend=sandbox,
        workers=workers,
    )
    for test_result in result.tests:
        if test_result.verdict in (Verdict.AC, Verdict.WA):  # the validator's score.txt rules, as in batch
            verdict, message, score = _validator_score(package, feedback_dirs[test_result.name], test_result.verdict)
            test_result.verdict, test_result.score = verdict, score
            test_result.message = message or test_result.message
    return result


def _judge_passes(
    package: KattisPackage, source: str, lang: str, limits: Limits, sandbox, workers: int | None, tmp: Path
) -> JudgeResult:
    """Run every test, and again on the validator's ``nextpass.in`` in a multi-pass problem (up to
    ``validation_passes`` runs), as problemtools' ``_run_multipass``: a rejection, or no further pass, ends a test;
    a nextpass.in beside a rejection, or a pass beyond the last, is a judge error. Returns the last result of
    every test (its CPU time the slowest pass's) and the first pass's compilation."""
    tests = package.tests()
    inputs = {t.name: t.input_path for t in tests}
    feedback_dirs = {t.name: tmp / f"feedback{i}" for i, t in enumerate(tests)}
    final: dict[str, TestResult] = {}
    pending, first = tests, None
    for number in range(1, package.validation_passes + 1):
        result = _run_pass(package, source, lang, pending, inputs, feedback_dirs, limits, sandbox, workers)
        first = first or result
        if result.verdict == Verdict.CE or (result.verdict == Verdict.JE and not result.tests):
            return result
        still = []
        by_name = {r.name: r for r in result.tests}
        for test in pending:
            if test.name not in by_name:  # the run broke off: the rest stay unjudged (SKIPPED, then JE in grading)
                continue
            test_result = by_name[test.name]
            slowest = max(test_result.time_s, final[test.name].time_s) if test.name in final else test_result.time_s
            test_result.time_s = slowest
            nextpass = feedback_dirs[test.name] / "nextpass.in"
            final[test.name] = test_result
            if not package.multi_pass or test_result.verdict == Verdict.SKIPPED:
                continue
            if test_result.verdict != Verdict.AC and nextpass.is_file():
                final[test.name] = TestResult(
                    test.name,
                    Verdict.JE,
                    time_s=slowest,
                    message=(
                        f"pass {number}: the output validator wrote nextpass.in with a {test_result.verdict.value}"
                    ),
                )
            elif test_result.verdict == Verdict.AC and nextpass.is_file():
                if number == package.validation_passes:
                    final[test.name] = TestResult(
                        test.name,
                        Verdict.JE,
                        time_s=slowest,
                        message=(f"the output validator gave no verdict within validation_passes = {number} passes"),
                    )
                    continue
                inputs[test.name] = feedback_dirs[test.name].with_name(
                    f"{feedback_dirs[test.name].name}-pass{number + 1}.in"
                )
                nextpass.rename(inputs[test.name])
                still.append(test)
        if not still:
            break
        pending = still
    return JudgeResult(
        first.verdict,
        [final[t.name] for t in tests if t.name in final],
        compile_output=first.compile_output,
        compile_time_s=first.compile_time_s,
        message=first.message,
        compile_cache=first.compile_cache,
    )


def _package_archive(package: KattisPackage, with_accepted: bool, with_too_slow: bool = False) -> bytes:
    """The package as a gzipped tar of what judging needs (problem.yaml, .timelimit, domjudge-problem.ini, data/,
    the validator; the accepted and too-slow submissions when the server computes or calibrates the limit)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        names = ["problem.yaml", ".timelimit", "domjudge-problem.ini", "data", "output_validator", "output_validators"]
        if with_accepted:
            names.append("submissions/accepted")
        if with_too_slow:
            names.append("submissions/time_limit_exceeded")
        for name in names:
            if (package.directory / name).exists():
                tar.add(package.directory / name, arcname=name)
    return buffer.getvalue()


def _package_digest(package: KattisPackage) -> str:
    """SHA-256 of the files a computed time limit depends on: problem.yaml, data/, the validator, the accepted
    submissions (names and contents, in a fixed order)."""
    digest = hashlib.sha256()
    for name in ("problem.yaml", "data", "output_validator", "output_validators", "submissions/accepted"):
        path = package.directory / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
        for file in files:
            digest.update(str(file.relative_to(package.directory)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def time_limit_of(package: KattisPackage, backend="local") -> tuple[float, str]:
    """The package's time limit in seconds and where it comes from (see the module docstring for the rule).

    When problem.yaml, .timelimit or domjudge-problem.ini fixes none (``time_limits.py``: the order), the accepted
    Python/C++ submissions are judged (each with a generous CPU limit, up to the usable CPUs at once) and their
    slowest CPU time sets it; the result is cached per package content and machine (``machine_fingerprint``).
    ValueError when there is no fixed limit and no accepted submission to time, or one of them is not accepted.
    """
    if package.fixed_time_limit_s is not None:
        return package.fixed_time_limit_s, package.time_limit_source
    accepted = (
        sorted(p for p in (package.directory / "submissions" / "accepted").glob("*") if p.is_file())
        if (package.directory / "submissions" / "accepted").is_dir()
        else []
    )
    runnable = []
    for path in accepted:
        try:
            runnable.append((path, submission_language(path)))
        except ValueError:
            continue
    if not runnable:
        raise ValueError(
            f"{package.directory}: no time limit (limits.time_limit in problem.yaml, .timelimit or "
            "domjudge-problem.ini's timelimit) and "
            "no Python or C++ submission in submissions/accepted to compute it from: add one of them, "
            "or pass a time limit (--time-limit / time_limit_s=)"
        )
    # The languages the submissions are timed in are part of the key: a limit timed under CPython (before Kattis's
    # mapping ran Python 3 under PyPy) must not be reused for PyPy runs.
    judged_in = "-".join(sorted({kattis_language(lang) for _, lang in runnable}))
    digest = _package_digest(package)
    # and the machine (with the backend kind): a limit computed on one machine is no limit on another
    machine = hashlib.sha256(machine_fingerprint(backend).encode()).hexdigest()[:16]
    cache = cache_root() / "kattis-timelimits" / f"{digest}-{judged_in}-{machine}.json"
    if cache.is_file():
        saved = json.loads(cache.read_text())
        return saved["time_limit_s"], saved["source"]
    slowest, slowest_name = 0.0, ""
    timed = time_submissions(  # up to the usable CPUs at once, CPU times (see time_limits.py)
        runnable,
        lambda job: judge_kattis(package, job[0].read_text(), job[1], backend=backend, time_limit_s=TIME_LIMIT_PROBE_S),
        what=f"accepted submissions of {package.directory} to compute its time limit",
        names=[f"accepted/{path.name}" for path, _ in runnable],
    )
    for (path, lang), result in zip(runnable, timed):
        if result.verdict != Verdict.AC:
            raise ValueError(
                f"{path}: this accepted submission got {result.verdict.value} ({result.message[:200]}), "
                "so the time limit cannot be computed from it; fix the package or pass a time limit"
            )
        runtime = max((t.time_s for t in result.tests if t.verdict != Verdict.SKIPPED), default=0.0)
        if runtime >= slowest:
            slowest, slowest_name = runtime, path.name
    resolution = package.time_resolution_s
    time_limit = max(1, math.ceil(slowest * package.ac_to_time_limit / resolution)) * resolution
    source = (
        f"computed: slowest accepted submission {slowest_name} ({slowest:.3f} s CPU) x ac_to_time_limit "
        f"{package.ac_to_time_limit:g}, rounded up to {resolution:g} s"
    )
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"time_limit_s": time_limit, "source": source}))
    os.replace(tmp, cache)
    return time_limit, source


def judge_kattis(
    package: "KattisPackage | str | os.PathLike",
    source: str,
    lang: str = "py",
    *,
    backend="local",
    time_limit_s: float | None = None,
    memory_limit_mb: float | None = None,
    output_limit_mb: float | None = None,
    workers: int | None = None,
    calibrate: bool = False,
) -> JudgeResult:
    """Judge ``source`` on a Kattis package as problemtools does (see the module docstring).

    Returns a JudgeResult whose ``tests`` are in judging order (tests a ``break`` left unjudged are SKIPPED),
    ``groups`` the per-group verdicts and scores (the root ``data`` last), ``score`` the root score for scoring
    problems, ``time_limit_s`` / ``time_limit_source`` / ``time_limit_scale`` the limit used. The limits default
    to the package's (``time_limit_of`` for the time); ``calibrate=True`` scales a fixed one to this machine
    (``judge/calibration.py``; cached; CalibrationError when the package's submissions refuse it). Never raises
    for a bad submission; ValueError for a bad package or arguments.
    """
    lang = kattis_language(lang)  # as Kattis runs it (problemtools' languages.yaml): Python 3 under PyPy
    if not isinstance(package, KattisPackage):
        package = load_kattis_package(package)
    sandbox = get_sandbox(backend)
    source_of_limit, scale, calibration = "given", 1.0, None
    if calibrate and time_limit_s is not None:
        raise ValueError("calibrate scales the package's own time limit; time_limit_s replaces it: pass one")
    if hasattr(sandbox, "judge_package_remote"):  # the server judges the package with this same code
        # and calibrates it to its own machine, as it computes a limit: on a fleet each server for itself
        calibrated = calibrate and package.fixed_time_limit_s is not None
        with_accepted = calibrated or (time_limit_s is None and package.fixed_time_limit_s is None)
        return sandbox.judge_package_remote(
            _package_archive(package, with_accepted, with_too_slow=calibrated),
            source,
            lang=lang,
            time_limit_s=time_limit_s,
            memory_limit_mb=memory_limit_mb,
            output_limit_mb=output_limit_mb,
            calibrate=calibrated,
        )
    if calibrate:
        calibration = calibrate_kattis(package, backend)  # None: a computed limit, this machine's already
        if calibration is not None:
            time_limit_s, source_of_limit, scale = (
                calibration.time_limit_s,
                package.time_limit_source,
                calibration.scale,
            )
    if time_limit_s is None:
        time_limit_s, source_of_limit = time_limit_of(package, backend)
    stamp = {"time_limit_s": time_limit_s, "time_limit_source": source_of_limit, "time_limit_scale": scale}
    limits = Limits(
        time_limit_s=time_limit_s,
        memory_limit_mb=memory_limit_mb or package.memory_limit_mb,
        output_limit_mb=output_limit_mb or package.output_limit_mb,
    )
    tests = package.tests()
    with tempfile.TemporaryDirectory(prefix="agentgspo-kattis-") as tmp:
        result = _judge_passes(package, source, lang, limits, sandbox, workers, Path(tmp))
    if result.verdict == Verdict.CE or (result.verdict == Verdict.JE and not result.tests):
        return dataclasses.replace(result, **stamp)
    by_name = {t.name: t for t in result.tests}
    missing = [t.name for t in tests if t.name not in by_name]
    for name in missing:  # the judge stopped early (a JE, or stop_on_failure): unjudged tests are skipped
        by_name[name] = TestResult(name, Verdict.SKIPPED)
    counted: set = set()
    report: list[dict] = []
    graded = grade_group(package.root, by_name, package.scoring, counted, report)
    ordered = []
    for test in tests:
        test_result = by_name[test.name]
        if test.name not in counted and test_result.verdict != Verdict.SKIPPED:
            test_result = TestResult(
                test.name,
                Verdict.SKIPPED,
                message=f"not counted: an earlier rejection ended its group "
                f"(on_reject: break); it had {test_result.verdict.value}",
            )
        ordered.append(test_result)
    verdict = FROM_KATTIS.get(graded.verdict, Verdict.JE) if graded else Verdict.JE
    message = result.message
    if package.scoring and graded is not None and graded.score is not None:
        message = (
            message + "; " if message else ""
        ) + f"score {graded.score:g} (best possible {package.max_score():g})"
    return JudgeResult(
        verdict,
        ordered,
        compile_output=result.compile_output,
        compile_time_s=result.compile_time_s,
        compile_cache=result.compile_cache,
        message=message,
        score=graded.score if graded else None,
        groups=report,
        **stamp,
    )


def load_kattis_problem(directory: str | os.PathLike, *, time_limit_s: float | None = None, backend="local") -> Problem:
    """A Kattis package as a ``Problem`` (the public loader; ``judge_problem`` judges it with ``judge_kattis``).

    name: problem.yaml's name (English when there are several) or the statement's ``\\problemname``; statement:
    the text of ``problem.en.md`` / ``problem.md`` / ``problem.en.tex`` (``metadata["statement_path"]`` says
    which; "" when there is none); samples: ``data/sample`` tests (an interactive problem's ``.interaction``
    transcripts are in ``metadata["sample_interactions"]``); tests: every test in judging order; time limit:
    ``time_limit_s`` or ``time_limit_of`` (which may run the accepted submissions on ``backend`` once and cache
    it); checker: ``icpc:FLAGS`` (default validator) or ``kattis:VALIDATOR``. ``metadata["package"]`` is the
    KattisPackage; ``metadata["time_limit_source"]`` says where the time limit came from.
    """
    package = load_kattis_package(directory)
    source = "given"
    if time_limit_s is None:
        time_limit_s, source = time_limit_of(package, backend)
    tests = [TestCase(t.input_path.read_bytes(), t.answer_path.read_bytes(), t.name) for t in package.tests()]
    if package.validator is None:
        checker = "icpc:" + " ".join(package.validator_flags) if package.validator_flags else "icpc"
    else:
        checker = f"kattis:{package.validator.argv[-1]}"
    metadata = {
        "source": "kattis",
        "config": package.config,
        "package": package,
        "names": package.names,
        "statement_path": package.statement_path,
        "sample_interactions": package.sample_interactions,
        "time_limit_source": source,
        "scoring": package.scoring,
    }
    return Problem(
        package.name,
        tests,
        time_limit_s,
        package.memory_limit_mb,
        checker,
        statement=package.statement,
        samples=package.samples,
        interactive=package.interactive,
        metadata=metadata,
    )


def kattis_package(directory: str | os.PathLike) -> ProblemPackage:
    """A Kattis package with what an env needs: its statement (or a line saying the examples show the format), the
    ``data/sample`` examples, ``submissions/accepted`` as references and the rejected submissions as wrong ones."""
    directory = Path(directory)
    problem = load_kattis_problem(directory)
    references: dict[str, str] = {}
    for lang, path in solution_files(directory / "submissions" / "accepted"):
        references.setdefault(lang, path.read_text())
    wrong = [
        {"name": f"{kind}/{path.name}", "lang": lang, "code": path.read_text()}
        for kind in KATTIS_WRONG_DIRS
        for lang, path in solution_files(directory / "submissions" / kind)
    ]
    examples = [(t.input.decode(), t.answer.decode()) for t in problem.samples]
    body = problem.statement or "(This package has no Markdown statement; the examples show the format.)"
    return ProblemPackage(problem, body, examples, references, wrong, title=problem.name, id=directory.name)


FORMAT = ProblemFormat(
    name="kattis",
    marker="problem.yaml",
    description="ICPC/Kattis package",
    load_problem=load_kattis_problem,
    load_package=kattis_package,
    options=("time_limit_s", "backend"),
    judge_folder=judge_kattis,
)


def calibrate_kattis(package, backend="local", **options) -> Calibration | None:
    """Calibrate a Kattis/DOMjudge package's fixed limit with its ``submissions/accepted`` and
    ``submissions/time_limit_exceeded`` (``options`` go to ``calibration.calibrate``); None when the package fixes
    no limit: problemtools' rule then computes it from the accepted submissions on this machine already."""
    if package.fixed_time_limit_s is None:
        logger.info("%s: no fixed time limit to calibrate: it is computed on this machine", package.directory)
        return None
    folder = package.directory / "submissions"
    accepted = folder_submissions(folder / "accepted", "accepted")
    too_slow = folder_submissions(folder / "time_limit_exceeded", "time_limit_exceeded")
    return calibrate(
        str(package.directory),
        package.fixed_time_limit_s,
        accepted,
        too_slow,
        lambda s, limit: judge_kattis(package, s.source, s.lang, backend=backend, time_limit_s=limit),
        content=content_digest(package.directory),
        machine=machine_fingerprint(backend),
        slowdown=lambda: machine_slowdown(backend, [s.lang for s in [*accepted, *too_slow]]),
        **options,
    )


__all__ = [
    "calibrate_kattis",
    "FORMAT",
    "KattisGroup",
    "KattisPackage",
    "KattisTest",
    "OutputValidator",
    "grade",
    "judge_kattis",
    "kattis_package",
    "load_kattis_package",
    "load_kattis_problem",
    "time_limit_of",
]
