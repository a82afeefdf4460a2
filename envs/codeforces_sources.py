"""Where CodeForces-v0's problems come from: one loader per source format, all producing :class:`CodeforcesTask`.

Sources (:func:`read_tasks` picks the loader from the path):

- ``None``: the five starter problems shipped as open-r1 rows (``envs/data/codeforces_builtin.jsonl``).
- ``"builtin"``: the project's problem set (``envs/data/problemset/``, loaded by ``agentgspo.envs.problemset``).
- a folder with ``problem.json`` and ``gen.py``: one problem-set folder (same loader); otherwise a folder in any
  format of the registry ``agentgspo.sandboxes.judge.formats`` (the one ``agentgspo judge`` reads), by its marker
  file: ``problem.json`` the project's format, ``problem.yaml`` an ICPC/Kattis package, ``problem.xml`` a Polygon
  package (each format's module says where its statement, references and wrong solutions come from); a folder of
  such folders: all of them.
- a ``.jsonl`` / ``.json`` / ``.parquet`` file (the last two through ``datasets``, as Hugging Face exports them)
  of rows in one of three public schemas, recognised per row by its fields:

  - open-r1/codeforces (``official_tests`` / ``examples``; see FORMATS.md and ``docs/problem_format.md``); judged
    on ``official_tests`` only: rows without them (empty or missing: the statement's examples are all they have)
    are skipped and counted as "no official tests"; ``input_mode`` ``"file"`` means input.txt/output.txt;
  - DeepMind code_contests (``public_tests``, ``private_tests``, ``generated_tests`` as ``{input: [...], output:
    [...]}``; ``solutions`` / ``incorrect_solutions`` as ``{language: [...], solution: [...]}`` with language 2 =
    C++, 3 = Python 3 (1 is Python 2: not used); ``time_limit`` ``{seconds, nanos}``; ``memory_limit_bytes``;
    ``cf_rating``, ``cf_tags``; ``input_file`` / ``output_file``: empty for stdin/stdout, ``input.txt`` and
    ``output.txt`` for file I/O (the only names the judge supports: other names, or a file on one side only, are
    skipped and counted)); judged like code_contests' own grader, on the public, private and generated tests;
  - LiveCodeBench code generation (``question_title``, ``question_content``, ``public_test_cases`` (JSON text of
    ``[{input, output, testtype}]``), ``private_test_cases`` (the same JSON, or as LiveCodeBench ships it:
    base64 of zlib of a pickled JSON string, read here with an unpickler that refuses every object but strings));
    judged like LiveCodeBench's grader, on the public and private tests; rows whose tests are ``functional``
    (LeetCode-style function calls, not stdin/stdout) are skipped and counted.

Tests gathered from several lists keep their order (public first) and a repeated input is judged once (its first
occurrence). Skipped rows are counted by reason in ``ProblemSet.skipped`` and listed, each naming its row and why,
in ``ProblemSet.skipped_rows``.

Every task carries ``metadata``: ``id``, ``title``, ``rating`` (Codeforces scale or ``None``), ``tags``,
``source``, ``contest_id``; open-r1 rows' also ``official_tests_complete`` when the row has that field.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgspo.envs.code import jury_file
from agentgspo.envs.datafiles import existing_file, read_data_file
from agentgspo.envs.problemset import load_problemset, load_set_problem
from agentgspo.sandboxes import Problem, TestCase, problem_from_codeforces_row
from agentgspo.sandboxes.judge.formats import expected_markers, format_of, load_any_package, problem_folders

__all__ = [
    "CodeforcesTask",
    "ProblemSet",
    "task_metadata",
    "compose_statement",
    "format_statement",
    "open_r1_task",
    "open_r1_row",
    "code_contests_io_mode",
    "code_contests_row",
    "livecodebench_tests",
    "livecodebench_task",
    "ROW_SCHEMAS",
    "row_schema",
    "judged_row",
    "read_rows_file",
    "package_task",
    "read_folder",
    "read_tasks",
    "set_problem_task",
    "read_problemset",
]

_LANG_KEYS = {"python": "py", "py": "py", "python3": "py", "cpp": "cpp", "c++": "cpp", "cpp17": "cpp", "c++17": "cpp"}
_CODE_CONTESTS_LANGS = {2: "cpp", 3: "py"}  # code_contests' Language enum: 1 PYTHON (2.x), 2 CPP, 3 PYTHON3, 4 JAVA
# Reasons rows are skipped (ProblemSet.skipped's keys).
SKIP_INTERACTIVE = "interactive without an interactor"
SKIP_NO_OFFICIAL_TESTS = "no official tests"
SKIP_FILE_NAMES = "file I/O other than input.txt/output.txt"
SKIP_FUNCTIONAL = "functional (LeetCode-style) tests"
_STDIN_NAMES = ("", "stdin", "standard input")  # code_contests input_file values meaning stdin
_STDOUT_NAMES = ("", "stdout", "standard output")
_FILE_IO_LINE = (
    "Input and output: read the input from the file input.txt and write the output to the file "
    "output.txt (not standard input/output)."
)


@dataclass
class CodeforcesTask:
    """One judgeable problem: the sandboxes ``Problem``, the statement shown to the model, shipped solutions.

    ``references``: ``{lang: source}`` of accepted solutions (``lang`` ``"py"`` or ``"cpp"``); ``wrong``:
    ``[{"name", "lang", "code"}]`` of solutions the hidden tests reject; ``metadata``: id, title, rating, tags,
    source, contest_id.
    """

    problem: Any  # agentgspo.sandboxes.Problem
    statement: str
    references: dict[str, str] = field(default_factory=dict)
    wrong: list[dict[str, str]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProblemSet:
    """The tasks of one source and the rows skipped because they cannot be judged here: ``skipped`` counts them
    by reason, ``skipped_rows`` names each (``"row N: <schema> row '<id>': <reason> (<why>)"``)."""

    tasks: list[CodeforcesTask]
    skipped: Counter = field(default_factory=Counter)
    skipped_rows: list[str] = field(default_factory=list)

    @property
    def skipped_interactive(self) -> int:
        """Interactive rows without an interactor (the dataset ships none)."""
        return self.skipped[SKIP_INTERACTIVE]


def task_metadata(
    identifier: str, title: str | None, rating: Any, tags: Any, source: str, contest_id: Any = None
) -> dict[str, Any]:
    """The metadata every task carries; ``rating`` 0/empty becomes ``None`` (unrated)."""
    try:
        rating = int(rating) if rating not in (None, "", 0) else None
    except (TypeError, ValueError):
        rating = None
    return {
        "id": str(identifier),
        "title": title or str(identifier),
        "rating": rating,
        "tags": [str(t) for t in (tags or [])],
        "source": source,
        "contest_id": None if contest_id in (None, "") else str(contest_id),
    }


def compose_statement(
    title: str,
    time_limit_s: float,
    memory_limit_mb: float,
    body: str,
    examples: list[tuple[str, str]] = (),
    note: str | None = None,
    io_mode: str = "stdio",
) -> str:
    """A statement as the model reads it: title, limits (and the files, for ``io_mode="file"``), the body (legend
    and sections), examples, note."""
    limits = f"Time limit: {time_limit_s:g} s. Memory limit: {memory_limit_mb:g} MB."
    if io_mode == "file":
        limits += "\n" + _FILE_IO_LINE
    parts = [f"# {title}", limits, body.strip()]
    for i, (given, expected) in enumerate(examples, start=1):
        parts.append(f"## Example {i}\nInput:\n```\n{given}```\nOutput:\n```\n{expected}```")
    if note:
        parts.append(f"## Note\n{note}")
    return "\n\n".join(p for p in parts if p)


def format_statement(row: dict[str, Any]) -> str:
    """The statement of an open-r1/codeforces row: title, limits, sections, examples (not for interactive rows)."""
    sections = []
    for key, heading in (
        ("description", None),
        ("input_format", "Input"),
        ("output_format", "Output"),
        ("interaction_format", "Interaction"),
    ):
        if row.get(key):
            sections.append(f"## {heading}\n{row[key]}" if heading else str(row[key]))
    examples = [] if row.get("interaction_format") else [(e["input"], e["output"]) for e in row.get("examples") or []]
    return compose_statement(
        row.get("title") or row["id"],
        float(row["time_limit"] or 2),
        float(row["memory_limit"] or 256),
        "\n\n".join(sections),
        examples,
        row.get("note"),
        "file" if row.get("input_mode") == "file" else "stdio",
    )


# ----------------------------------------------------------------------------------------------- rows


def open_r1_task(row: dict[str, Any]) -> CodeforcesTask | None:
    """A task from an open-r1/codeforces row; ``None`` for a row skipped (:func:`open_r1_row`)."""
    return open_r1_row(row)[0]


def open_r1_row(row: dict[str, Any]) -> tuple[CodeforcesTask | None, str, str]:
    """``(task, "", "")``, or ``(None, reason, why)`` for a row that cannot be judged here: an interactive row
    without an ``interactor``, or a row without ``official_tests`` (empty or missing), which
    ``problem_from_codeforces_row`` would judge on the statement's examples alone: an inflated pass@k.

    Two optional fields extend the schema: ``interactor`` (Python source of a testlib-style interactor) and
    ``reference_solutions`` (``{"python": src, "cpp": src}``). ``official_tests_complete``, when the row has it,
    is kept in ``metadata``.
    """
    problem = problem_from_codeforces_row(row)  # validates the row first: malformed rows are errors, not skips
    statement = format_statement(row)
    if row.get("interactor"):
        problem.interactor = jury_file("interactor", str(row["interactor"]))
        problem.interactive = True
    elif problem.interactive:
        return None, SKIP_INTERACTIVE, "has an interaction_format but no interactor to judge it with"
    if not row.get("official_tests"):
        return (
            None,
            SKIP_NO_OFFICIAL_TESTS,
            (
                f"official_tests is {row.get('official_tests')!r}; judging on the "
                f"statement's {len(problem.samples)} example(s) alone would inflate "
                "pass@k"
            ),
        )
    references = row.get("reference_solutions") or {}
    if not isinstance(references, dict):
        raise ValueError(f"reference_solutions must be an object {{lang: source}}, got {references!r}")
    metadata = task_metadata(
        row["id"], row.get("title"), row.get("rating"), row.get("tags"), "open-r1", row.get("contest_id")
    )
    if "official_tests_complete" in row and row["official_tests_complete"] is not None:
        metadata["official_tests_complete"] = bool(row["official_tests_complete"])
    return (
        CodeforcesTask(problem, statement, {_LANG_KEYS.get(k, k): v for k, v in references.items()}, metadata=metadata),
        "",
        "",
    )


def _distinct_inputs(tests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``tests`` in order, each input kept once (its first occurrence)."""
    seen: set[str] = set()
    kept = []
    for given, expected in tests:
        if given not in seen:
            seen.add(given)
            kept.append((given, expected))
    return kept


