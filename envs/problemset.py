"""The built-in problem set: Codeforces-style problems written for this project, loaded into the judge's ``Problem``.

One folder per problem under ``envs/data/problemset/NNN-slug/`` (format in docs/problem_format.md, "Problem-set
folders")::

    problem.json            the project's problem.json with "title", "rating", "tags"
    statement.md            legend, ## Input, ## Output (or ## Interaction), ## Examples, optional ## Note
    samples/N.in, N.ans     the statement's examples (interactive problems: N.in only, read by the interactor)
    gen.py                  `python gen.py OUTDIR` writes the hidden inputs OUTDIR/NAME.in (fixed seed)
    solutions/ref.cpp       reference (C++17); solutions/ref.py: a Python reference where Python fits the limits
    solutions/wrong_KIND_WHAT.{py,cpp}   solutions the hidden tests must reject (KIND: wa, tle, re, mle)
    checker.py / interactor.py           jury programs named in problem.json

Hidden answers are not stored in the repository: :func:`materialise_tests` runs ``gen.py`` and the C++ reference
(in the judge's sandbox) once and keeps the result in a cache keyed by the SHA-256 of the folder's files, under
``$AGENTGSPO_CACHE/problemset`` (default ``~/.cache/agentgspo/problemset``). The cached folder is itself a problem
in the project's own format (``load_problem`` reads it), so later loads read files only.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from agentgspo.core.paths import cache_root as agentgspo_cache
from agentgspo.core.errors import AgentGSPOError
from agentgspo.sandboxes import Limits, Problem, TestCase, Verdict, judge, load_problem, read_tests_dir
from agentgspo.sandboxes.judge.core import usable_cpus
from agentgspo.sandboxes.judge.problems import ProblemJson

__all__ = [
    "builtin_problemset_dir",
    "cache_root",
    "WrongSolution",
    "ProblemFolder",
    "SetProblem",
    "ProblemFolderError",
    "read_problem_folder",
    "problem_folders",
    "folder_hash",
    "run_generator",
    "reference_answers",
    "materialise_tests",
    "load_set_problem",
    "load_problemset",
]

CACHE_FORMAT = 1  # bump when the materialised layout changes: old cache entries are then ignored
GENERATOR_CPU_LIMIT_S = 30  # CPU seconds (RLIMIT_CPU), so a loaded machine does not fail a sound generator;
GENERATOR_WALL_LIMIT_S = 600.0  # the format asks for < 5 s. The wall limit only catches a generator that hangs.
# The child sets its own CPU limit, then runs gen.py as __main__ with argv [gen.py, OUTDIR].
_LIMITED_RUN = (
    "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_CPU, ({0}, {0})); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)
ANSWER_TIME_FACTOR = 5.0  # answers are produced under 5x the time limit, so a slow reference fails validation
# with its measured ratio rather than failing to load
WRONG_KINDS = {"wa": (Verdict.WA, Verdict.PE), "tle": (Verdict.TLE,), "re": (Verdict.RE,), "mle": (Verdict.MLE,)}
_WRONG_NAME = re.compile(r"^wrong_(?P<kind>[a-z]+)_(?P<what>[a-z0-9_]+)\.(?P<lang>py|cpp)$")
_SLUG = re.compile(r"^\d{3}-[a-z0-9]+(?:-[a-z0-9]+)*$")
# Codeforces' problem tags (the tag filter of codeforces.com/problemset), the vocabulary of "tags"
CODEFORCES_TAGS = frozenset(
    {
        "2-sat",
        "binary search",
        "bitmasks",
        "brute force",
        "chinese remainder theorem",
        "combinatorics",
        "constructive algorithms",
        "data structures",
        "dfs and similar",
        "divide and conquer",
        "dp",
        "dsu",
        "expression parsing",
        "fft",
        "flows",
        "games",
        "geometry",
        "graph matchings",
        "graphs",
        "greedy",
        "hashing",
        "implementation",
        "interactive",
        "math",
        "matrices",
        "meet-in-the-middle",
        "number theory",
        "probabilities",
        "schedules",
        "shortest paths",
        "sortings",
        "string suffix structures",
        "strings",
        "ternary search",
        "trees",
        "two pointers",
    }
)


def builtin_problemset_dir() -> Path:
    """The folder of the problem set shipped in ``agentgspo.envs.data``."""
    return Path(str(resources.files("agentgspo.envs.data").joinpath("problemset")))


def cache_root() -> Path:
    """Where materialised problems live: ``problemset/`` under ``agentgspo.core.paths.cache_root()``."""
    return agentgspo_cache() / "problemset"


@dataclass
class WrongSolution:
    """A solution the hidden tests must reject; ``kind`` (wa/tle/re/mle) names the verdict it should get."""

    name: str
    lang: str
    source: str
    kind: str

    @property
    def expected_verdicts(self) -> tuple[Verdict, ...]:
        """The verdicts its kind allows (``wa``: WA or PE, since a wrong token count is PE under testlib rules)."""
        return WRONG_KINDS[self.kind]


@dataclass
class ProblemFolder:
    """A problem folder read and checked for completeness, before any test is generated."""

    slug: str
    path: Path
    meta: dict
    statement: str
    samples: list[TestCase]
    references: dict[str, str]
    wrong: list[WrongSolution]

    @property
    def interactive(self) -> bool:
        """True when problem.json names an interactor."""
        return bool(self.meta.get("interactor"))


@dataclass
class SetProblem:
    """A problem of the set, ready to judge: ``problem.tests`` are the samples (``sample/N``) then the hidden
    tests, with the checker, interactor and limits of problem.json; plus the metadata and the shipped solutions."""

    slug: str
    title: str
    rating: int
    tags: list[str]
    statement: str
    samples: list[TestCase]
    problem: Problem
    references: dict[str, str]  # {"cpp": source, "python": source}
    wrong: list[WrongSolution] = field(default_factory=list)
    folder: Path | None = None
    cache_dir: Path | None = None

    @property
    def hidden_tests(self) -> list[TestCase]:
        """The generated tests only (without the samples)."""
        return self.problem.tests[len(self.samples) :]


class ProblemFolderError(ValueError, AgentGSPOError):
    """A problem folder is broken; the message names the file and the fix."""


# ----------------------------------------------------------------------------------------------- reading


def _require(path: Path, fix: str) -> Path:
    if not path.exists():
        raise ProblemFolderError(f"{path} is missing: {fix}")
    return path


def read_problem_folder(folder: str | os.PathLike) -> ProblemFolder:
    """Read one folder of the set and check it is complete (files, metadata, samples, solutions). No tests are
    generated. Raises :class:`ProblemFolderError` naming the file and the fix."""
    from pydantic import ValidationError

    folder = Path(folder)
    if not folder.is_dir():
        raise ProblemFolderError(f"problem folder {str(folder)!r} does not exist or is not a folder")
    slug = folder.name
    if not _SLUG.match(slug):
        raise ProblemFolderError(f"{folder}: a problem folder is named NNN-kebab-slug (e.g. 001-even-split)")
    meta_path = _require(folder / "problem.json", 'write it: {"name", "title", "rating", "tags", "time_limit_s", ...}')
    try:
        meta = json.loads(meta_path.read_text())
        ProblemJson.model_validate(meta)
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ProblemFolderError(f"invalid {meta_path}: {exc}") from None
    for key in ("title", "rating", "tags"):
        if not meta.get(key):
            raise ProblemFolderError(
                f"{meta_path}: {key!r} is required in the problem set (a title, a rating such "
                "as 1200, a non-empty list of Codeforces tags)"
            )
    unknown = [tag for tag in meta["tags"] if tag not in CODEFORCES_TAGS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], CODEFORCES_TAGS, n=1)
        raise ProblemFolderError(
            f"{meta_path}: unknown tag {unknown[0]!r}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; tags are Codeforces tag names: {', '.join(sorted(CODEFORCES_TAGS))}"
        )
    if ("interactive" in meta["tags"]) != bool(meta.get("interactor")):
        raise ProblemFolderError(
            f"{meta_path}: the tag 'interactive' and an interactor go together; add both or neither"
        )
    if meta["name"] != slug:
        raise ProblemFolderError(
            f"{meta_path}: name {meta['name']!r} differs from the folder name {slug!r}; make them equal"
        )
    statement = _require(
        folder / "statement.md", "write the statement (legend, ## Input, ## Output, ## Examples)"
    ).read_text()
    _require(folder / "gen.py", "write the generator: `python gen.py OUTDIR` writes OUTDIR/NAME.in")
    checker_kind, _, checker_path = str(meta.get("checker", "tokens")).partition(":")
    if checker_kind == "testlib":
        _require(folder / checker_path, "problem.json names it as the checker: add it or fix problem.json")
    if meta.get("interactor"):
        _require(folder / meta["interactor"], "problem.json names it as the interactor: add it or fix problem.json")
    interactive = bool(meta.get("interactor"))
    samples_dir = _require(
        folder / "samples",
        "add the statement's examples as samples/1.in" + ("" if interactive else " and samples/1.ans"),
    )
    try:
        samples = read_tests_dir(samples_dir, require_answers=not interactive)
    except ValueError as exc:
        raise ProblemFolderError(str(exc)) from None
    for case in samples:
        case.name = f"sample/{case.name}"
    solutions = _require(folder / "solutions", "add solutions/ref.cpp and at least one solutions/wrong_KIND_WHAT.py")
    references = {"cpp": _require(solutions / "ref.cpp", "write the C++17 reference solution").read_text()}
    if (solutions / "ref.py").exists():
        references["python"] = (solutions / "ref.py").read_text()
    wrong = []
    for path in sorted(solutions.iterdir()):
        if path.name.startswith("ref."):
            if path.name not in ("ref.cpp", "ref.py"):
                raise ProblemFolderError(f"{path}: references are solutions/ref.cpp and solutions/ref.py only")
            continue
        match = _WRONG_NAME.match(path.name)
        if not match or match["kind"] not in WRONG_KINDS:
            raise ProblemFolderError(
                f"{path}: a solution file is ref.cpp, ref.py or wrong_KIND_WHAT.py|cpp with "
                f"KIND one of {sorted(WRONG_KINDS)}; rename it"
            )
        wrong.append(WrongSolution(path.stem, match["lang"], path.read_text(), match["kind"]))
    if not wrong:
        raise ProblemFolderError(
            f"{solutions}: add at least one solution the tests must reject (wrong_wa_WHAT.py, wrong_tle_WHAT.cpp, ...)"
        )
    return ProblemFolder(slug, folder, meta, statement, samples, references, wrong)


def problem_folders(directory: str | os.PathLike | None = None, only: list[str] | None = None) -> list[Path]:
    """The problem folders of a set (``NNN-slug`` subfolders, sorted), optionally only the named ones (a full slug
    or its ``NNN`` number). Unknown names are a ValueError listing the choices."""
    directory = Path(directory) if directory is not None else builtin_problemset_dir()
    if not directory.is_dir():
        raise ValueError(f"problem set folder {str(directory)!r} does not exist or is not a folder")
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and (p / "problem.json").exists())
    if not folders:
        raise ValueError(f"problem set folder {str(directory)!r} holds no problem folders (NNN-slug/problem.json)")
    if not only:
        return folders
    chosen = []
    for name in only:
        match = [p for p in folders if p.name == name or p.name.split("-", 1)[0] == name]
        if not match:
            raise ValueError(f"no problem {name!r} in {directory}; choose from {[p.name for p in folders]}")
        chosen += [p for p in match if p not in chosen]
    return chosen


# ----------------------------------------------------------------------------------------------- generating


def folder_hash(folder: str | os.PathLike) -> str:
    """SHA-256 (hex) of every file of the folder: relative paths and contents, in sorted order (caches skipped)."""
    folder = Path(folder)
    digest = hashlib.sha256(f"agentgspo-problemset-{CACHE_FORMAT}".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def run_generator(folder: str | os.PathLike, outdir: str | os.PathLike, hash_seed: str = "0") -> list[TestCase]:
    """Run ``python gen.py OUTDIR`` (in OUTDIR, with ``PYTHONHASHSEED=hash_seed``, at most GENERATOR_CPU_LIMIT_S
    CPU seconds) and read the inputs it wrote.

    Raises :class:`ProblemFolderError` when it fails, runs over its limits or writes something other than
    ``NAME.in`` files.
    """
    folder, outdir = Path(folder), Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    gen = folder / "gen.py"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [
        sys.executable,
        "-c",
        _LIMITED_RUN.format(GENERATOR_CPU_LIMIT_S),
        str(gen.resolve()),
        str(outdir.resolve()),
    ]
    try:
        done = subprocess.run(
            command, cwd=outdir, env=env, capture_output=True, text=True, timeout=GENERATOR_WALL_LIMIT_S
        )
    except subprocess.TimeoutExpired:
        raise ProblemFolderError(
            f"{gen} ran over {GENERATOR_WALL_LIMIT_S:.0f} s (wall clock); make it faster (it should take under 5 s)"
        ) from None
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise ProblemFolderError(
            f"{gen} used more than {GENERATOR_CPU_LIMIT_S} s of CPU time; make it faster (it should take under 5 s)"
        )
    if done.returncode != 0:
        raise ProblemFolderError(f"{gen} failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    stray = sorted(p.name for p in outdir.iterdir() if p.suffix != ".in" or not p.is_file())
    if stray:
        raise ProblemFolderError(f"{gen} wrote {stray[:5]} in OUTDIR: it must write NAME.in files only")
    if not any(outdir.iterdir()):
        raise ProblemFolderError(f"{gen} wrote no OUTDIR/NAME.in file")
    return read_tests_dir(outdir, require_answers=False)


class _RecordingChecker:
    """A judge checker that keeps every output it is shown and accepts it: the reference's answers."""

    def __init__(self) -> None:
        self.outputs: dict[bytes, bytes] = {}

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """Record ``output`` under the test (its answer field carries the test's name) and accept."""
        self.outputs[answer] = output
        return Verdict.AC, ""


