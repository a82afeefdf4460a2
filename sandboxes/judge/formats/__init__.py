"""Problem formats in one place, with one registry (``registry.py``).

    registry.py       ``ProblemFormat``, ``ProblemPackage``, ``register_format``, ``load_any_problem``,
                      ``load_any_package``, ``format_of``: how a folder is recognised and loaded
    own_format.py     the project's own folders (problem.json, tests/, solutions/)          format ``own``
    kattis.py         ICPC / Kattis packages (problem.yaml, data/, submissions/)            format ``kattis``
                      (+ kattis_package.py, kattis_grading.py, kattis_interactor.py)
    polygon.py        Polygon packages (problem.xml, tests/, statements, solutions)         format ``polygon``
    openr1.py         open-r1/codeforces dataset rows (a row format, recognised where rows are read:
                      ``envs/codeforces_sources.py``)

A folder is in the first format below whose marker file it holds. Adding a format is one module that builds a
``ProblemFormat`` and one ``register_format`` line here (docs/problem_format.md, "Adding a format"); the judge CLI,
CodeForces-v0 and ``agentgspo eval`` then read it.
"""

from __future__ import annotations

from . import kattis, own_format, polygon
from .registry import (
    FORMATS,
    SUFFIX_LANGS,
    ProblemFormat,
    ProblemPackage,
    expected_markers,
    format_of,
    load_any_package,
    load_any_problem,
    problem_folders,
    register_format,
    solution_files,
    unregister_format,
)

register_format(own_format.FORMAT)
register_format(kattis.FORMAT)
register_format(polygon.FORMAT)

__all__ = [
    "FORMATS",
    "SUFFIX_LANGS",
    "ProblemFormat",
    "ProblemPackage",
    "expected_markers",
    "format_of",
    "load_any_package",
    "load_any_problem",
    "problem_folders",
    "register_format",
    "solution_files",
    "unregister_format",
]
