"""A package's fixed time limit scaled to the machine that judges (opt-in: ``judge_kattis(..., calibrate=True)``,
``agentgspo judge --problem DIR --calibrate``; never for the built-in problem set, whose limits are already in
reference-machine seconds, see docs/problem_format.md).

A package's limit (problem.yaml, .timelimit, domjudge-problem.ini, problem.xml) is CPU seconds of its jury's
machine, taken here as seconds of the reference machine (REFERENCE_MACHINE), the one ``validate-problems``
measures every machine against. On a slower machine every solution may TLE (on the 2-core AMD EPYC development
machine one package's accepted C++ solution needs 4.7 s under its 3 s ``.timelimit``); on a faster one a too-slow
submission may pass (a real ICPC regional package's ``time_limit_exceeded`` Python submission was judged AC here
under the old rule, which set the limit from the accepted submissions alone). The rule:

  1. ``slowdown``: this machine's time over the reference machine's (:func:`machine_slowdown`): the calibration
     programs (CALIBRATION_PY, CALIBRATION_CPP, as ``validate-problems`` times them) of the package's submissions'
     languages (Python for both Pythons, C++ for C and C++) run through the same backend, each median over
     REFERENCE_CALIBRATION_S, the largest.
  2. Every accepted submission (Kattis ``submissions/accepted``, Polygon tags ``main``/``accepted``; Python and
     C++ only) is judged under a generous CPU limit (``PROBE_S``); each must be AC. ``a`` = the slowest CPU time
     of any test of any of them, on this machine.
  3. ``scale = max(slowdown, a * margin / fixed)``, rounded up to 0.01. The jury's limit times this machine's
     slowdown keeps the jury's ratio between its limit and its submissions (a limit 1.3x the slowest accepted
     stays 1.3x here, and a submission 1.6x slower stays TLE); the accepted submissions' rule is only a floor
     (``margin``, MARGIN = 1.25: room for the noise of CPU times on a loaded machine), for a package whose
     accepted submissions are slower here than the slowdown says (another workload than the calibration's).
     Problemtools' ``ac_to_time_limit`` (2) is no floor: it would replace every jury ratio below 2, and let such
     too-slow submissions pass. The limit judged with is ``fixed * scale``: below the package's own on a machine
     faster than the reference one.
  4. Every too-slow submission (``submissions/time_limit_exceeded``, Polygon tag ``time-limit-exceeded``) is
     judged under that limit and must still be TLE; if one is not, the scaled limit no longer separates the
     accepted from the too-slow and the calibration is refused (:class:`CalibrationError`, naming the package,
     the submissions and their times). With no too-slow submission nothing can be checked (the record says so).

The submissions are timed up to the usable CPUs at once (``time_limits.time_submissions``; CPU times). The result
is cached under ``$AGENTGSPO_CACHE/time-limit-calibration/``, keyed by the package's content (every file), the
fixed limit, the margin, REFERENCE_CALIBRATION_S and the machine (:func:`machine_fingerprint`: the backend kind,
CPU model, usable CPUs, architecture, Python version), so it is measured once per package and machine; a refusal
is not cached. Through the remote backend a Kattis package is calibrated server-side, as its computed limit is
(the server calibrates with its own backend, keyed by its own fingerprint, and judges under its scaled limit): on
a fleet each server calibrates for itself. Elsewhere the remote fingerprint is what the servers report about
themselves (``/health``'s ``machine``), refused when they differ. Measure on an idle machine: a load average
above half the CPUs is logged as a warning. Every verdict judged with a calibration records the factor
(``JudgeResult.time_limit_scale``) and the limit (``time_limit_s``).
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

from agentgspo.core.paths import cache_root
from agentgspo.core.errors import AgentGSPOError

from ..registry import get_sandbox
from ..results import JudgeResult, Limits, Verdict
from .core import judge, usable_cpus
from .languages import get_language, submission_language
from .time_limits import time_submissions

__all__ = [
    "CalibrationError",
    "Submission",
    "Calibration",
    "REFERENCE_MACHINE",
    "REFERENCE_CALIBRATION_S",
    "calibration_program",
    "time_calibration_programs",
    "machine_slowdown",
    "machine_fingerprint",
    "content_digest",
    "calibrate",
    "folder_submissions",
]

logger = logging.getLogger(__name__)

MARGIN = 1.25  # the floor: the slowest accepted submission x this (see the module docstring)
PROBE_S = 60.0  # CPU limit per test while timing the accepted submissions (as formats/kattis.py's rule)
CACHE_VERSION = 2  # 2: the key holds the backend kind and the slowdown rule (see the module docstring)

# The machine the built-in limits were set on, and the median CPU seconds of the calibration programs there (local
# backend: bubblewrap, /usr/bin/python3 3.11.2, g++ 12 -O2; typical values of time_calibration_programs(), which gave
# python 0.16-0.23 s and C++ 0.20-0.24 s as the shared machine's load varied, on 2026-12-01).
REFERENCE_MACHINE = "AMD EPYC (Zen 2, family 23 model 49) under KVM, 2 cores, Python 3.11.2, g++ 12"
REFERENCE_CALIBRATION_S = {"python": 0.180, "cpp": 0.210}
CALIBRATION_RUNS = 3  # per measurement (validate-problems: per problem)
CALIBRATION_ROUNDS = {"python": 150, "cpp": 40}  # the programs' input: about a quarter second each, there
CALIBRATION_PY = """\
def calibration_work(rounds):
    total = 0
    for r in range(rounds):
        x, values, counts = r + 1, [], {}
        for i in range(2000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            values.append(x % 100003)
            counts[x & 1023] = counts.get(x & 1023, 0) + i
        values.sort()
        words = " ".join(map(str, values[::4])).split()
        total = (total + sum(map(int, words)) + len(counts) * values[-1]) % 1000000007
    return total
"""
CALIBRATION_CPP = """\
#include <algorithm>
#include <cstdio>
#include <vector>
int main() {
    long long rounds;
    if (scanf("%lld", &rounds) != 1) return 1;
    std::vector<unsigned> values(1 << 16);
    unsigned long long x = 1, total = 0;
    for (long long r = 0; r < rounds; r++) {
        for (unsigned &v : values) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; v = x >> 33; }
        std::sort(values.begin(), values.end());
        unsigned at = (unsigned)x;
        for (int k = 0; k < (1 << 16); k++) { at = values[at & 0xFFFF] ^ k; total += at; }
    }
    printf("%llu\\n", total);
}
"""


_JUDGE_LANG = {"python": "py", "cpp": "cpp"}  # reference key -> judge language


class _AnyOutput:
    """Accepts every output: a calibration run is timed, its verdict only says that it ran to the end."""

    def check(self, input_data: bytes, output: bytes, answer: bytes):
        """AC, whatever was printed."""
        return Verdict.AC, ""


def calibration_program(lang: str) -> str:
    """The calibration program of ``lang`` ("python" or "cpp"), reading its number of rounds from stdin."""
    return CALIBRATION_PY + "print(calibration_work(int(input())))\n" if lang == "python" else CALIBRATION_CPP


def time_calibration_programs(
    backend="local", runs: int = CALIBRATION_RUNS, rounds: dict[str, int] | None = None
) -> dict[str, float]:
    """The median CPU seconds of each calibration program (``rounds``: language -> its input, default
    CALIBRATION_ROUNDS; the languages timed), each run ``runs`` times through the judge on ``backend`` (one test per
    run, each its own process). RuntimeError when a calibration program does not run: the judge or its sandbox is
    broken, and no time could be trusted."""
    import statistics

    seconds = {}
    for lang, count in (rounds or CALIBRATION_ROUNDS).items():
        result = judge(
            calibration_program(lang),
            [(f"{count}\n", "")] * runs,
            lang=_JUDGE_LANG[lang],
            checker=_AnyOutput(),
            limits=Limits(time_limit_s=30, wall_limit_s=600),
            backend=backend,
        )
        if result.verdict != Verdict.AC:
            raise RuntimeError(
                f"the {lang} calibration program got {result.verdict.value} on the {_kind(backend)} backend "
                f"({result.message or result.compile_output}): fix the judge before timing anything with it"
            )
        seconds[lang] = round(statistics.median(test.time_s for test in result.tests), 4)
    return seconds


def reference_language(lang: str) -> str:
    """The REFERENCE_CALIBRATION_S key whose calibration program stands for a ``lang`` submission: "python" for
    both Pythons (CPython's program stands for PyPy too, which has no reference time), "cpp" for C and C++."""
    return "python" if get_language(lang).family == "python3" else "cpp"


def machine_slowdown(backend="local", langs: Sequence[str] = ("py", "cpp")) -> float:
    """How many times slower ``backend`` runs than the reference machine (REFERENCE_MACHINE), now: the calibration
    programs of ``langs``' reference languages timed there (:func:`time_calibration_programs`), each median over
    REFERENCE_CALIBRATION_S; the largest of them (the languages' limit is one, and must fit the slowest)."""
    keys = sorted({reference_language(lang) for lang in langs})
    seconds = time_calibration_programs(backend, rounds={key: CALIBRATION_ROUNDS[key] for key in keys})
    return round(max(seconds[key] / REFERENCE_CALIBRATION_S[key] for key in keys), 4)


class CalibrationError(ValueError, AgentGSPOError):
    """The package's submissions cannot calibrate its limit (the message names the package, submissions, times)."""


@dataclass(frozen=True)
class Submission:
    """A submission the package ships: ``name`` as shown in messages (``time_limit_exceeded/slow.cpp``)."""

    name: str
    source: str
    lang: str


@dataclass(frozen=True)
class Calibration:
    """A calibrated limit: ``time_limit_s = fixed_limit_s * scale`` on ``machine``, where ``scale`` is the larger
    of this machine's ``slowdown`` against the reference machine and the floor ``floor_scale`` (the slowest
    accepted submission x ``margin`` over the fixed limit), rounded up to 0.01.

    ``accepted_s``: each accepted submission's slowest test (CPU s); ``too_slow``: each too-slow submission's
    verdict under the scaled limit."""

    scale: float
    fixed_limit_s: float
    time_limit_s: float
    margin: float
    machine: str
    slowest_accepted: str
    slowest_accepted_s: float
    slowdown: float
    floor_scale: float
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
        by = (
            f"this machine's slowdown {self.slowdown:g} against the reference machine"
            if self.slowdown >= self.floor_scale
            else f"the floor: slowest accepted {self.slowest_accepted} at {self.slowest_accepted_s:.3f} s CPU x "
            f"margin {self.margin:g} (this machine's slowdown {self.slowdown:g} would leave it less room)"
        )
        return (
            f"time limit {self.fixed_limit_s:g} s x {self.scale:g} = {self.time_limit_s:g} s on {self.machine}, by "
            f"{by}; {checked}"
        )


def _kind(backend) -> str:
    return backend if isinstance(backend, str) else getattr(backend, "name", type(backend).__name__)


def machine_fingerprint(backend="local") -> str:
    """What a calibration or a computed limit is valid for: the backend kind, then this machine's CPU model and
    usable CPUs (plus architecture and Python version); for the remote backend (a sandbox with ``endpoints``, or
    a fleet) what its servers report about themselves (``RemoteSandbox.machine_fingerprint``: each server's kind
    and machine), where the runs happen."""
    kind = _kind(backend)
    if kind == "remote":
        if isinstance(backend, str):
            backend = get_sandbox("remote")
        return f"remote: {backend.machine_fingerprint()}"
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    model = model or platform.processor() or "unknown CPU"
    return f"{kind}: {model} x{usable_cpus()} ({platform.machine()}, Python {platform.python_version()})"


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
    reference = json.dumps(REFERENCE_CALIBRATION_S, sort_keys=True)  # a new reference machine: measured again
    key = hashlib.sha256(f"{CACHE_VERSION}\0{content}\0{machine}\0{fixed_limit_s!r}\0{margin!r}\0{reference}".encode())
    return cache_root() / "time-limit-calibration" / f"{key.hexdigest()[:32]}.json"


def _check_slowdown(value: float) -> float:
    if not (isinstance(value, (int, float)) and 0 < value < math.inf):
        raise ValueError(
            f"calibration slowdown: expected a finite number > 0 (this machine's time over the reference "
            f"machine's), got {value!r}"
        )
    return float(value)


def calibrate(
    package: str,
    fixed_limit_s: float,
    accepted: Sequence[Submission],
    too_slow: Sequence[Submission],
    run: Callable[[Submission, float], JudgeResult],
    *,
    content: str,
    machine: str,
    slowdown: float | Callable[[], float],
    margin: float = MARGIN,
    probe_s: float = PROBE_S,
    max_workers: int | None = None,
) -> Calibration:
    """Calibrate ``fixed_limit_s`` (see the module docstring), or read the cached calibration.

    ``package``: its name in messages; ``run(submission, time_limit_s)`` judges one submission on the package
    under that CPU limit; ``content``: a digest of the package's files (:func:`content_digest`); ``machine``: where
    ``run`` runs (:func:`machine_fingerprint`); ``slowdown``: how many times slower that machine is than the
    reference one (:func:`machine_slowdown`), or a function measuring it (called only when nothing is cached).
    CalibrationError (a ValueError) when there is no accepted submission, one is not AC, or a too-slow one is not
    TLE under the scaled limit."""
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
    slowdown = _check_slowdown(slowdown() if callable(slowdown) else slowdown)

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
    floor_scale = accepted_s[slowest] * margin / fixed_limit_s
    scale = math.ceil(max(slowdown, floor_scale) * 100 - 1e-9) / 100
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
                f"{scale:g}, the larger of this machine's slowdown {slowdown:g} and the floor from the slowest "
                f"accepted {slowest} at {accepted_s[slowest]:.3f} s CPU x margin {margin:g}; accepted: {times}) no "
                "longer separates the accepted from the too-slow submissions: "
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
        slowdown=slowdown,
        floor_scale=round(floor_scale, 4),
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