def reference_answers(folder: ProblemFolder, inputs: list[TestCase], backend="local") -> list[bytes]:
    """The C++ reference's output on each input, run by the judge in its sandbox (under ANSWER_TIME_FACTOR times
    the time limit). Raises :class:`ProblemFolderError` when the reference does not compile or fails a test."""
    recorder = _RecordingChecker()
    keyed = [TestCase(case.input, case.name.encode(), case.name) for case in inputs]
    time_limit = float(folder.meta.get("time_limit_s", 2.0)) * ANSWER_TIME_FACTOR
    limits = Limits(
        time_limit_s=time_limit,
        memory_limit_mb=float(folder.meta.get("memory_limit_mb", 256.0)),
        wall_limit_s=4 * time_limit + 5,
    )
    result = judge(
        folder.references["cpp"],
        keyed,
        lang="cpp",
        checker=recorder,
        limits=limits,
        io_mode=folder.meta.get("io_mode", "stdio"),
        backend=backend,
    )
    if result.verdict != Verdict.AC:
        failed = next((t for t in result.tests if t.verdict != Verdict.AC), None)
        where = f" on test {failed.name!r}: {failed.message[:300]}" if failed else f": {result.message}"
        detail = result.compile_output[:800] if result.verdict == Verdict.CE else ""
        raise ProblemFolderError(
            f"{folder.path / 'solutions' / 'ref.cpp'} got {result.verdict.value}{where}"
            f"{detail}; fix the reference (hidden answers are its outputs)"
        )
    return [recorder.outputs[case.answer] for case in keyed]