def _paired_tests(tests: Any, key: str) -> list[tuple[str, str]]:
    """``[(input, output)]`` of a code_contests test struct ``{"input": [...], "output": [...]}``."""
    if not tests:
        return []
    if (
        not isinstance(tests, dict)
        or not isinstance(tests.get("input"), list)
        or not isinstance(tests.get("output"), list)
        or len(tests["input"]) != len(tests["output"])
    ):
        raise ValueError(f"{key}: expected {{'input': [...], 'output': [...]}} of equal lengths")
    return list(zip(tests["input"], tests["output"]))


def _code_contests_solutions(solutions: Any, key: str) -> list[tuple[str, str]]:
    """``[(lang, source)]`` of a code_contests solutions struct, keeping Python 3 and C++ only."""
    if not solutions:
        return []
    if not isinstance(solutions, dict) or len(solutions.get("language") or []) != len(solutions.get("solution") or []):
        raise ValueError(f"{key}: expected {{'language': [...], 'solution': [...]}} of equal lengths")
    return [
        (_CODE_CONTESTS_LANGS[int(lang)], code)
        for lang, code in zip(solutions["language"], solutions["solution"])
        if int(lang) in _CODE_CONTESTS_LANGS
    ]


def code_contests_io_mode(row: dict[str, Any]) -> str | None:
    """``"stdio"`` or ``"file"`` for a code_contests row's ``input_file`` / ``output_file``; ``None`` when they name
    files the judge cannot provide (only input.txt with output.txt is supported)."""
    names = (str(row.get("input_file") or "").strip(), str(row.get("output_file") or "").strip())
    if names[0].lower() in _STDIN_NAMES and names[1].lower() in _STDOUT_NAMES:
        return "stdio"
    if names == ("input.txt", "output.txt"):
        return "file"
    return None


