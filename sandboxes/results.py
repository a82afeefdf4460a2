"""Values the sandboxes and the judge return: limits in, verdicts and measurements out. Never exceptions."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

__all__ = ["Verdict", "Limits", "ExecResult", "TestResult", "JudgeResult"]


class Verdict(str, enum.Enum):
    """Outcome of one test or one submission.

    ``JE`` (judge error) means the judge could not decide (a checker or interactor failed, the sandbox could not
    start): it is never the solution's fault and must not be counted as a failed solution.
    ``OK`` is only used by plain program runs (``run_python``), where there is no answer to compare with.
    ``ILE`` (idleness limit) is given to interactive solutions that block without using their CPU time.
    """

    AC = "AC"
    WA = "WA"
    PE = "PE"
    TLE = "TLE"
    ILE = "ILE"
    MLE = "MLE"
    RE = "RE"
    CE = "CE"
    OLE = "OLE"
    JE = "JE"
    OK = "OK"
    SKIPPED = "SKIPPED"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run or one test.

    time_limit_s: CPU time per test; exceeding it is TLE.
    memory_limit_mb: address-space limit per test; exhausting it is MLE.
    output_limit_mb: stdout size per test; exceeding it is OLE (the program is stopped).
    wall_limit_s: wall-clock guard per test (sleeping, blocking); default ``2 * time_limit_s + 1``.
    compile_time_limit_s, compile_memory_mb: for the C++ compiler.
    pids_limit: processes and threads the whole sandbox may hold at once.
    """

    time_limit_s: float = 2.0
    memory_limit_mb: float = 256.0
    output_limit_mb: float = 64.0
    wall_limit_s: float | None = None
    compile_time_limit_s: float = 30.0
    compile_memory_mb: float = 2048.0
    pids_limit: int = 64

    def __post_init__(self) -> None:
        for name in ("time_limit_s", "memory_limit_mb", "output_limit_mb", "compile_time_limit_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be > 0, got {getattr(self, name)!r}")
        if self.wall_limit_s is not None and not self.wall_limit_s > 0:
            raise ValueError(
                f"Limits.wall_limit_s must be > 0 (or None for 2 * time_limit_s + 1), got {self.wall_limit_s!r}"
            )
        if self.memory_limit_mb < 16:
            raise ValueError(
                f"Limits.memory_limit_mb must be >= 16 (an interpreter needs it), got {self.memory_limit_mb}"
            )

    @property
    def wall_s(self) -> float:
        """The effective wall-clock guard in seconds."""
        return self.wall_limit_s if self.wall_limit_s is not None else 2 * self.time_limit_s + 1.0

    def runner_limits(self) -> dict:
        """The limits in the in-sandbox runner's spec format (see ``sandboxes/runner.py``)."""
        return {
            "cpu_s": self.time_limit_s,
            "wall_s": self.wall_s,
            "memory_mb": self.memory_limit_mb,
            "output_bytes": int(self.output_limit_mb * 1024 * 1024),
            "stderr_bytes": 8192,
        }

    def to_dict(self) -> dict:
        """Plain-JSON form (for the remote backend)."""
        return dataclasses.asdict(self)


@dataclass
class ExecResult:
    """One program run: what it printed, how it ended, what it used.

    verdict is OK, TLE (CPU or wall limit), MLE, OLE, RE (non-zero exit or signal), CE (Python syntax error),
    or JE when the sandbox itself failed (then ``error`` says why).
    """

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None
    cpu_time_s: float = 0.0
    wall_time_s: float = 0.0
    memory_mb: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    verdict: Verdict = Verdict.OK
    error: str = ""

    @property
    def ok(self) -> bool:
        """True when the program ran to a zero exit status within its limits."""
        return self.verdict == Verdict.OK

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        out = dataclasses.asdict(self)
        out["verdict"] = self.verdict.value
        return out