def materialise_tests(folder: str | os.PathLike | ProblemFolder, backend="local") -> Path:
    """The problem as a folder of the project's own format with its hidden tests (``tests/NAME.in``, ``.ans``),
    made once per folder content and cached (see the module docstring); returns the cached folder."""
    info = folder if isinstance(folder, ProblemFolder) else read_problem_folder(folder)
    key = folder_hash(info.path)
    target = cache_root() / f"{info.slug}-{key[:20]}"
    if (target / "problem.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{info.slug}-", dir=target.parent))
    try:
        inputs = run_generator(info.path, work / "tests")
        if not info.interactive:
            for case, answer in zip(inputs, reference_answers(info, inputs, backend=backend)):
                (work / "tests" / f"{case.name}.ans").write_bytes(answer)
        for name in ("problem.json", "statement.md", "checker.py", "interactor.py"):
            if (info.path / name).exists():
                shutil.copy2(info.path / name, work / name)
        try:
            work.rename(target)  # atomic: a reader sees a complete folder or none
        except OSError:
            if not (target / "problem.json").exists():  # not another process finishing first: a real failure
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


# ----------------------------------------------------------------------------------------------- loading


def load_set_problem(folder: str | os.PathLike, backend="local") -> SetProblem:
    """One problem of the set, hidden tests materialised (cached), ready for ``judge_problem``."""
    info = read_problem_folder(folder)
    cached = materialise_tests(info, backend=backend)
    problem = load_problem(cached)
    samples = [TestCase(c.input, c.answer, c.name) for c in info.samples]
    for case in problem.tests:
        case.name = f"hidden/{case.name}"
    problem.tests = samples + problem.tests
    problem.samples = samples
    problem.metadata = {**problem.metadata, "source": "problemset", "folder": str(info.path)}
    meta = info.meta
    return SetProblem(
        info.slug,
        meta["title"],
        meta["rating"],
        list(meta["tags"]),
        info.statement,
        samples,
        problem,
        info.references,
        info.wrong,
        info.path,
        cached,
    )


def load_problemset(
    directory: str | os.PathLike | None = None, only: list[str] | None = None, backend="local", jobs: int | None = None
) -> list[SetProblem]:
    """Every problem of a set folder (default: the built-in set), in folder order; ``only``: slugs or numbers.
    Problems not yet cached are materialised ``jobs`` at a time (default: the usable CPUs)."""
    from concurrent.futures import ThreadPoolExecutor

    folders = problem_folders(directory, only)
    with ThreadPoolExecutor(max_workers=max(1, min(jobs or usable_cpus(), len(folders)))) as pool:
        return list(pool.map(lambda path: load_set_problem(path, backend=backend), folders))