def code_contests_row(row: dict[str, Any]) -> tuple[CodeforcesTask | None, str, str]:
    """``(task, "", "")``, or ``(None, reason, why)`` for a row whose file I/O the judge cannot provide.

    Judged as code_contests' own grader judges: on the public, private and generated tests, in that order, each
    input once."""
    public = _paired_tests(row.get("public_tests"), "public_tests")
    tests = _distinct_inputs(
        public
        + _paired_tests(row.get("private_tests"), "private_tests")
        + _paired_tests(row.get("generated_tests"), "generated_tests")
    )
    if not tests:
        raise ValueError(f"code_contests row {row.get('name')!r} has no public, private or generated tests")
    io_mode = code_contests_io_mode(row)
    if io_mode is None:
        return (
            None,
            SKIP_FILE_NAMES,
            (
                f"reads {row.get('input_file') or 'stdin'!r} and writes "
                f"{row.get('output_file') or 'stdout'!r}; the judge supports stdin/stdout "
                "or input.txt with output.txt only"
            ),
        )
    limit = row.get("time_limit") or {}
    time_limit = (
        float(limit.get("seconds") or 0) + float(limit.get("nanos") or 0) / 1e9
        if isinstance(limit, dict)
        else float(limit or 0)
    )
    memory_mb = float(row.get("memory_limit_bytes") or 0) / 2**20
    name = str(row["name"])
    problem = Problem(
        name,
        [TestCase(i.encode(), o.encode(), str(n)) for n, (i, o) in enumerate(tests, 1)],
        time_limit or 2.0,
        memory_mb or 256.0,
        io_mode=io_mode,
        samples=[TestCase(i.encode(), o.encode(), str(n)) for n, (i, o) in enumerate(public, 1)],
    )
    references: dict[str, str] = {}
    for lang, code in _code_contests_solutions(row.get("solutions"), "solutions"):
        references.setdefault(lang, code)
    wrong = [
        {"name": f"incorrect_{n}", "lang": lang, "code": code}
        for n, (lang, code) in enumerate(
            _code_contests_solutions(row.get("incorrect_solutions"), "incorrect_solutions"), 1
        )
    ]
    statement = compose_statement(
        name, problem.time_limit_s, problem.memory_limit_mb, str(row["description"]), io_mode=io_mode
    )
    metadata = task_metadata(
        name, name, row.get("cf_rating"), row.get("cf_tags"), "code_contests", row.get("cf_contest_id")
    )
    return CodeforcesTask(problem, statement, references, wrong, metadata), "", ""


