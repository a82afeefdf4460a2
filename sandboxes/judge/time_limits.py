"""Where a problem package keeps its time limit, read in one documented order, and the timing of submissions (in
parallel) for the packages that keep none.

A Kattis/ICPC or DOMjudge package (``problem.yaml``), first source present wins:

  1. ``problem.yaml`` ``limits.time_limit`` (seconds): the field of the 2023-07 package format. Both platforms
     honour it: DOMjudge's importer reads it last, so it overrides domjudge-problem.ini and .timelimit there too.
  2. ``.timelimit`` (seconds, the file's first word): what Kattis writes when it installs a package, the limit
     problemtools judges with.
  3. ``domjudge-problem.ini`` ``timelimit`` (seconds; DOMjudge exports ``timelimit='2'``): DOMjudge's own file.
     DOMjudge's importer takes it before ``.timelimit`` but refuses a package whose ``.timelimit`` differs from the
     limit it ends with, so on every package DOMjudge accepts ``.timelimit`` already equals its limit; ranking
     ``.timelimit`` higher gives DOMjudge's limit wherever DOMjudge imports the package and Kattis's wherever the
     two disagree (problemtools never reads the ini).
  4. None of them: problemtools' rule, the slowest accepted submission's CPU time times ``ac_to_time_limit``
     (``formats/kattis.py``, ``time_limit_of``), its submissions timed by :func:`time_submissions`.

A lower source that disagrees with the one used is logged as a warning (it is not an error: Kattis ignores the ini).
A Polygon package has one place, ``problem.xml``'s ``<testset><time-limit>`` in milliseconds
(:func:`polygon_time_limit`). Each returns the source's name, which the judge reports with every verdict
(``JudgeResult.time_limit_source``).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .core import usable_cpus

__all__ = ["parse_domjudge_ini", "package_time_limit", "polygon_time_limit", "timing_workers", "time_submissions"]

logger = logging.getLogger(__name__)

PROBLEM_YAML, DOT_TIMELIMIT, DOMJUDGE_INI, PROBLEM_XML = (
    "problem.yaml",
    ".timelimit",
    "domjudge-problem.ini",
    "problem.xml",
)
#: the fixed sources of a Kattis/DOMjudge package, highest first (the module docstring says why)
PACKAGE_ORDER = (PROBLEM_YAML, DOT_TIMELIMIT, DOMJUDGE_INI)

T = TypeVar("T")
R = TypeVar("R")


def _seconds(value, where: str) -> float:
    try:
        if 0 < float(value) < math.inf:
            return float(value)
    except (TypeError, ValueError):
        pass
    raise ValueError(f"{where}: expected a positive number of seconds, got {value!r}")


_QUOTED = re.compile(r"""^(['"])(.*?)\1\s*(;.*)?$""")


def parse_domjudge_ini(text: str, where: str = DOMJUDGE_INI) -> dict[str, str]:
    """The ``key = value`` lines of a ``domjudge-problem.ini`` as PHP's ``parse_ini_string`` (DOMjudge's importer)
    reads them: values quoted with ``'`` or ``"`` or bare (a bare one ends at ``;``), ``;`` and ``#`` comment lines,
    ``[section]`` lines and blank lines skipped, a later key winning. DOMjudge's export writes ``timelimit='2'``,
    ``special_run='...'``, ``special_compare='...'``, ``color='...'``. ValueError names (``where``:LINE) a line that
    is none of these.

    >>> parse_domjudge_ini("timelimit='2'\\n; exported\\ncolor = \\"#ff0000\\" ; red\\nspecial_run = x ; y")
    {'timelimit': '2', 'color': '#ff0000', 'special_run': 'x'}
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in ";#" or (line.startswith("[") and line.endswith("]")):
            continue
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"{where}:{number}: expected a key=value line (as timelimit='2'), got {raw!r}")
        value = value.strip()
        quoted = _QUOTED.match(value)
        values[key.strip()] = quoted.group(2) if quoted else value.split(";", 1)[0].strip()
    return values


def _from_yaml(directory: Path, limits: dict) -> float | None:
    value = limits.get("time_limit")
    return None if value is None else _seconds(value, f"{directory / PROBLEM_YAML}: limits.time_limit")


def _from_dot_timelimit(directory: Path, limits: dict) -> float | None:
    path = directory / DOT_TIMELIMIT
    if not path.is_file():
        return None
    words = path.read_text(errors="replace").split()
    return _seconds(words[0] if words else "", str(path))


def _from_domjudge_ini(directory: Path, limits: dict) -> float | None:
    path = directory / DOMJUDGE_INI
    if not path.is_file():
        return None
    value = parse_domjudge_ini(path.read_text(errors="replace"), str(path)).get("timelimit")
    return None if value is None else _seconds(value, f"{path}: timelimit")


_READERS = {PROBLEM_YAML: _from_yaml, DOT_TIMELIMIT: _from_dot_timelimit, DOMJUDGE_INI: _from_domjudge_ini}


def package_time_limit(directory: str | Path, limits: dict | None = None) -> tuple[float | None, str]:
    """``(seconds, source)`` of a Kattis/DOMjudge package's fixed time limit, the first of ``PACKAGE_ORDER`` that
    the package has (``limits``: problem.yaml's ``limits`` mapping); ``(None, "")`` when it has none, and the
    limit must be computed from the accepted submissions. ValueError names the file of a malformed value in the
    source used; a lower source that is malformed or disagrees is only logged."""
    directory, limits = Path(directory), limits or {}
    chosen: tuple[float | None, str] = (None, "")
    for source in PACKAGE_ORDER:
        if chosen[0] is None:
            seconds = _READERS[source](directory, limits)
            if seconds is not None:
                chosen = (seconds, source)
            continue
        try:
            other = _READERS[source](directory, limits)
        except ValueError as exc:
            logger.warning(
                "%s: %s is unreadable and not used (%s gives the time limit): %s", directory, source, chosen[1], exc
            )
            continue
        if other is not None and not math.isclose(other, chosen[0], rel_tol=1e-9):
            logger.warning(
                "%s: %s says %g s, %s says %g s: using %s (the order is %s)",
                directory,
                chosen[1],
                chosen[0],
                source,
                other,
                chosen[1],
                " > ".join(PACKAGE_ORDER),
            )
    return chosen


def polygon_time_limit(text: str, where: str) -> tuple[float, str]:
    """``(seconds, "problem.xml")`` from the text of a Polygon testset's ``<time-limit>`` (milliseconds)."""
    return _seconds(text, f"{where}: <time-limit> (milliseconds)") / 1000, PROBLEM_XML


def timing_workers(count: int, max_workers: int | None = None) -> int:
    """How many submissions are timed at once: ``max_workers``, else the usable CPUs, never more than ``count``.

    Times are CPU times (``wait4`` per test), not wall times, and each submission's tests then share the CPUs
    among the submissions being judged (``core.batch_workers``), so no more test processes run than CPUs: on a
    2-core machine two submissions at once, one test each."""
    return max(1, min(count, max_workers or usable_cpus()))


def time_submissions(
    items: Sequence[T], run: Callable[[T], R], *, what: str, names: Sequence[str], max_workers: int | None = None
) -> list[R]:
    """``[run(item) for item in items]``, up to :func:`timing_workers` at once, in ``items``' order; logs (INFO)
    what is timed and how many at once, since this may take minutes (``what``: "accepted submissions of
    PACKAGE"; ``names``: one per item)."""
    workers = timing_workers(len(items), max_workers)
    logger.info(
        "timing %d %s (%s), %d at once (CPU time of each test; the result is cached)",
        len(items),
        what,
        ", ".join(names),
        workers,
    )
    if workers == 1:
        return [run(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentgspo-timing") as pool:
        return list(pool.map(run, items))
