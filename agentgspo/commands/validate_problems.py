"""`agentgspo validate-problems`: prove that every problem of a problem set is sound.

    agentgspo validate-problems                      # the built-in set
    agentgspo validate-problems --problems DIR --only 001 007-two-teams --json

For each problem folder (format: docs/problem_format.md, "Problem-set folders"):

- the folder is complete (problem.json with title, rating and tags; samples; gen.py; solutions/ref.cpp; at least
  one wrong solution; the checker or interactor problem.json names) and the statement has Input, Output and
  Examples sections (an interactive one: Interaction and Examples);
- the statement's examples equal samples/ (non-interactive problems: the fenced blocks of "## Examples", taken as
  input/output pairs, equal N.in/N.ans up to trailing whitespace);
- gen.py is deterministic (two runs with different PYTHONHASHSEED write the same files; the first is the run that
  materialised the hidden tests, cached) and writes >= 10 tests;
- every reference (C++ and Python) is AC on every test (samples and hidden) using at most MAX_TIME_RATIO (1/3)
  of the time limit in CPU time of the REFERENCE machine (see "Machine speed" below; the largest ratio is
  reported);
- every wrong solution is rejected, with the verdict its name announces (wa: WA or PE, tle: TLE, re: RE, mle: MLE);
  a too-slow one (wrong_tle_*) still under TOO_SLOW_RATIO (3) times the limit in reference-machine seconds, so that
  it stays rejected on a machine 3x faster than the reference one (or under ``eval --time-limit-scale`` up to 3);
- the checker or interactor rejects an empty output (WA or PE, not AC and not a judge error).

A line per finished problem goes to stderr as the run progresses. Exit status: 0 when every problem passes, 1 when
any check fails, 2 for bad arguments.

Machine speed. Time limits are CPU seconds of one machine, the reference machine (REFERENCE_MACHINE), where
REFERENCE_CALIBRATION_S was measured. Right before each problem's references, validation times fixed calibration
programs (CALIBRATION_PY, CALIBRATION_CPP) through the same judge, backend and sandbox, CALIBRATION_RUNS times each,
and takes the median CPU time: this machine's ``slowdown`` per language, now, is that median over the reference
machine's. A reference's CPU time divided by the slowdown is its time in reference-machine seconds, which is what
MAX_TIME_RATIO bounds; every judged program (references, wrong solutions, the empty output) runs under the problem's
limits times the slowdown (``validation_limits``), so a wrong_tle solution is judged against the same amount of work
everywhere. So the check passes or fails on the same problems on a machine twice slower (or faster) than the
reference one, and still fails a reference that does far more work than its limit allows, or a limit set far too
low.

Why this yardstick: a fixed program in the judged language measures exactly what a reference's time is made of
(the same interpreter or compiler, its start-up, the sandbox's runner), and its ratio between two machines is the
ratio of their references' times to within the spread of workloads (the calibration mixes integer arithmetic,
lists, dicts, sorting and number parsing, what the references spend their time on). CPU time (rusage), as the
verdicts use; but on a shared machine other processes still inflate CPU time (caches, memory bandwidth, the
host's other guests), by up to 1.5x over a run of many minutes on the 2-core machines, which is why each problem
is calibrated just before its references, under the same load, and the median of several runs ignores one
disturbed run. A reference over the margin is calibrated and timed again (RETIMES times at most) and its best
attempt counts: one disturbed run of the reference itself must not fail a sound problem. The C++ reference's own
time is no yardstick for Python: it is milliseconds, mostly process start-up, and the Python/C++ speed ratio
itself differs between CPUs and Python versions.

Margin. MAX_TIME_RATIO = 1/3 of the limit on the reference machine means that on a machine 3x slower a correct
Python solution as fast as the reference still runs within its limit, and one 1.5x slower than the reference has
room on a machine 2x slower. The built-in limits were set (and raised where needed) so that this holds; the
training judge itself uses the limits as they are, in this machine's seconds: the table's last line says how much
slower or faster this machine is.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import statistics
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agentgspo.envs.problemset import (
    ProblemFolderError,
    load_set_problem,
    problem_folders,
    read_problem_folder,
    run_generator,
)
from agentgspo.sandboxes import Verdict, judge_problem
from agentgspo.sandboxes.judge.core import usable_cpus

# The reference machine, its calibration seconds and the calibration programs live with the judge's calibration
# (sandboxes/judge/calibration.py, which scales a package's limit by the same slowdown); re-exported here.
from agentgspo.sandboxes.judge.calibration import (
    CALIBRATION_CPP,  # noqa: F401 (re-exported)
    CALIBRATION_PY,  # noqa: F401 (re-exported)
    CALIBRATION_ROUNDS,
    CALIBRATION_RUNS,
    REFERENCE_CALIBRATION_S,
    REFERENCE_MACHINE,
    calibration_program,  # noqa: F401 (re-exported)
    time_calibration_programs,
)

MIN_HIDDEN_TESTS = 10
MAX_TIME_RATIO = 1 / 3  # of the time limit, in reference-machine CPU seconds, on every test (see "Margin" above)
# A wrong_tle solution is judged under this many times the limit (reference-machine seconds) and must still be TLE:
# the mirror of MAX_TIME_RATIO, a too-slow solution stays too slow on a machine 3x faster. Its tests run in the
# judge's order (largest input first would change some verdicts: deep recursion is RE on the largest, TLE before).
TOO_SLOW_RATIO = 3.0
EMPTY_SOLUTION = "pass\n"  # prints nothing: any checker or interactor must reject it

# ----------------------------------------------------------------------------------------------- machine speed

RETIMES = 2  # a reference over the margin is timed again (calibrated again first) up to this many times
_LANG = {"python": "py", "cpp": "cpp"}  # reference key -> judge language


@dataclass(frozen=True)
class MachineSpeed:
    """Median CPU seconds of each calibration program on this machine (``seconds``), against the reference
    machine's REFERENCE_CALIBRATION_S."""

    seconds: dict[str, float]

    def slowdown(self, lang: str) -> float:
        """How many times slower this machine runs ``lang`` ("python"/"py" or "cpp") than the reference machine."""
        lang = "python" if lang in ("py", "python") else lang
        return self.seconds[lang] / REFERENCE_CALIBRATION_S[lang]

    def describe(self) -> str:
        """One line: each language's slowdown and the medians behind it."""
        return ", ".join(
            f"{lang} {self.slowdown(lang):.2f}x ({self.seconds[lang]:.3f} s here, "
            f"{REFERENCE_CALIBRATION_S[lang]:.3f} s there)"
            for lang in sorted(self.seconds)
        )


