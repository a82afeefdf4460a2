"""Judging a loaded ``Problem``, and the loaders of every format in one import (a facade over ``formats/``).

    formats/registry.py    the folder formats' registry: ``load_any_problem(DIR)`` picks the loader by marker file
    formats/own_format.py  the project's own folders (problem.json, tests/)        ``load_problem``
    formats/kattis.py      ICPC / Kattis packages (problem.yaml, data/)           ``load_kattis_problem``
    formats/polygon.py     Polygon packages (problem.xml, tests/)                 ``load_polygon_problem``
    formats/openr1.py      open-r1/codeforces dataset rows                        ``problem_from_codeforces_row``
    testdata.py            ``Problem`` and ``read_tests_dir``, shared by them

``judge_problem`` judges a problem of any of them, in the language ``judged_language`` names: a Kattis package's
as Kattis runs it (Python 3 under PyPy), any other's as given (Codeforces-style problems offer CPython, ``python3``,
and PyPy, ``pypy3``).
"""

from __future__ import annotations

from ..results import JudgeResult, Limits
from .core import judge
from .formats import FORMATS, load_any_package, load_any_problem
from .formats.kattis import KattisPackage, judge_kattis, load_kattis_problem
from .formats.openr1 import problem_from_codeforces_row
from .formats.own_format import ProblemJson, load_problem
from .languages import kattis_language, normalize_language
from .testdata import Problem, read_tests_dir


def judged_language(problem: Problem, lang: str) -> str:
    """The language ``judge_problem`` judges a ``lang`` submission to ``problem`` in: on a Kattis package Kattis'
    (``languages.kattis_language``: ``python3`` -> ``pypy3``), else ``lang`` itself; ValueError names the supported
    languages."""
    if isinstance(problem.metadata.get("package"), KattisPackage):
        return kattis_language(lang)
    return normalize_language(lang)


def judge_problem(
    problem: Problem,
    source: str,
    lang: str = "py",
    *,
    backend="local",
    stop_on_failure: bool = False,
    limits: Limits | None = None,
) -> JudgeResult:
    """Judge ``source`` on every test of ``problem`` with its checker, interactor, limits and io mode, in
    ``judged_language(problem, lang)``.

    A Kattis package is judged as problemtools does (groups, grading, its validator: ``kattis.judge_kattis``)
    with ``limits``' time, memory and output limits; ``stop_on_failure`` does not apply there (its
    testdata.yaml's on_reject decides)."""
    lang = judged_language(problem, lang)
    package = problem.metadata.get("package")
    if isinstance(package, KattisPackage):
        chosen = limits or problem.limits(output_limit_mb=package.output_limit_mb)
        return judge_kattis(
            package,
            source,
            lang,
            backend=backend,
            time_limit_s=chosen.time_limit_s,
            memory_limit_mb=chosen.memory_limit_mb,
            output_limit_mb=chosen.output_limit_mb,
        )
    if problem.interactive and problem.interactor is None:
        raise ValueError(f"problem {problem.name!r} is interactive but has no interactor to judge it with")
    return judge(
        source,
        problem.tests,
        lang=lang,
        checker=problem.checker,
        interactor=problem.interactor,
        limits=limits or problem.limits(),
        stop_on_failure=stop_on_failure,
        io_mode=problem.io_mode,
        backend=backend,
    )


__all__ = [
    "FORMATS",
    "Problem",
    "ProblemJson",
    "judge_problem",
    "judged_language",
    "load_any_package",
    "load_any_problem",
    "load_kattis_problem",
    "load_problem",
    "problem_from_codeforces_row",
    "read_tests_dir",
]
