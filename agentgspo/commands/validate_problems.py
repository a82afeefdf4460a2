"""`agentgspo validate-problems`: prove that every problem of a problem set is sound.

    agentgspo validate-problems                      # the built-in set
    agentgspo validate-problems --problems DIR --only 001 007-two-teams --json

For each problem folder (format: docs/problem_format.md, "Problem-set folders"):

- the folder is complete (problem.json with title, rating and tags; samples; gen.py; solutions/ref.cpp; at least
  one wrong solution; the checker or interactor problem.json names) and the statement has Input, Output and
  Examples sections (an interactive one: Interaction and Examples);
- the statement's examples equal samples/ (non-interactive problems: the fenced blocks of "## Examples", taken as
  input/output pairs, equal N.in/N.ans up to trailing whitespace);
- gen.py is deterministic (two runs with different PYTHONHASHSEED write the same files) and writes >= 10 tests;
- every reference (C++ and Python) is AC on every test (samples and hidden) using at most half the time limit
  in CPU time (the largest CPU time / time limit ratio is reported; the wall-clock guard is widened, see
  ``validation_limits``);
- every wrong solution is rejected, with the verdict its name announces (wa: WA or PE, tle: TLE, re: RE, mle: MLE);
- the checker or interactor rejects an empty output (WA or PE, not AC and not a judge error).

A line per finished problem goes to stderr as the run progresses. Exit status: 0 when every problem passes, 1 when
any check fails, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

MIN_HIDDEN_TESTS = 10
MAX_TIME_RATIO = 0.5  # a reference must run within half the time limit on every test
EMPTY_SOLUTION = "pass\n"  # prints nothing: any checker or interactor must reject it


def validation_limits(problem):
    """The problem's limits with a wider wall-clock guard (4x the time limit + 5 s): verdicts are judged on CPU time,
    and on a loaded machine a CPU-starved reference must not read as TLE through the wall guard."""
    return problem.limits(wall_limit_s=4 * problem.time_limit_s + 5)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `agentgspo validate-problems`."""
    parser.add_argument("--problems", type=Path, default=None,
                        help="problem set folder holding NNN-slug/ problem folders (default: the built-in set)")
    parser.add_argument("--only", nargs="+", metavar="SLUG",
                        help="validate only these problems (full slug such as 001-even-split, or its number 001)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="problems validated at once (default: the usable CPUs)")
    parser.add_argument("--backend", choices=["local", "docker"], default="local",
                        help="sandbox backend of the judge (default local = bubblewrap)")
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
    time_ratio: dict[str, float] = field(default_factory=dict)  # reference language -> max CPU time / limit
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
    return {m.group(1).strip().lower(): statement[m.end():(matches[i + 1].start() if i + 1 < len(matches)
                                                              else len(statement))]
            for i, m in enumerate(matches)}


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
    if not report.add("statement sections", not missing,
                      f"statement.md lacks ## {', ## '.join(s.title() for s in missing)}" if missing else ""):
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
        report.add("samples match the statement", False,
                   f"statement.md shows {len(examples)} examples, samples/ holds {len(info.samples)}")
        return
    for number, ((inp, out), case) in enumerate(zip(examples, info.samples), start=1):
        for what, shown, stored in (("input", inp, case.input), ("output", out, case.answer)):
            if _normalised(shown) != _normalised(stored):
                report.add("samples match the statement", False,
                           f"example {number}'s {what} in statement.md differs from {case.name}."
                           f"{'in' if what == 'input' else 'ans'}")
                return
    report.add("samples match the statement", True, f"{len(examples)} examples")


# ----------------------------------------------------------------------------------------------- checks

def check_generator(report: ProblemReport, info) -> None:
    """Two runs of gen.py (different hash seeds) write the same inputs, at least MIN_HIDDEN_TESTS of them."""
    from agentgspo.envs.problemset import ProblemFolderError, run_generator

    with tempfile.TemporaryDirectory(prefix="agentgspo-gen-") as tmp:
        try:
            first = run_generator(info.path, Path(tmp) / "a", hash_seed="1")
            second = run_generator(info.path, Path(tmp) / "b", hash_seed="2")
        except ProblemFolderError as exc:
            report.add("generator", False, str(exc))
            return
    report.hidden_tests = len(first)
    same = [(c.name, c.input) for c in first] == [(c.name, c.input) for c in second]
    if report.add("generator deterministic", same, "" if same else
                  f"{info.path / 'gen.py'} wrote different tests in two runs: use random.Random(SEED), "
                  "no time, no set/dict order of str"):
        report.add(f">= {MIN_HIDDEN_TESTS} hidden tests", len(first) >= MIN_HIDDEN_TESTS, f"{len(first)} tests")


def check_references(report: ProblemReport, item, backend) -> None:
    """Each reference AC on every test within MAX_TIME_RATIO of the time limit."""
    from agentgspo.sandboxes import Verdict, judge_problem

    limit = item.problem.time_limit_s
    for lang, source in item.references.items():
        result = judge_problem(item.problem, source, "cpp" if lang == "cpp" else "py", backend=backend,
                               limits=validation_limits(item.problem))
        slowest = max(result.tests, key=lambda t: t.time_s, default=None)
        ratio = round(slowest.time_s / limit, 3) if slowest else 0.0
        report.time_ratio[lang] = ratio
        if result.verdict != Verdict.AC:
            failed = next((t for t in result.tests if t.verdict != Verdict.AC), None)
            where = f" on {failed.name}: {failed.message[:200]}" if failed else f": {result.message[:300]}"
            report.add(f"reference {lang} AC", False, f"{result.verdict.value}{where}{result.compile_output[:300]}")
            continue
        report.add(f"reference {lang} AC", True, f"{len(result.tests)} tests")
        report.add(f"reference {lang} within {MAX_TIME_RATIO:g} of the limit", ratio <= MAX_TIME_RATIO,
                   f"max {slowest.time_s:.3f} s on {slowest.name} / {limit:g} s = {ratio:.2f}")


def check_wrong_solutions(report: ProblemReport, item, backend) -> None:
    """Each wrong solution is rejected with a verdict its kind allows; a judge error is never a rejection."""
    from agentgspo.sandboxes import Verdict, judge_problem

    for wrong in item.wrong:
        result = judge_problem(item.problem, wrong.source, wrong.lang, backend=backend, stop_on_failure=True,
                               limits=validation_limits(item.problem))
        report.wrong_verdicts[wrong.name] = result.verdict.value
        allowed = "/".join(v.value for v in wrong.expected_verdicts)
        failed = next((t for t in result.tests if t.verdict not in (Verdict.AC, Verdict.SKIPPED)), None)
        where = f" on {failed.name}" if failed else ""
        if result.verdict == Verdict.AC:
            detail = "accepted: add a test that breaks it (gen.py), or fix the solution's name"
        elif result.verdict == Verdict.JE:
            detail = f"judge error{where}: {(failed.message if failed else result.message)[:300]}"
        else:
            detail = f"{result.verdict.value}{where} (expected {allowed})"
        report.add(f"{wrong.name} rejected", result.verdict in wrong.expected_verdicts, detail)


def check_jury_rejects_empty(report: ProblemReport, item, backend) -> None:
    """The checker or interactor rejects a solution that prints nothing (WA or PE; never AC, never JE)."""
    from agentgspo.sandboxes import Verdict, judge_problem

    result = judge_problem(item.problem, EMPTY_SOLUTION, "py", backend=backend, stop_on_failure=True,
                           limits=validation_limits(item.problem))
    jury = "interactor" if item.problem.interactive else "checker"
    report.add(f"{jury} rejects an empty output", result.verdict in (Verdict.WA, Verdict.PE),
               f"{result.verdict.value}: {next((t.message for t in result.tests if t.message), result.message)[:200]}")


def validate_problem(folder: Path, backend: str = "local") -> ProblemReport:
    """Run every check on one problem folder; never raises for a broken problem (the report says what broke)."""
    from agentgspo.envs.problemset import ProblemFolderError, load_set_problem, read_problem_folder

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
    check_generator(report, info)
    try:
        item = load_set_problem(folder, backend=backend)
    except (ProblemFolderError, ValueError) as exc:
        report.add("hidden tests materialised", False, str(exc))
        return report
    check_references(report, item, backend)
    check_wrong_solutions(report, item, backend)
    check_jury_rejects_empty(report, item, backend)
    return report


def validate_problemset(directory: Path | None = None, only: list[str] | None = None, jobs: int | None = None,
                        backend: str = "local", on_done=None) -> list[ProblemReport]:
    """Validate every problem of a set (``jobs`` problems at once), in folder order; ``on_done(report, done, total)``
    is called as each problem finishes."""
    from agentgspo.envs.problemset import problem_folders
    from agentgspo.sandboxes.judge.core import usable_cpus

    folders = problem_folders(directory, only)
    if jobs is not None and jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    finished = []
    lock = threading.Lock()

    def one(folder: Path) -> ProblemReport:
        report = validate_problem(folder, backend)
        with lock:
            finished.append(report.slug)
            if on_done is not None:
                on_done(report, len(finished), len(folders))
        return report

    with ThreadPoolExecutor(max_workers=min(jobs or usable_cpus(), len(folders))) as pool:
        return list(pool.map(one, folders))


def format_table(reports: list[ProblemReport]) -> str:
    """One line per problem, then every failed check with its detail."""
    lines = [f"{'problem':<28} {'rating':>6} {'kind':<11} {'tests':>5} {'cpp':>5} {'py':>5} {'wrong':>6}  result"]
    for r in reports:
        rejected = sum(1 for c in r.checks if c.name.startswith("wrong_") and c.ok)
        ratio = {lang: f"{r.time_ratio[lang]:.2f}" if lang in r.time_ratio else "-" for lang in ("cpp", "python")}
        lines.append(f"{r.slug:<28} {r.rating or '-':>6} {r.kind or '-':<11} {r.hidden_tests:>5} {ratio['cpp']:>5} "
                     f"{ratio['python']:>5} {rejected:>2}/{len(r.wrong_verdicts):<3}  {'ok' if r.ok else 'FAIL'}")
    failures = [(r.slug, c) for r in reports for c in r.checks if not c.ok]
    if failures:
        lines.append("")
        lines += [f"FAIL {slug}: {check.name}: {check.detail}" for slug, check in failures]
    worst = max((v for r in reports for v in r.time_ratio.values()), default=0.0)
    passed = sum(r.ok for r in reports)
    lines.append(f"\n{passed}/{len(reports)} problems valid; largest reference time / limit: {worst:.2f} "
                 f"(cpp and py columns: the largest per problem)")
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
