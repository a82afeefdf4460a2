"""Problem formats, one module each, and judging a loaded ``Problem``.

    own_format.py   the project's own folders (problem.json, tests/)          ``load_problem``
    kattis.py       ICPC / Kattis packages (problem.yaml, data/)             ``load_kattis_problem``
    openr1.py       open-r1/codeforces dataset rows                          ``problem_from_codeforces_row``
    testdata.py     ``Problem`` and ``read_tests_dir``, shared by them

``load_any_problem(DIR)`` picks the loader from the folder's marker file; ``judge_problem`` judges any of them.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..results import JudgeResult, Limits
from .core import judge
from .kattis import KattisPackage, judge_kattis, load_kattis_problem
from .openr1 import problem_from_codeforces_row
from .own_format import ProblemJson, load_problem
from .testdata import Problem, read_tests_dir

#: marker file -> (format, loader)
FORMATS = {"problem.json": ("own", load_problem), "problem.yaml": ("kattis", load_kattis_problem)}


def load_any_problem(directory: str | os.PathLike, **options) -> Problem:
    """Load the problem folder ``directory`` in whichever format its marker file names (problem.json: the
    project's own; problem.yaml: ICPC/Kattis; problem.xml: Polygon, when that loader is installed).
    ``options`` go to the loader. ValueError names what is missing."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"problem folder {str(directory)!r} does not exist or is not a folder")
    for marker, (_, loader) in FORMATS.items():
        if (directory / marker).is_file():
            return loader(directory, **options)
    if (directory / "problem.xml").is_file():
        try:
            from .polygon import load_polygon_problem
        except ImportError:
            raise ValueError(f"{directory}: a Polygon package (problem.xml), which this build cannot load") from None
        return load_polygon_problem(directory, **options)
    hint = " (it looks like a tests folder: pass it as --tests)" if any(directory.glob("*.in")) else ""
    raise ValueError(f"{str(directory)!r} is not a problem folder: expected problem.json (the project's format), "
                     f"problem.yaml (ICPC/Kattis) or problem.xml (Polygon){hint}")


def judge_problem(problem: Problem, source: str, lang: str = "py", *, backend="local",
                  stop_on_failure: bool = False, limits: Limits | None = None) -> JudgeResult:
    """Judge ``source`` on every test of ``problem`` with its checker, interactor, limits and io mode.

    A Kattis package is judged as problemtools does (groups, grading, its validator: ``kattis.judge_kattis``)
    with ``limits``' time, memory and output limits; ``stop_on_failure`` does not apply there (its
    testdata.yaml's on_reject decides)."""
    package = problem.metadata.get("package")
    if isinstance(package, KattisPackage):
        chosen = limits or problem.limits(output_limit_mb=package.output_limit_mb)
        return judge_kattis(package, source, lang, backend=backend, time_limit_s=chosen.time_limit_s,
                            memory_limit_mb=chosen.memory_limit_mb, output_limit_mb=chosen.output_limit_mb)
    if problem.interactive and problem.interactor is None:
        raise ValueError(f"problem {problem.name!r} is interactive but has no interactor to judge it with")
    return judge(source, problem.tests, lang=lang, checker=problem.checker, interactor=problem.interactor,
                 limits=limits or problem.limits(), stop_on_failure=stop_on_failure, io_mode=problem.io_mode,
                 backend=backend)


__all__ = ["FORMATS", "Problem", "ProblemJson", "judge_problem", "load_any_problem", "load_kattis_problem",
           "load_problem", "problem_from_codeforces_row", "read_tests_dir"]
