"""A package's fixed time limit scaled to the machine that judges, from the package's own submissions (opt-in:
``judge_kattis(..., calibrate=True)``, ``agentgspo judge --problem DIR --calibrate``; never for the built-in
problem set, whose limits are already in reference-machine seconds, see docs/problem_format.md).

A package's limit (problem.yaml, .timelimit, domjudge-problem.ini, problem.xml) is CPU seconds of its jury's
machine. On a slower one every solution may TLE: on the 2-core AMD EPYC development machine one package's accepted
C++ solution needs 4.7 s under its 3 s ``.timelimit``. The rule, from the evidence the package ships (as
problemtools' own rule times the accepted submissions):

  1. Every accepted submission (Kattis ``submissions/accepted``, Polygon tags ``main``/``accepted``; Python and
     C++ only) is judged under a generous CPU limit (``PROBE_S``); each must be AC. ``a`` = the slowest CPU time
     of any test of any of them.
  2. ``scale = max(1, a * margin / fixed)``, rounded up to 0.01; ``margin`` (``MARGIN`` = 2, the 2023-07
     package format's default ``ac_to_time_limit``: the room problemtools' rule leaves the slowest accepted
     submission). The limit judged with is ``fixed * scale``: never below the package's own.
  3. Every too-slow submission (``submissions/time_limit_exceeded``, Polygon tag ``time-limit-exceeded``) is
     judged under that limit and must still be TLE; if one is not, the scaled limit no longer separates the
     accepted from the too-slow and the calibration is refused (:class:`CalibrationError`, naming the package,
     the submissions and their times). With no too-slow submission nothing can be checked (the record says so).

The submissions are timed up to the usable CPUs at once (``time_limits.time_submissions``; CPU times). The result
is cached under ``$AGENTGSPO_CACHE/time-limit-calibration/``, keyed by the package's content (every file), the
fixed limit, the margin and the machine (:func:`machine_fingerprint`: CPU model, usable CPUs, architecture,
Python version; through the remote backend, its endpoints), so it is measured once per package and machine;
a refusal is not cached. Measure on an idle machine: a load average above half the CPUs is logged as a warning.
Every verdict judged with a calibration records the factor (``JudgeResult.time_limit_scale``) and the limit
(``time_limit_s``): on a fleet of sandbox servers, the factor of each verdict is in the verdict.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..results import JudgeResult, Verdict
from .core import usable_cpus
from .time_limits import time_submissions

__all__ = [
    "CalibrationError",
    "Submission",
    "Calibration",
    "machine_fingerprint",
    "content_digest",
    "calibrate",
    "folder_submissions",
    "calibrate_kattis",
    "calibrate_problem",
]

logger = logging.getLogger(__name__)

MARGIN = 2.0
PROBE_S = 60.0  # CPU limit per test while timing the accepted submissions (as formats/kattis.py's rule)
CACHE_VERSION = 1


class CalibrationError(ValueError):
    """The package's submissions cannot calibrate its limit (the message names the package, submissions, times)."""


@dataclass(frozen=True)
class Submission:
    """A submission the package ships: ``name`` as shown in messages (``time_limit_exceeded/slow.cpp``)."""

    name: str
    source: str
    lang: str


@dataclass(frozen=True)
class Calibration:
    """A calibrated limit: ``time_limit_s = fixed_limit_s * scale`` on ``machine``.

    ``accepted_s``: each accepted submission's slowest test (CPU s); ``too_slow``: each too-slow submission's
    verdict under the scaled limit."""

    scale: float
    fixed_limit_s: float
    time_limit_s: float
    margin: float
    machine: str
    slowest_accepted: str
    slowest_accepted_s: float
    accepted_s: dict[str, float] = field(default_factory=dict)
    too_slow: dict[str, str] = field(default_factory=dict)
    load_average: float | None = None

    def describe(self) -> str:
        """One line for a log or a verdict's message."""
        checked = (
            f"{len(self.too_slow)} too-slow submission(s) still TLE"
            if self.too_slow
            else "no too-slow submission to check against"
        )
        return (
            f"time limit {self.fixed_limit_s:g} s x {self.scale:g} = {self.time_limit_s:g} s on {self.machine} "
            f"(slowest accepted {self.slowest_accepted}: {self.slowest_accepted_s:.3f} s CPU x margin "
            f"{self.margin:g}; {checked})"
        )