@dataclass
class TestResult:
    """One test of a judged submission."""

    name: str
    verdict: Verdict
    time_s: float = 0.0
    wall_time_s: float = 0.0
    memory_mb: float = 0.0
    exit_code: int | None = None
    signal: int | None = None
    message: str = ""
    #: Points a scoring checker gave this test (testlib ``quitp`` / ``_pc(n)``), None when it only accepts/rejects.
    score: float | None = None

    def to_dict(self) -> dict:
        """Plain-JSON form (the ``tests`` entries of ``agentgspo judge --json``)."""
        out = dataclasses.asdict(self)
        out["verdict"] = self.verdict.value
        return out


@dataclass
class JudgeResult:
    """A judged submission: overall verdict, per-test results, compiler output.

    verdict: AC when every test is AC; CE on compile errors; JE when any test is JE (never blamed on the
    solution); otherwise the verdict of the first failing test.
    """

    verdict: Verdict
    tests: list[TestResult] = field(default_factory=list)
    compile_output: str = ""
    compile_time_s: float = 0.0
    message: str = ""
    #: The submission's score where the problem format defines one (Kattis scoring problems), else None.
    score: float | None = None
    #: Per test-data group results where the format has groups (Kattis): ``{"name", "verdict", "score"}``.
    groups: list[dict] = field(default_factory=list)
    #: The CPU time limit per test the verdict was judged under, where the caller knows it (packages, the CLI).
    time_limit_s: float | None = None
    #: Where that limit came from: "problem.yaml", ".timelimit", "domjudge-problem.ini", "problem.xml", "given",
    #: "computed: ..." (``judge/time_limits.py``); "" where not recorded.
    time_limit_source: str = ""
    #: The factor the package's fixed limit was multiplied by for this machine (``judge/calibration.py``); 1.0
    #: when not calibrated.
    time_limit_scale: float = 1.0
    #: The compile cache (``judge/compile_cache.py``): "hit" (the program compiled before was reused), "miss"
    #: (compiled in the sandbox) or "off" (no cache: CPython, the cache turned off, a session without one).
    compile_cache: str = "off"

    @property
    def passed(self) -> int:
        """Number of accepted tests."""
        return sum(t.verdict == Verdict.AC for t in self.tests)

    @property
    def accepted(self) -> bool:
        """True when the verdict is AC."""
        return self.verdict == Verdict.AC

    @property
    def max_time_s(self) -> float:
        """Largest per-test CPU time."""
        return max((t.time_s for t in self.tests), default=0.0)

    @property
    def max_memory_mb(self) -> float:
        """Largest per-test peak memory."""
        return max((t.memory_mb for t in self.tests), default=0.0)

    def to_dict(self) -> dict:
        """Plain-JSON form: ``verdict``, ``tests`` (each with ``verdict``, ``time_s``, ``memory_mb``), ..."""
        return {
            "verdict": self.verdict.value,
            "passed": self.passed,
            "total": len(self.tests),
            "max_time_s": self.max_time_s,
            "max_memory_mb": self.max_memory_mb,
            "compile_time_s": self.compile_time_s,
            "compile_output": self.compile_output,
            "message": self.message,
            "score": self.score,
            "groups": self.groups,
            "time_limit_s": self.time_limit_s,
            "time_limit_source": self.time_limit_source,
            "time_limit_scale": self.time_limit_scale,
            "compile_cache": self.compile_cache,
            "tests": [t.to_dict() for t in self.tests],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "JudgeResult":
        """Inverse of ``to_dict`` (the remote backend's wire format)."""
        tests = [TestResult(**{**t, "verdict": Verdict(t["verdict"])}) for t in data.get("tests", [])]
        return cls(
            verdict=Verdict(data["verdict"]),
            tests=tests,
            compile_output=data.get("compile_output", ""),
            compile_time_s=data.get("compile_time_s", 0.0),
            message=data.get("message", ""),
            score=data.get("score"),
            groups=list(data.get("groups") or []),
            time_limit_s=data.get("time_limit_s"),
            time_limit_source=data.get("time_limit_source", ""),
            time_limit_scale=data.get("time_limit_scale", 1.0),
            compile_cache=data.get("compile_cache", "off"),
        )