class _StringsOnly(pickle.Unpickler):
    """Unpickles plain values only: every class or function lookup (how a pickle runs code) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing {module}.{name}: LiveCodeBench test cases are a pickled string")


def livecodebench_tests(value: Any, key: str) -> list[dict[str, Any]]:
    """LiveCodeBench test cases from JSON text, or base64(zlib(pickle(JSON text))) as ``code_generation_lite``
    ships ``private_test_cases``."""
    if isinstance(value, list):
        return value
    text = str(value or "").strip()
    if not text:
        return []
    if text[0] != "[":
        try:
            text = _StringsOnly(io.BytesIO(zlib.decompress(base64.b64decode(text)))).load()
        except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
            raise ValueError(f"{key}: neither JSON nor base64/zlib/pickle-encoded JSON ({exc})") from None
    tests = json.loads(text)
    if not isinstance(tests, list) or not all(isinstance(t, dict) and "input" in t and "output" in t for t in tests):
        raise ValueError(f"{key}: expected a list of {{input, output, testtype}}")
    return tests


def livecodebench_task(
    row: dict[str, Any], time_limit_s: float = 2.0, memory_limit_mb: float = 256.0
) -> CodeforcesTask | None:
    """A task from a LiveCodeBench code-generation row; ``None`` when its tests are functional (LeetCode-style).

    Judged as LiveCodeBench grades: on the public then the private tests, each input once. The rows carry no
    limits: ``time_limit_s`` and ``memory_limit_mb`` apply.
    """
    public = livecodebench_tests(row.get("public_test_cases"), "public_test_cases")
    private = livecodebench_tests(row.get("private_test_cases"), "private_test_cases")
    if any(t.get("testtype", "stdin") != "stdin" for t in public + private):
        return None
    tests = _distinct_inputs([(str(t["input"]), str(t["output"])) for t in public + private])
    if not tests:
        raise ValueError(f"LiveCodeBench row {row.get('question_id')!r} has no test cases")
    identifier = str(row.get("question_id") or row["question_title"])

    def cases(items: list[tuple[str, str]]) -> list[Any]:
        return [TestCase(given.encode(), expected.encode(), str(n)) for n, (given, expected) in enumerate(items, 1)]

    problem = Problem(
        identifier,
        cases(tests),
        time_limit_s,
        memory_limit_mb,
        samples=cases([(str(t["input"]), str(t["output"])) for t in public]),
    )
    statement = compose_statement(
        str(row["question_title"]), time_limit_s, memory_limit_mb, str(row["question_content"])
    )
    metadata = task_metadata(identifier, row.get("question_title"), None, [], "livecodebench", row.get("contest_id"))
    metadata.update(
        platform=row.get("platform"),
        difficulty=row.get("difficulty"),
        contest_date=str(row.get("contest_date") or "") or None,
    )
    return CodeforcesTask(problem, statement, metadata=metadata)


# Checked in this order: each schema's distinctive fields (LiveCodeBench rows also have a contest_id).
ROW_SCHEMAS = {
    "livecodebench": ("question_content", "public_test_cases"),
    "code_contests": ("public_tests", "private_tests"),  # open-r1 rows have an int generated_tests
    "open-r1/codeforces": ("official_tests", "examples", "id"),
}


def row_schema(row: dict[str, Any]) -> str:
    """Which public schema ``row`` is in (by its fields); ValueError listing the schemas' fields otherwise."""
    for schema, keys in ROW_SCHEMAS.items():
        if any(key in row for key in keys):
            return schema
    expected = "; ".join(f"{name}: {', '.join(keys)}" for name, keys in ROW_SCHEMAS.items())
    raise ValueError(f"a row in no known schema (fields {sorted(row)[:12]}); expected one of: {expected}")