REFERENCE_SPEED = MachineSpeed(dict(REFERENCE_CALIBRATION_S))  # slowdown 1: judge in this machine's own seconds


def measure_machine_speed(backend: str = "local", runs: int = CALIBRATION_RUNS) -> MachineSpeed:
    """Time each calibration program ``runs`` times through the judge (one test per run, each its own process)
    and keep the median CPU time. Raises RuntimeError when a calibration program does not run: the judge or its
    sandbox is broken, and no time could be trusted."""
    return MachineSpeed(time_calibration_programs(backend, runs, CALIBRATION_ROUNDS))


_measured: dict[str, MachineSpeed] = {}
_measured_lock = threading.Lock()


def machine_speed(backend: str = "local") -> MachineSpeed:
    """This machine's speed on ``backend``, measured once per process (``measure_machine_speed``): for sizing work
    (tests, benchmarks); validation measures again for each problem."""
    with _measured_lock:
        if backend not in _measured:
            _measured[backend] = measure_machine_speed(backend)
        return _measured[backend]


def validation_limits(problem, slowdown: float = 1.0):
    """The problem's limits in this machine's seconds (time limit times ``slowdown``), with a wider wall-clock guard
    (4x that + 5 s): verdicts are judged on CPU time, and on a loaded machine a CPU-starved reference must not read
    as TLE through the wall guard."""
    time_limit = problem.time_limit_s * slowdown
    return problem.limits(time_limit_s=time_limit, wall_limit_s=4 * time_limit + 5)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `agentgspo validate-problems`."""
    parser.add_argument(
        "--problems",
        type=Path,
        default=None,
        help="problem set folder holding NNN-slug/ problem folders (default: the built-in set)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="SLUG",
        help="validate only these problems (full slug such as 001-even-split, or its number 001)",
    )
    parser.add_argument("--jobs", type=int, default=None, help="problems validated at once (default: the usable CPUs)")
    parser.add_argument(
        "--backend",
        choices=["local", "docker"],
        default="local",
        help="sandbox backend of the judge (default local = bubblewrap)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per problem instead of a table")


@dataclass
class Check:
    """One check of one problem: its name, whether it passed, and what was seen."""

    name: str
    ok: bool
    detail: str = ""


@dataclass
class ProblemReport:
    """Everything validated about one problem folder."""

    slug: str
    rating: int | None = None
    tags: list[str] = field(default_factory=list)
    kind: str = ""  # "tokens", "checker", "float", "interactive"
    hidden_tests: int = 0
    time_ratio: dict[str, float] = field(default_factory=dict)  # reference language -> max CPU time / limit, in
    # reference-machine seconds (this machine's time divided by its slowdown)
    slowdown: dict[str, float] = field(default_factory=dict)  # language -> this machine's slowdown (MachineSpeed)
    wrong_verdicts: dict[str, str] = field(default_factory=dict)  # wrong solution -> overall verdict
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed (and there was at least one)."""
        return bool(self.checks) and all(check.ok for check in self.checks)

    def add(self, name: str, ok: bool, detail: str = "") -> bool:
        """Record a check; returns ``ok``."""
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    def to_dict(self) -> dict:
        """Plain-JSON form, with ``ok``."""
        return {**asdict(self), "ok": self.ok}


