"""The judgeable ``Problem`` every package format loads into, and the reader of ``NAME.in`` / ``NAME.ans`` folders."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..results import Limits
from ..submission import TestCase

__all__ = ["Problem", "read_tests_dir"]


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


def read_tests_dir(
    directory: str | os.PathLike, require_answers: bool = True, recursive: bool = False
) -> list[TestCase]:
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
                raise ValueError(
                    f"test input {str(path)!r} has no answer file {answer.name!r}: add the expected "
                    f"output as {str(answer)!r} (or pass an interactor for interactive problems)"
                )
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