def judged_row(row: Any) -> tuple[CodeforcesTask | None, str, str]:
    """``(task, "", "")``, or ``(None, reason, line)`` for a row skipped: ``line`` names the row and says why it
    cannot be judged here; ValueError for invalid rows."""
    if not isinstance(row, dict):
        raise ValueError(
            f"expected an object in the open-r1/codeforces, code_contests or LiveCodeBench schema, "
            f"got {type(row).__name__}"
        )
    schema = row_schema(row)
    if schema == "code_contests":
        task, reason, why = code_contests_row(row)
        name = row.get("name")
    elif schema == "livecodebench":
        task = livecodebench_task(row)
        reason, why = (
            ("", "")
            if task is not None
            else (SKIP_FUNCTIONAL, "its tests call a function (testtype 'functional'), not stdin/stdout")
        )
        name = row.get("question_id") or row.get("question_title")
    else:
        task, reason, why = open_r1_row(row)
        name = row.get("id")
    return task, reason, (f"{schema} row {str(name)!r}: {reason} ({why})" if task is None else "")


def read_rows_file(path: Path) -> ProblemSet:
    """The judgeable tasks of a .jsonl/.json/.parquet file of rows; errors name the file and the row, rows skipped
    are counted (``skipped``) and named (``skipped_rows``)."""
    existing_file(
        path,
        "codeforces problems file",
        "pass a .jsonl/.json/.parquet file of open-r1/codeforces, "
        "code_contests or LiveCodeBench rows, a problem folder, or 'builtin'",
    )
    problem_set = ProblemSet([])
    for number, row in enumerate(read_data_file(path), start=1):
        try:
            task, reason, line = judged_row(row)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: row {number}: {exc}") from None
        if task is None:
            problem_set.skipped[reason] += 1
            problem_set.skipped_rows.append(f"row {number}: {line}")
        else:
            problem_set.tasks.append(task)
    return problem_set