def machine_fingerprint(backend="local") -> str:
    """What a calibration is valid for: the CPU model and the usable CPUs (plus architecture and Python version)
    of this machine; for a remote backend (a sandbox with ``endpoints``) its endpoints, where the runs happen."""
    endpoints = getattr(backend, "endpoints", None)
    if endpoints is None and backend == "remote":
        from ..registry import get_sandbox

        endpoints = getattr(get_sandbox("remote"), "endpoints", None)
    if endpoints:
        return "remote " + ",".join(sorted(endpoints))
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    model = model or platform.processor() or "unknown CPU"
    return f"{model} x{usable_cpus()} ({platform.machine()}, Python {platform.python_version()})"


def content_digest(directory: str | os.PathLike) -> str:
    """SHA-256 (32 hex digits) of every file under ``directory``: relative names and contents, in sorted order."""
    directory = Path(directory)
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _slowest_test_s(result: JudgeResult) -> float:
    return max((t.time_s for t in result.tests if t.verdict != Verdict.SKIPPED), default=0.0)


def _cache_path(content: str, machine: str, fixed_limit_s: float, margin: float) -> Path:
    from .formats.kattis_package import cache_root

    key = hashlib.sha256(f"{CACHE_VERSION}\0{content}\0{machine}\0{fixed_limit_s!r}\0{margin!r}".encode())
    return cache_root() / "time-limit-calibration" / f"{key.hexdigest()[:32]}.json"


