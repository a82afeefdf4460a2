"""Problem formats: the project's own on-disk format, ICPC/Kattis packages, and open-r1/codeforces rows.

Own format (documented in docs/problem_format.md)::

    PROBLEM/
      problem.json      {"name", "time_limit_s", "memory_limit_mb", "checker", "interactor", "io_mode"}
      statement.md      optional
      tests/NAME.in     input; NAME.ans: expected answer (not needed for interactive problems)
      checker.py / interactor.py   optional jury programs, named relative to PROBLEM in problem.json
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..results import JudgeResult, Limits
from .checkers import PROGRAM_CHECKERS, IcpcDefaultChecker
from .core import TestCase, judge


@dataclass
class Problem:
    """A judgeable problem: tests plus how to judge them.

    checker: ``tokens`` | ``float:EPS`` | ``icpc[:FLAGS]`` | ``testlib:PATH`` | ``openr1:PATH`` | ``kattis:PATH``;
    interactor: path or None; io_mode: "stdio" or "file" (input.txt/output.txt); samples: the statement's examples
    (also in tests when the source format says so); interactive without interactor means the problem cannot be
    judged here.
    """

    name: str
    tests: list[TestCase]
    time_limit_s: float = 2.0
    memory_limit_mb: float = 256.0
    checker: str = "tokens"
    interactor: str | None = None
    io_mode: str = "stdio"
    statement: str = ""
    samples: list[TestCase] = field(default_factory=list)
    interactive: bool = False
    metadata: dict = field(default_factory=dict)

    def limits(self, **overrides) -> Limits:
        """The problem's Limits (keyword overrides allowed, e.g. ``output_limit_mb=16``)."""
        return Limits(**{"time_limit_s": self.time_limit_s, "memory_limit_mb": self.memory_limit_mb, **overrides})


def _natural_key(path: Path):
    return [[int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)] for name in path.parts]


def read_tests_dir(directory: str | os.PathLike, require_answers: bool = True, recursive: bool = False) -> list[TestCase]:
    """Read ``NAME.in`` / ``NAME.ans`` pairs (natural order: 2 before 10). Errors name the file and the fix."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"tests folder {str(directory)!r} does not exist or is not a folder")
    inputs = sorted(directory.rglob("*.in") if recursive else directory.glob("*.in"), key=_natural_key)
    if not inputs:
        raise ValueError(f"tests folder {str(directory)!r} holds no NAME.in files (expected NAME.in / NAME.ans pairs)")
    tests = []
    for path in inputs:
        answer = path.with_suffix(".ans")
        if not answer.exists():
            if require_answers:
                raise ValueError(f"test input {str(path)!r} has no answer file {answer.name!r}: add the expected "
                                 f"output as {str(answer)!r} (or pass an interactor for interactive problems)")
            data = b""
        else:
            data = answer.read_bytes()
        name = str(path.relative_to(directory).with_suffix(""))
        tests.append(TestCase(path.read_bytes(), data, name))
    answers = directory.rglob("*.ans") if recursive else directory.glob("*.ans")
    orphans = [str(p.relative_to(directory)) for p in answers if not p.with_suffix(".in").exists()]
    if orphans:
        raise ValueError(f"answer files without input in {str(directory)!r}: {orphans[:5]} (add the NAME.in files)")
    return tests


class ProblemJson(BaseModel):
    """Schema of ``problem.json`` in the project's own format."""

    model_config = ConfigDict(extra="forbid")
    name: str
    time_limit_s: float = 2.0
    memory_limit_mb: float = 256.0
    checker: str = "tokens"
    interactor: str | None = None
    io_mode: Literal["stdio", "file"] = "stdio"


def load_problem(directory: str | os.PathLike) -> Problem:
    """Load a problem in the project's own format (see the module docstring); ValueError names the bad field."""
    directory = Path(directory)
    meta_path = directory / "problem.json"
    if not meta_path.exists():
        raise ValueError(f"{str(directory)!r} is not a problem folder: {meta_path.name} is missing "
                         "(for an ICPC/Kattis package with problem.yaml use load_kattis_problem)")
    try:
        meta = ProblemJson.model_validate_json(meta_path.read_text())
    except ValidationError as exc:
        raise ValueError(f"invalid {meta_path}: {exc}") from None
    checker = meta.checker
    kind, _, arg = checker.partition(":")
    if kind in PROGRAM_CHECKERS and arg and not os.path.isabs(arg):
        checker = f"{kind}:{directory / arg}"
    interactor = str(directory / meta.interactor) if meta.interactor else None
    statement = (directory / "statement.md").read_text() if (directory / "statement.md").exists() else ""
    tests = read_tests_dir(directory / "tests", require_answers=interactor is None)
    return Problem(meta.name, tests, meta.time_limit_s, meta.memory_limit_mb, checker, interactor, meta.io_mode,
                   statement, interactive=interactor is not None)


def _kattis_checker(directory: Path, config: dict) -> str:
    # output_validators/NAME/ in the legacy format, output_validator/ in the 2023-07 one
    validators = next((directory / d for d in ("output_validators", "output_validator") if (directory / d).is_dir()),
                      directory / "output_validators")
    programs = sorted(p for p in validators.rglob("*") if p.is_file()) if validators.is_dir() else []
    if not programs and "custom" in str(config.get("validation", "")):
        raise ValueError(f"{directory / 'problem.yaml'}: validation is custom but {validators} holds no output "
                         "validator: add it there (a single-file Python validator)")
    if programs:
        python = [p for p in programs if p.suffix == ".py"]
        if not python:
            raise ValueError(f"{validators}: only single-file Python output validators are supported; found "
                             f"{[p.name for p in programs][:5]}")
        return f"kattis:{python[0]}"
    flags = " ".join(str(config.get("validator_flags") or "").split())
    try:
        IcpcDefaultChecker.from_flags(flags)  # refuse bad flags at load time, naming the file
    except ValueError as exc:
        raise ValueError(f"{directory / 'problem.yaml'}: {exc}") from None
    return f"icpc:{flags}" if flags else "icpc"


