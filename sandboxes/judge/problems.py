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

import dataclasses
import math
import os
from collections.abc import Sequence

from ..results import JudgeResult, Limits
from .calibration import Calibration, Submission, calibrate, content_digest, machine_fingerprint, machine_slowdown
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
    time_limit_scale: float = 1.0,
) -> JudgeResult:
    """Judge ``source`` on every test of ``problem`` with its checker, interactor, limits and io mode, in
    ``judged_language(problem, lang)``.

    A Kattis package is judged as problemtools does (groups, grading, its validator: ``kattis.judge_kattis``)
    with ``limits``' time, memory and output limits; ``stop_on_failure`` does not apply there (its
    testdata.yaml's on_reject decides). ``time_limit_scale`` multiplies the time limit (``limits``' or the
    problem's; the wall-clock guard with it): 0.5 judges as a machine twice as slow would, 2 as one twice as fast.
    The result records the limit and the factor (``time_limit_s``, ``time_limit_scale``)."""
    if not (math.isfinite(time_limit_scale) and time_limit_scale > 0):
        raise ValueError(f"time_limit_scale: expected a finite number > 0, got {time_limit_scale!r}")
    lang = judged_language(problem, lang)
    package = problem.metadata.get("package")
    if isinstance(package, KattisPackage):
        chosen = scaled(limits or problem.limits(output_limit_mb=package.output_limit_mb), time_limit_scale)
        result = judge_kattis(
            package,
            source,
            lang,
            backend=backend,
            time_limit_s=chosen.time_limit_s,
            memory_limit_mb=chosen.memory_limit_mb,
            output_limit_mb=chosen.output_limit_mb,
        )
    else:
        if problem.interactive and problem.interactor is None:
            raise ValueError(f"problem {problem.name!r} is interactive but has no interactor to judge it with")
        chosen = scaled(limits or problem.limits(), time_limit_scale)
        result = judge(
            source,
            problem.tests,
            lang=lang,
            checker=problem.checker,
            interactor=problem.interactor,
            limits=chosen,
            stop_on_failure=stop_on_failure,
            io_mode=problem.io_mode,
            backend=backend,
        )
        result.time_limit_s = chosen.time_limit_s
    result.time_limit_scale *= time_limit_scale
    return result


def scaled(limits: Limits, factor: float) -> Limits:
    """``limits`` with the time limit, and a wall-clock guard set explicitly, multiplied by ``factor``."""
    if factor == 1.0:
        return limits
    wall = None if limits.wall_limit_s is None else limits.wall_limit_s * factor
    return dataclasses.replace(limits, time_limit_s=limits.time_limit_s * factor, wall_limit_s=wall)


def calibrate_problem(
    directory: str | os.PathLike,
    problem,
    accepted: Sequence[Submission],
    too_slow: Sequence[Submission],
    backend="local",
    **options,
) -> Calibration:
    """Calibrate the fixed limit of a ``Problem`` loaded from the package folder ``directory`` (a Polygon
    package: ``polygon.polygon_submissions``), each run judged by ``judge_problem`` up to its first failing test."""

    def run(submission: Submission, limit: float) -> JudgeResult:
        return judge_problem(
            problem,
            submission.source,
            submission.lang,
            backend=backend,
            stop_on_failure=True,
            limits=problem.limits(time_limit_s=limit),
        )

    return calibrate(
        str(directory),
        problem.time_limit_s,
        accepted,
        too_slow,
        run,
        content=content_digest(directory),
        machine=machine_fingerprint(backend),
        slowdown=lambda: machine_slowdown(backend, [s.lang for s in [*accepted, *too_slow]]),
        **options,
    )


__all__ = [
    "calibrate_problem",
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
