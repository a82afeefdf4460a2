"""open-r1/codeforces dataset rows (Hugging Face, CC-BY-4.0) as judgeable problems; schema in docs/problem_format.md.

A row format, not a folder format: rows are recognised by their fields where rows files are read
(``envs/codeforces_sources.py``, ``ROW_SCHEMAS``, beside code_contests and LiveCodeBench rows), so this module is
not in the folder registry (``registry.py``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from agentgspo.core.paths import cache_root

from ...submission import TestCase
from ..testdata import Problem

__all__ = ["problem_from_codeforces_row"]


def _checker_cache() -> Path:
    return cache_root() / "openr1-checkers"


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
    statement = "\n\n".join(
        str(row.get(k) or "")
        for k in ("description", "input_format", "output_format", "interaction_format", "note")
        if row.get(k)
    )
    return Problem(
        name=str(row["id"]),
        tests=tests,
        time_limit_s=float(row["time_limit"] or 2.0),
        memory_limit_mb=float(row["memory_limit"] or 256.0),
        checker=checker,
        io_mode="file" if row.get("input_mode") == "file" else "stdio",
        statement=statement,
        samples=examples,
        interactive=bool(row.get("interaction_format")),
        metadata={k: row.get(k) for k in ("contest_id", "index", "title", "rating", "tags")},
    )
