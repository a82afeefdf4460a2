"""The project's own problem format (documented in docs/problem_format.md)::

    PROBLEM/
      problem.json      {"name", "time_limit_s", "memory_limit_mb", "checker", "interactor", "io_mode",
                         optional "title", "rating", "tags"}
      statement.md      optional
      tests/NAME.in     input; NAME.ans: expected answer (not needed for interactive problems)
      checker.py / interactor.py   optional jury programs, named relative to PROBLEM in problem.json
      solutions/*.py|cpp   optional: shipped solutions; those named wrong* are rejected ones, the others accepted

Registered as the format ``own`` (marker ``problem.json``, see ``registry.py``).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError, field_validator

from ...submission import PROGRAM_CHECKERS
from ..testdata import Problem, read_tests_dir
from .registry import ProblemFormat, ProblemPackage, solution_files

__all__ = ["ProblemJson", "load_problem", "own_package"]


class ProblemJson(BaseModel):
    """Schema of ``problem.json`` in the project's own format."""

    model_config = ConfigDict(extra="forbid")
    name: str
    time_limit_s: float = 2.0
    memory_limit_mb: float = 256.0
    checker: str = "tokens"
    interactor: str | None = None
    io_mode: Literal["stdio", "file"] = "stdio"
    # optional metadata (Problem.metadata): a display title, a Codeforces-scale rating, Codeforces tag names
    title: str | None = None
    rating: StrictInt | None = None
    tags: list[StrictStr] = []

    @field_validator("rating")
    @classmethod
    def _rating_on_the_codeforces_scale(cls, rating: int | None) -> int | None:
        if rating is not None and not (800 <= rating <= 3500 and rating % 100 == 0):
            raise ValueError(f"rating must be a multiple of 100 in [800, 3500] (Codeforces scale), got {rating}")
        return rating


def _explain(error: ValidationError) -> str:
    """pydantic's errors, with an unknown key named as such and the field it was probably meant to be."""
    fields = list(ProblemJson.model_fields)
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "problem.json"
        if item["type"] == "extra_forbidden":
            close = difflib.get_close_matches(where, fields, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(fields)}"
            lines.append(f"unknown field {where!r}: {hint}")
        else:
            lines.append(f"{where}: {item['msg']}")
    return "; ".join(lines)


def load_problem(directory: str | os.PathLike) -> Problem:
    """Load a problem in the project's own format (see the module docstring); ValueError names the bad field."""
    directory = Path(directory)
    meta_path = directory / "problem.json"
    if not meta_path.exists():
        raise ValueError(
            f"{str(directory)!r} is not a problem folder: {meta_path.name} is missing "
            "(load_any_problem reads a folder in any registered format)"
        )
    text = meta_path.read_text()
    try:
        meta = ProblemJson.model_validate_json(text)
    except ValidationError as exc:
        raise ValueError(f"invalid {meta_path}: {_explain(exc)}") from None
    checker = meta.checker
    kind, _, arg = checker.partition(":")
    if kind in PROGRAM_CHECKERS and arg and not os.path.isabs(arg):
        checker = f"{kind}:{directory / arg}"
    interactor = str(directory / meta.interactor) if meta.interactor else None
    statement = (directory / "statement.md").read_text() if (directory / "statement.md").exists() else ""
    tests = read_tests_dir(directory / "tests", require_answers=interactor is None)
    metadata = {key: value for key in ("title", "rating", "tags") if (value := getattr(meta, key))}
    return Problem(
        meta.name,
        tests,
        meta.time_limit_s,
        meta.memory_limit_mb,
        checker,
        interactor,
        meta.io_mode,
        statement,
        interactive=interactor is not None,
        metadata=metadata,
    )


def own_package(directory: str | os.PathLike) -> ProblemPackage:
    """A problem in the project's format with what an env needs: ``statement.md``, the title, rating and tags of
    problem.json, and ``solutions/``: files named ``wrong*`` are wrong solutions, the others references."""
    directory = Path(directory)
    problem = load_problem(directory)
    references, wrong = {}, []
    for lang, path in solution_files(directory / "solutions"):
        if path.stem.startswith("wrong"):
            wrong.append({"name": path.name, "lang": lang, "code": path.read_text()})
        else:
            references.setdefault(lang, path.read_text())
    return ProblemPackage(
        problem,
        problem.statement,
        references=references,
        wrong=wrong,
        title=problem.metadata.get("title", ""),
        rating=problem.metadata.get("rating"),
        tags=list(problem.metadata.get("tags", [])),
    )


FORMAT = ProblemFormat(
    name="own",
    marker="problem.json",
    description="the project's format",
    load_problem=load_problem,
    load_package=own_package,
)