# ----------------------------------------------------------------------------------------------- statement

_SECTION = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def statement_sections(statement: str) -> dict[str, str]:
    """``## Heading`` -> the text up to the next ``## `` heading (headings lower-cased)."""
    matches = list(_SECTION.finditer(statement))
    return {
        m.group(1).strip().lower(): statement[
            m.end() : (matches[i + 1].start() if i + 1 < len(matches) else len(statement))
        ]
        for i, m in enumerate(matches)
    }


def statement_examples(statement: str) -> list[tuple[str, str]]:
    """The (input, output) pairs of the statement's ``## Examples`` section: its fenced blocks, taken in pairs."""
    blocks = _FENCE.findall(statement_sections(statement).get("examples", ""))
    if len(blocks) % 2:
        raise ValueError(f"the Examples section holds {len(blocks)} fenced blocks; expected input/output pairs")
    return [(blocks[i], blocks[i + 1]) for i in range(0, len(blocks), 2)]


def _normalised(text: str | bytes) -> str:
    """Lines without trailing whitespace, no trailing blank lines: how an example compares with its file."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).rstrip()


def check_statement(report: ProblemReport, info) -> None:
    """Sections present; for non-interactive problems, examples equal to samples/ (input and answer)."""
    sections = statement_sections(info.statement)
    required = ("interaction", "examples") if info.interactive else ("input", "output", "examples")
    missing = [name for name in required if name not in sections]
    if not report.add(
        "statement sections",
        not missing,
        f"statement.md lacks ## {', ## '.join(s.title() for s in missing)}" if missing else "",
    ):
        return
    if info.interactive:
        report.add("samples", bool(info.samples), f"{len(info.samples)} sample inputs for the interactor")
        return
    try:
        examples = statement_examples(info.statement)
    except ValueError as exc:
        report.add("samples match the statement", False, f"statement.md: {exc}")
        return
    if len(examples) != len(info.samples):
        report.add(
            "samples match the statement",
            False,
            f"statement.md shows {len(examples)} examples, samples/ holds {len(info.samples)}",
        )
        return
    for number, ((inp, out), case) in enumerate(zip(examples, info.samples), start=1):
        for what, shown, stored in (("input", inp, case.input), ("output", out, case.answer)):
            if _normalised(shown) != _normalised(stored):
                report.add(
                    "samples match the statement",
                    False,
                    f"example {number}'s {what} in statement.md differs from {case.name}."
                    f"{'in' if what == 'input' else 'ans'}",
                )
                return
    report.add("samples match the statement", True, f"{len(examples)} examples")


# ----------------------------------------------------------------------------------------------- checks


def check_generator(report: ProblemReport, info, item) -> None:
    """gen.py run again, with another hash seed, writes the inputs it wrote when ``item``'s hidden tests were
    materialised (PYTHONHASHSEED 0: two runs, one of them the materialising run), at least MIN_HIDDEN_TESTS of them."""
    materialised = [(case.name.removeprefix("hidden/"), case.input) for case in item.hidden_tests]
    with tempfile.TemporaryDirectory(prefix="agentgspo-gen-") as tmp:
        try:
            again = [(case.name, case.input) for case in run_generator(info.path, Path(tmp), hash_seed="1")]
        except ProblemFolderError as exc:
            report.add("generator", False, str(exc))
            return
    report.hidden_tests = len(materialised)
    same = again == materialised
    if report.add(
        "generator deterministic",
        same,
        ""
        if same
        else f"{info.path / 'gen.py'} wrote different tests in two runs: use random.Random(SEED), "
        "no time, no set/dict order of str",
    ):
        report.add(
            f">= {MIN_HIDDEN_TESTS} hidden tests", len(materialised) >= MIN_HIDDEN_TESTS, f"{len(materialised)} tests"
        )


def check_references(
    report: ProblemReport, item, backend, speed: MachineSpeed, remeasure: Callable[[], MachineSpeed] | None = None
) -> None:
    """Each reference AC on every test within MAX_TIME_RATIO of the time limit, in reference-machine seconds.

    A reference over the margin is timed again, up to RETIMES more times (after ``remeasure()``, when given, has
    calibrated the machine again), and its best attempt counts: a load spike during the reference's run (after a
    quiet calibration) reads as work it did not do, while a reference that does too much work fails every attempt.
    A spike during a calibration reads the other way, so the best of three can be low by that much: far less than
    the 1/3 margin."""
    limit = item.problem.time_limit_s
    for lang, source in item.references.items():
        best = None
        for attempt in range(1 + RETIMES):
            if attempt and remeasure is not None:
                speed = remeasure()
            slowdown = round(speed.slowdown(lang), 3)
            result = judge_problem(
                item.problem, source, _LANG[lang], backend=backend, limits=validation_limits(item.problem, slowdown)
            )
            slowest = max(result.tests, key=lambda t: t.time_s, default=None)
            ratio = round(slowest.time_s / slowdown / limit, 3) if slowest else 0.0
            if best is None or ratio < best[2]:
                best = (result, slowest, ratio, slowdown)
            if result.verdict != Verdict.AC or ratio <= MAX_TIME_RATIO:
                break
        result, slowest, ratio, slowdown = best
        report.time_ratio[lang], report.slowdown[lang] = ratio, slowdown
        if result.verdict != Verdict.AC:
            failed = next((t for t in result.tests if t.verdict != Verdict.AC), None)
            where = f" on {failed.name}: {failed.message[:200]}" if failed else f": {result.message[:300]}"
            report.add(f"reference {lang} AC", False, f"{result.verdict.value}{where}{result.compile_output[:300]}")
            continue
        report.add(f"reference {lang} AC", True, f"{len(result.tests)} tests")
        report.add(
            f"reference {lang} within {MAX_TIME_RATIO:.2g} of the limit",
            ratio <= MAX_TIME_RATIO,
            f"max {slowest.time_s:.3f} s on {slowest.name}, {slowest.time_s / slowdown:.3f} s on the reference "
            f"machine (this one takes {slowdown:.2f}x its time) / {limit:g} s = {ratio:.2f}"
            + (
                ""
                if ratio <= MAX_TIME_RATIO
                else f" (the best of {1 + RETIMES} attempts); raise time_limit_s to at least "
                f"{slowest.time_s / slowdown / MAX_TIME_RATIO:.1f} or make the reference faster"
            ),
        )


def check_wrong_solutions(
    report: ProblemReport, item, backend, speed: MachineSpeed, too_slow_ratio: float = TOO_SLOW_RATIO
) -> None:
    """Each wrong solution is rejected with a verdict its kind allows; a judge error is never a rejection. A
    too-slow one is judged under ``too_slow_ratio`` times the limit (1: only its verdict, at the limit)."""
    for wrong in item.wrong:
        too_slow = wrong.kind == "tle"
        result = judge_problem(
            item.problem,
            wrong.source,
            wrong.lang,
            backend=backend,
            stop_on_failure=True,
            limits=validation_limits(item.problem, speed.slowdown(wrong.lang)),
            time_limit_scale=too_slow_ratio if too_slow else 1.0,
        )
        report.wrong_verdicts[wrong.name] = result.verdict.value
        allowed = "/".join(v.value for v in wrong.expected_verdicts)
        failed = next((t for t in result.tests if t.verdict not in (Verdict.AC, Verdict.SKIPPED)), None)
        where = f" on {failed.name}" if failed else ""
        if result.verdict == Verdict.AC and too_slow:
            detail = (
                f"accepted under {too_slow_ratio:g}x the time limit: a too-slow solution must need more, or it is "
                "accepted on a faster machine (make it slower, or add a larger test in gen.py)"
            )
        elif result.verdict == Verdict.AC:
            detail = "accepted: add a test that breaks it (gen.py), or fix the solution's name"
        elif result.verdict == Verdict.JE:
            detail = f"judge error{where}: {(failed.message if failed else result.message)[:300]}"
        else:
            detail = f"{result.verdict.value}{where} (expected {allowed})"
        report.add(f"{wrong.name} rejected", result.verdict in wrong.expected_verdicts, detail)


def check_jury_rejects_empty(report: ProblemReport, item, backend, speed: MachineSpeed) -> None:
    """The checker or interactor rejects a solution that prints nothing (WA or PE; never AC, never JE)."""
    result = judge_problem(
        item.problem,
        EMPTY_SOLUTION,
        "py",
        backend=backend,
        stop_on_failure=True,
        limits=validation_limits(item.problem, speed.slowdown("python")),
    )
    jury = "interactor" if item.problem.interactive else "checker"
    report.add(
        f"{jury} rejects an empty output",
        result.verdict in (Verdict.WA, Verdict.PE),
        f"{result.verdict.value}: {next((t.message for t in result.tests if t.message), result.message)[:200]}",
    )


def validate_problem(
    folder: Path, backend: str = "local", speed: MachineSpeed | None = None, too_slow_ratio: float = TOO_SLOW_RATIO
) -> ProblemReport:
    """Run every check on one problem folder; never raises for a broken problem (the report says what broke).

    ``speed``: this machine's, to judge times in reference-machine seconds (default: measured now,
    ``measure_machine_speed(backend)``; ``REFERENCE_SPEED`` judges in this machine's own seconds).
    ``too_slow_ratio``: the multiple of the limit a wrong_tle solution must still exceed (TOO_SLOW_RATIO; 1 checks
    only its verdict at the limit, which costs a third of the time: the suite's check of the shipped set, whose
    3x margin `agentgspo validate-problems` certifies)."""
    report = ProblemReport(folder.name)
    try:
        info = read_problem_folder(folder)
    except ProblemFolderError as exc:
        report.add("folder complete", False, str(exc))
        return report
    report.add("folder complete", True)
    report.rating, report.tags = info.meta["rating"], list(info.meta["tags"])
    checker = str(info.meta.get("checker", "tokens"))
    report.kind = "interactive" if info.interactive else checker.partition(":")[0].replace("testlib", "checker")
    check_statement(report, info)
    try:
        item = load_set_problem(folder, backend=backend)  # runs gen.py (or finds its tests cached)
    except (ProblemFolderError, ValueError) as exc:
        report.add("hidden tests materialised", False, str(exc))
        return report
    check_generator(report, info, item)
    remeasure = None if speed else lambda: measure_machine_speed(backend)
    speed = speed or measure_machine_speed(backend)  # now: under the load the references will run under
    check_references(report, item, backend, speed, remeasure)
    check_wrong_solutions(report, item, backend, speed, too_slow_ratio)
    check_jury_rejects_empty(report, item, backend, speed)
    return report


def validate_problemset(
    directory: Path | None = None,
    only: list[str] | None = None,
    jobs: int | None = None,
    backend: str = "local",
    on_done=None,
    speed: MachineSpeed | None = None,
    too_slow_ratio: float = TOO_SLOW_RATIO,
) -> list[ProblemReport]:
    """Validate every problem of a set (``jobs`` problems at once), in folder order; ``on_done(report, done, total)``
    is called as each problem finishes. ``speed`` and ``too_slow_ratio``: as ``validate_problem``'s (default:
    measured for each problem; TOO_SLOW_RATIO)."""
    folders = problem_folders(directory, only)
    if jobs is not None and jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    finished = []
    lock = threading.Lock()

    def one(folder: Path) -> ProblemReport:
        report = validate_problem(folder, backend, speed, too_slow_ratio)
        with lock:
            finished.append(report.slug)
            if on_done is not None:
                on_done(report, len(finished), len(folders))
        return report

    with ThreadPoolExecutor(max_workers=min(jobs or usable_cpus(), len(folders))) as pool:
        return list(pool.map(one, folders))


def format_table(reports: list[ProblemReport]) -> str:
    """One line per problem, then every failed check with its detail, then a line on this machine's speed."""
    lines = [f"{'problem':<28} {'rating':>6} {'kind':<11} {'tests':>5} {'cpp':>5} {'py':>5} {'wrong':>6}  result"]
    for r in reports:
        rejected = sum(1 for c in r.checks if c.name.startswith("wrong_") and c.ok)
        ratio = {lang: f"{r.time_ratio[lang]:.2f}" if lang in r.time_ratio else "-" for lang in ("cpp", "python")}
        lines.append(
            f"{r.slug:<28} {r.rating or '-':>6} {r.kind or '-':<11} {r.hidden_tests:>5} {ratio['cpp']:>5} "
            f"{ratio['python']:>5} {rejected:>2}/{len(r.wrong_verdicts):<3}  {'ok' if r.ok else 'FAIL'}"
        )
    failures = [(r.slug, c) for r in reports for c in r.checks if not c.ok]
    if failures:
        lines.append("")
        lines += [f"FAIL {slug}: {check.name}: {check.detail}" for slug, check in failures]
    worst = max((v for r in reports for v in r.time_ratio.values()), default=0.0)
    passed = sum(r.ok for r in reports)
    lines.append(
        f"\n{passed}/{len(reports)} problems valid; largest reference time / limit: {worst:.2f} "
        f"(cpp and py columns: the largest per problem, in reference-machine seconds; at most "
        f"{MAX_TIME_RATIO:.2f})"
    )
    slowdowns = {lang: [r.slowdown[lang] for r in reports if lang in r.slowdown] for lang in ("cpp", "python")}
    if any(slowdowns.values()):
        lines.append(
            f"this machine's time over the reference machine's ({REFERENCE_MACHINE}): "
            + ", ".join(
                f"{lang} {min(values):.2f}-{max(values):.2f}x (median {statistics.median(values):.2f}x)"
                for lang, values in slowdowns.items()
                if values
            )
            + " (calibrated before each problem)"
        )
        here = max((r.time_ratio[lang] * r.slowdown[lang] for r in reports for lang in r.time_ratio), default=0)
        if here > 0.5:
            lines.append(
                f"note: on this machine a solution as fast as the slowest reference uses {here:.2f} of its "
                "limit when training or evaluating (the judge's limits are this machine's seconds there)"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Validate and print a table (or JSON lines); 0 when every problem is valid."""

    def progress(report: ProblemReport, done: int, total: int) -> None:
        print(f"[{done}/{total}] {report.slug}: {'ok' if report.ok else 'FAIL'}", file=sys.stderr, flush=True)

    reports = validate_problemset(args.problems, args.only, args.jobs, args.backend, on_done=progress)
    if args.json:
        for report in reports:
            print(json.dumps(report.to_dict()))
    else:
        print(format_table(reports))
    sys.stdout.flush()
    return 0 if all(r.ok for r in reports) else 1