# ----------------------------------------------------------------------------------------------- folders


def package_task(package: Any) -> CodeforcesTask:
    """A task from a ``ProblemPackage`` (``agentgspo.sandboxes.judge.formats``): the statement composed from its
    title, limits, text, examples and note; its shipped solutions; metadata with ``source`` its format's name."""
    problem = package.problem
    statement = compose_statement(
        package.title,
        problem.time_limit_s,
        problem.memory_limit_mb,
        package.statement,
        package.examples,
        package.note or None,
        problem.io_mode,
    )
    metadata = task_metadata(package.id, package.title, package.rating, package.tags, package.format)
    return CodeforcesTask(problem, statement, dict(package.references), list(package.wrong), metadata)


def _is_set_folder(path: Path) -> bool:
    """A problem-set folder (``agentgspo.envs.problemset``): problem.json with ``gen.py``, hidden tests generated."""
    return (path / "problem.json").is_file() and (path / "gen.py").is_file()


def read_folder(path: Path) -> ProblemSet:
    """Tasks of a problem folder in any registered format (``agentgspo.sandboxes.judge.formats``: problem.json,
    problem.yaml, problem.xml...), of a problem-set folder, or of a folder of such folders."""
    if _is_set_folder(path):  # before the own format: the same problem.json, but tests generated by gen.py
        return ProblemSet([set_problem_task(load_set_problem(path))])
    if format_of(path) is not None:
        return ProblemSet([package_task(load_any_package(path))])
    children = problem_folders(path)
    if not children:
        raise ValueError(
            f"{path}: not a problem folder (none of {expected_markers()}) and holds none; pass a "
            "problem folder, a folder of them, or a rows file"
        )
    problem_set = ProblemSet([])
    for child in children:
        problem_set.tasks.extend(read_folder(child).tasks)
    return problem_set


def read_tasks(path: Path) -> ProblemSet:
    """The tasks at ``path`` (a rows file or a folder, see the module docstring); never empty."""
    problem_set = read_folder(path) if path.is_dir() else read_rows_file(path)
    if not problem_set.tasks:
        skipped = ", ".join(f"{n} {reason}" for reason, n in problem_set.skipped.items()) or "none"
        rows = problem_set.skipped_rows
        named = "; ".join(rows[:3]) + (f"; and {len(rows) - 3} more" if len(rows) > 3 else "")
        raise ValueError(f"{path}: no judgeable problems (skipped: {skipped})" + (f": {named}" if named else ""))
    return problem_set


def set_problem_task(set_problem: Any) -> CodeforcesTask:
    """A task from a problem of the project's problem set (``agentgspo.envs.problemset.SetProblem``)."""
    problem = set_problem.problem
    statement = compose_statement(
        set_problem.title, problem.time_limit_s, problem.memory_limit_mb, set_problem.statement
    )
    references = {_LANG_KEYS.get(lang, lang): code for lang, code in set_problem.references.items()}
    wrong = [
        {"name": w.name, "lang": _LANG_KEYS.get(w.lang, w.lang), "code": w.source, "kind": w.kind}
        for w in set_problem.wrong
    ]
    metadata = task_metadata(set_problem.slug, set_problem.title, set_problem.rating, set_problem.tags, "problemset")
    return CodeforcesTask(problem, statement, references, wrong, metadata)


def read_problemset(path: Path | None = None) -> ProblemSet:
    """The project's problem set (``envs/data/problemset/`` by default) through ``agentgspo.envs.problemset``:
    hidden tests generated and answered by the reference once, then cached."""
    return ProblemSet([set_problem_task(p) for p in load_problemset(path)])