def load_kattis_problem(directory: str | os.PathLike) -> Problem:
    """Load an ICPC/Kattis package: ``problem.yaml``, ``data/sample`` and ``data/secret`` (``.in``/``.ans``),
    ``output_validators/`` (a Python validator run with the Kattis protocol) or the default validator with the
    ``validator_flags`` (checker ``icpc:FLAGS``: case-insensitive tokens unless ``case_sensitive``, tolerances)."""
    import yaml

    directory = Path(directory)
    config_path = directory / "problem.yaml"
    if not config_path.exists():
        raise ValueError(f"{str(directory)!r} is not a Kattis package: problem.yaml is missing")
    config = yaml.safe_load(config_path.read_text()) or {}
    if not isinstance(config, dict):
        raise ValueError(f"{config_path}: expected a mapping, got {type(config).__name__}")
    interactive = any("interactive" in str(config.get(key, "")) for key in ("type", "validation"))
    if interactive:
        raise ValueError(f"{config_path}: Kattis interactive problems are not supported (their validators use "
                         "the Kattis interaction protocol); convert them to the own format with an interactor")
    limits = config.get("limits") or {}
    time_limit = float(limits.get("time_limit", limits.get("time", 0)) or 0)
    if not time_limit and (directory / ".timelimit").exists():
        time_limit = float((directory / ".timelimit").read_text().split()[0])
    samples = read_tests_dir(directory / "data" / "sample") if (directory / "data" / "sample").is_dir() else []
    secret = read_tests_dir(directory / "data" / "secret", recursive=True)
    for case in samples:
        case.name = f"sample/{case.name}"
    for case in secret:
        case.name = f"secret/{case.name}"
    statement = ""
    for candidate in sorted((directory / "problem_statement").glob("problem*.md")) if (directory / "problem_statement").is_dir() else []:
        statement = candidate.read_text()
        break
    return Problem(str(config.get("name") or directory.name), samples + secret, time_limit or 2.0,
                   float(limits.get("memory", 256)), _kattis_checker(directory, config), statement=statement,
                   samples=samples, metadata={"source": "kattis", "config": config})


def _checker_cache() -> Path:
    base = os.environ.get("AGENTGSPO_CACHE") or os.path.join(os.path.expanduser("~/.cache"), "agentgspo")
    return Path(base) / "openr1-checkers"


def problem_from_codeforces_row(row: dict, prefer_official: bool = True) -> Problem:
    """A Problem from one open-r1/codeforces row (the Hugging Face dataset's schema, see docs/problem_format.md).

    Tests: ``official_tests`` when present and ``official_tests_complete`` (or ``prefer_official``), else the
    statement ``examples``. ``generated_checker`` (Python) becomes an ``openr1:`` checker cached on disk;
    ``input_mode == "file"`` selects input.txt/output.txt. Interactive rows carry no interactor, so they are
    returned with ``interactive=True`` and cannot be judged here.
    """
    missing = [k for k in ("id", "time_limit", "memory_limit") if k not in row]
    if missing:
        raise ValueError(f"not an open-r1/codeforces row: missing fields {missing}")
    lists = {}
    for key in ("examples", "official_tests"):
        try:
            lists[key] = [TestCase.coerce(t, i) for i, t in enumerate(row.get(key) or [])]
        except ValueError as exc:
            raise ValueError(f"codeforces row {row['id']!r}, {key}: {exc}") from None
    examples, official = lists["examples"], lists["official_tests"]
    use_official = official and (row.get("official_tests_complete") or prefer_official)
    tests = official if use_official else examples
    if not tests:
        raise ValueError(f"codeforces row {row['id']!r} has neither official_tests nor examples")
    checker = "tokens"
    if row.get("generated_checker"):
        source = row["generated_checker"]
        path = _checker_cache() / f"{hashlib.sha256(source.encode()).hexdigest()[:16]}.py"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(source)
            os.replace(tmp, path)
        checker = f"openr1:{path}"
    statement = "\n\n".join(str(row.get(k) or "") for k in ("description", "input_format", "output_format",
                                                             "interaction_format", "note") if row.get(k))
    return Problem(
        name=str(row["id"]), tests=tests, time_limit_s=float(row["time_limit"] or 2.0),
        memory_limit_mb=float(row["memory_limit"] or 256.0), checker=checker,
        io_mode="file" if row.get("input_mode") == "file" else "stdio", statement=statement, samples=examples,
        interactive=bool(row.get("interaction_format")),
        metadata={k: row.get(k) for k in ("contest_id", "index", "title", "rating", "tags")},
    )


def judge_problem(problem: Problem, source: str, lang: str = "py", *, backend="local",
                  stop_on_failure: bool = False, limits: Limits | None = None) -> JudgeResult:
    """Judge ``source`` on every test of ``problem`` with its checker, interactor, limits and io mode."""
    if problem.interactive and problem.interactor is None:
        raise ValueError(f"problem {problem.name!r} is interactive but has no interactor to judge it with")
    return judge(source, problem.tests, lang=lang, checker=problem.checker, interactor=problem.interactor,
                 limits=limits or problem.limits(), stop_on_failure=stop_on_failure, io_mode=problem.io_mode,
                 backend=backend)