def calibrate(
    package: str,
    fixed_limit_s: float,
    accepted: Sequence[Submission],
    too_slow: Sequence[Submission],
    run: Callable[[Submission, float], JudgeResult],
    *,
    content: str,
    machine: str,
    margin: float = MARGIN,
    probe_s: float = PROBE_S,
    max_workers: int | None = None,
) -> Calibration:
    """Calibrate ``fixed_limit_s`` (see the module docstring), or read the cached calibration.

    ``package``: its name in messages; ``run(submission, time_limit_s)`` judges one submission on the package
    under that CPU limit; ``content``: a digest of the package's files (:func:`content_digest`); ``machine``: where
    ``run`` runs (:func:`machine_fingerprint`). CalibrationError (a ValueError) when there is no accepted
    submission, one is not AC, or a too-slow one is not TLE under the scaled limit."""
    if not margin >= 1:
        raise ValueError(f"calibration margin must be >= 1 (the room left above the slowest accepted), got {margin}")
    cache = _cache_path(content, machine, fixed_limit_s, margin)
    if cache.is_file():
        return Calibration(**json.loads(cache.read_text()))
    if not accepted:
        raise CalibrationError(
            f"{package}: no accepted Python or C++ submission to calibrate the time limit from; judge without "
            "calibration, or add one"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if load is not None and load > usable_cpus() / 2:
        logger.warning(
            "%s: calibrating on a busy machine (load average %.1f, %d CPUs): its times may be high, and the "
            "result is cached; calibrate on an idle machine",
            package,
            load,
            usable_cpus(),
        )

    def run_all(submissions: Sequence[Submission], limit: float, what: str) -> list[JudgeResult]:
        return time_submissions(
            submissions,
            lambda s: run(s, limit),
            what=f"{what} of {package} under a {limit:g} s limit",
            names=[s.name for s in submissions],
            max_workers=max_workers,
        )

    timed = run_all(accepted, probe_s, "accepted submissions to calibrate the time limit")
    accepted_s: dict[str, float] = {}
    for submission, result in zip(accepted, timed):
        if result.verdict != Verdict.AC:
            raise CalibrationError(
                f"{package}: accepted submission {submission.name} got {result.verdict.value} under a "
                f"{probe_s:g} s limit ({result.message[:200]}), so it cannot calibrate the time limit; fix the "
                "package or judge without calibration"
            )
        accepted_s[submission.name] = _slowest_test_s(result)
    slowest = max(accepted_s, key=accepted_s.get)
    scale = max(1.0, math.ceil(accepted_s[slowest] * margin / fixed_limit_s * 100 - 1e-9) / 100)
    time_limit_s = round(fixed_limit_s * scale, 6)
    verdicts: dict[str, str] = {}
    if too_slow:
        judged = run_all(too_slow, time_limit_s, "too-slow submissions, which must stay TLE,")
        verdicts = {s.name: r.verdict.value for s, r in zip(too_slow, judged)}
        passing = {
            s.name: f"{r.verdict.value} in {_slowest_test_s(r):.3f} s"
            for s, r in zip(too_slow, judged)
            if r.verdict != Verdict.TLE
        }
        if passing:
            times = ", ".join(f"{name} {seconds:.3f} s" for name, seconds in accepted_s.items())
            raise CalibrationError(
                f"{package}: calibration refused: the scaled limit {time_limit_s:g} s (fixed {fixed_limit_s:g} s x "
                f"{scale:g}, from the slowest accepted {slowest} at {accepted_s[slowest]:.3f} s CPU x margin "
                f"{margin:g}; accepted: {times}) no longer separates the accepted from the too-slow submissions: "
                + ", ".join(f"{name} got {what}" for name, what in passing.items())
                + " (each must stay TLE). Judge with the package's own limit (no calibration) or --time-limit"
            )
    calibration = Calibration(
        scale=scale,
        fixed_limit_s=fixed_limit_s,
        time_limit_s=time_limit_s,
        margin=margin,
        machine=machine,
        slowest_accepted=slowest,
        slowest_accepted_s=accepted_s[slowest],
        accepted_s=accepted_s,
        too_slow=verdicts,
        load_average=load,
    )
    logger.info("%s: calibrated: %s", package, calibration.describe())
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(dataclasses.asdict(calibration)))
    os.replace(tmp, cache)
    return calibration


def folder_submissions(folder: Path, prefix: str) -> list[Submission]:
    """The Python and C++ submissions in ``folder`` (sorted; other languages left out, a missing folder none),
    named ``PREFIX/FILE``."""
    from .languages import submission_language

    out = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not path.is_file():
            continue
        try:
            lang = submission_language(path)
        except ValueError:
            continue
        out.append(Submission(f"{prefix}/{path.name}", path.read_text(errors="replace"), lang))
    return out


def calibrate_kattis(package, backend="local", **options) -> Calibration | None:
    """Calibrate a Kattis/DOMjudge package's fixed limit with its ``submissions/accepted`` and
    ``submissions/time_limit_exceeded`` (``options`` go to :func:`calibrate`); None when the package fixes no
    limit: problemtools' rule then computes it from the accepted submissions on this machine already."""
    from .formats.kattis import judge_kattis

    if package.fixed_time_limit_s is None:
        logger.info("%s: no fixed time limit to calibrate: it is computed on this machine", package.directory)
        return None
    folder = package.directory / "submissions"
    return calibrate(
        str(package.directory),
        package.fixed_time_limit_s,
        folder_submissions(folder / "accepted", "accepted"),
        folder_submissions(folder / "time_limit_exceeded", "time_limit_exceeded"),
        lambda s, limit: judge_kattis(package, s.source, s.lang, backend=backend, time_limit_s=limit),
        content=content_digest(package.directory),
        machine=machine_fingerprint(backend),
        **options,
    )


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
    from .problems import judge_problem

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
        **options,
    )
