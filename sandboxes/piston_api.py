"""Piston's API v2 (engineer-man/piston) over this package's judge, for the requests open-r1's rewards send.

    POST /api/v2/execute   ExecuteRequest -> {language, version, run, compile}
    GET  /api/v2/runtimes  [{language, version, aliases, runtime}]

Served by ``agentgspo sandbox-server --compat-apis`` under ``/compat/SECRET`` (``server.create_app``), through the
server's backend, limits and concurrency cap; docs/sandbox_apis.md has the field mapping. Errors are Piston's:
400 ``{"message": ...}`` for a request it cannot run (an unknown runtime: ``"java-* runtime is unknown"``; a limit
over the server's cap: ``"run_timeout cannot exceed the configured limit of ..."``; NaN or Infinity in the body),
500 ``{"message": ...}`` for a judge error (the sandbox or a checker failed: never the program's fault).

Two kinds of runtime (``GET /runtimes`` lists them):

plain
    ``python`` (CPython), ``c++`` and whatever else the judge runs (``c``, ``pypy3``): ``files[0]`` is compiled
    where the language compiles and run once on ``stdin``. ``run.status`` says how it ended as Piston's isolate
    does: TO (time), OL (output limit), SG (a signal), RE (a non-zero exit); ``run.verdict`` is ours.
codeforces
    The runtimes of open-r1's Piston package (github.com/guipenedo/piston, ``packages/codeforces``) that the judge
    runs: ``c++17`` (alias ``cf_c++17``) and ``python3`` (``cf_python3``). open-r1's Codeforces reward
    (``cf_scoring.py``) sends the solution as ``files[0]``, then ``input.txt``, ``correct_output.txt``, optionally
    ``checker.py`` and ``grader_config`` (TIME_LIMIT, MEMORY_LIMIT, INPUT_MODE). We judge that one test with our
    judge and answer as the package's run script does: stdout ``1`` (passed) or ``0``, exit status 0, or 124
    (time), 134 (memory), the program's own (runtime error); a compile error is ``compile.code`` 1. The output is
    compared as the package does (``YesNoTokensChecker``), or by a checker of ours named by ``CHECKER`` in
    ``grader_config``. The generated ``checker.py`` is run in the sandbox (as the package runs it in its box), never
    as trusted code here.
"""

from __future__ import annotations

import base64
import binascii
import math
import signal
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentgspo.core.errors import AgentGSPOError

from .compat_apis import (
    NO_LIMIT_MEMORY_MB,
    Caps,
    NonFiniteNumber,
    OverCap,
    ProgramRun,
    compiles,
    judge_error,
    judge_languages,
    language_version,
    load_json,
    run_program,
)
from .judge.checkers import Checker, YesNoTokensChecker, make_checker
from .judge.core import judge, run_python
from .judge.languages import normalize_language
from .results import ExecResult, JudgeResult, Limits, Verdict
from .submission import PROGRAM_CHECKERS, TestCase

#: Piston's defaults where a request names no limit (api/src/config.js), in milliseconds.
RUN_TIMEOUT_MS, RUN_CPU_TIME_MS, COMPILE_TIMEOUT_MS = 3000, 3000, 10000
#: Our compile memory where a request gives none (Piston's -1: no limit).
COMPILE_MEMORY_MB = 2048.0
#: Plain runtimes by judge language: Piston's package name, its aliases, and the package providing it (gcc).
PLAIN_RUNTIMES = {
    "python3": ("python", ("py", "py3", "python3"), None),
    "cpp": ("c++", ("cpp", "g++"), "gcc"),
    "c": ("c", ("gcc",), "gcc"),
    "pypy3": ("pypy3", ("pypy",), None),
}
#: open-r1's codeforces package: its languages the judge runs, their aliases and judge language (packages/codeforces).
CODEFORCES_RUNTIMES = (
    ("c++17", ("C++17 (GCC 7-32)", "C++17 (GCC 9-64)", "cf_c++17"), "cpp"),
    ("python3", ("Python 3", "cf_python3"), "py"),
)
CODEFORCES_VERSION = "1.0.0"
#: The files a codeforces request may carry besides the solution (files[0]).
CODEFORCES_FILES = ("input.txt", "correct_output.txt", "checker.py", "grader_config")
GRADER_KEYS = ("TIME_LIMIT", "MEMORY_LIMIT", "INPUT_MODE", "CHECKER")
#: ``CHECKER``'s default (ours; the package has no such key): the package's own compare (``YesNoTokensChecker``).
PACKAGE_CHECKER = "diff"
#: Piston's units: milliseconds, bytes.
MS_PER_S, BYTES_PER_MB = 1000, 1024 * 1024
#: The package's exit statuses (packages/codeforces/1.0.0/run): time limit, memory limit (a C++ abort).
EXIT_TIME_LIMIT, EXIT_MEMORY_LIMIT = 124, 134
CHECKER_LIMITS = Limits(time_limit_s=10, wall_limit_s=20, memory_limit_mb=NO_LIMIT_MEMORY_MB, output_limit_mb=1)


class PistonError(AgentGSPOError):
    """A request answered with Piston's error format: ``status`` and ``{"message": message}``."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class PistonFile(BaseModel):
    """One file of a request; ``content`` in ``encoding``."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    content: str
    encoding: Literal["utf8", "base64", "hex"] = "utf8"

    def data(self) -> bytes:
        """The file's bytes."""
        try:
            if self.encoding == "base64":
                return base64.b64decode(self.content, validate=True)
            if self.encoding == "hex":
                return bytes.fromhex(self.content)
        except (binascii.Error, ValueError) as exc:
            raise PistonError(f"file {self.name!r}: not valid {self.encoding} ({exc})") from None
        return self.content.encode()


class ExecuteRequest(BaseModel):
    """``POST /api/v2/execute``: Piston's job. Times in milliseconds, memory in bytes (-1: no limit); a field
    Piston does not define is refused (400), not ignored."""

    model_config = ConfigDict(extra="forbid")

    language: str
    version: str
    files: list[PistonFile] = Field(min_length=1)
    stdin: str = ""
    args: list[str] = Field(default_factory=list)
    run_timeout: float | None = Field(None, ge=0)
    run_cpu_time: float | None = Field(None, ge=0)
    run_memory_limit: float | None = Field(None, ge=-1)
    compile_timeout: float | None = Field(None, ge=0)
    compile_cpu_time: float | None = Field(None, ge=0)
    compile_memory_limit: float | None = Field(None, ge=-1)


@dataclass(frozen=True)
class Runtime:
    """A runtime this server offers: Piston's name and aliases, the judge language, the providing package."""

    language: str
    aliases: tuple[str, ...]
    judge_lang: str
    package: str | None = None
    codeforces: bool = False


def runtimes() -> list[Runtime]:
    """The runtimes, from the judge's languages now: every plain one, then the codeforces package's (as Piston, a
    name both claim, ``python3``, goes to the plain Python: its version is the higher)."""
    languages = judge_languages()
    offered = []
    for lang in languages:
        name, aliases, package = PLAIN_RUNTIMES.get(lang, (lang, (), None))
        offered.append(Runtime(name, aliases, lang, package))
    for name, aliases, judge_name in CODEFORCES_RUNTIMES:
        lang = normalize_language(judge_name)
        if lang in languages:
            offered.append(Runtime(name, aliases, lang, "codeforces", True))
    return offered


def version_of(runtime: Runtime, backend: str) -> str:
    """A runtime's version: the codeforces package's, or the language's as the sandbox runs it."""
    if runtime.codeforces:
        return CODEFORCES_VERSION
    return language_version(runtime.judge_lang, backend) or "0.0.0"


def version_matches(pattern: str, version: str) -> bool:
    """Piston's version selector, as far as served here: ``*``, an exact version, or a prefix with ``x`` for any.

    >>> version_matches("3.x", "3.11.2"), version_matches("3.11", "3.11.2"), version_matches("3.1", "3.11.2")
    (True, True, False)
    """
    if pattern in ("*", "x", "X"):
        return True
    wanted, have = pattern.split("."), version.split(".")
    return len(wanted) <= len(have) and all(w in ("x", "X", "*") or w == h for w, h in zip(wanted, have))


def find_runtime(language: str) -> list[Runtime]:
    """The runtimes ``language`` names (name or alias), in preference order; PistonError when none."""
    found = [rt for rt in runtimes() if language == rt.language or language in rt.aliases]
    if not found:
        offered = ", ".join(rt.language for rt in runtimes())
        raise PistonError(f"{language}-* runtime is unknown (this server runs: {offered})")
    return found


def _seconds(caps: Caps, field: str, milliseconds: float | None, default_ms: float) -> float:
    """A time field of the request in seconds: PistonError over the cap; 0 or null is "not given" (Piston), the
    default within the cap."""
    if not milliseconds:
        return caps.default_time(default_ms / MS_PER_S)
    try:
        return caps.time(field, milliseconds, MS_PER_S, "")
    except OverCap as exc:
        raise PistonError(str(exc)) from None


def _megabytes(caps: Caps, field: str, limit_bytes: float | None, default_mb: float) -> float:
    """A memory field in MB: PistonError over the cap; 0, -1 or null is none (the default, within the cap)."""
    if not limit_bytes or limit_bytes < 0:
        return caps.default_memory(default_mb)
    try:
        return caps.memory(field, limit_bytes, BYTES_PER_MB, "")
    except OverCap as exc:
        raise PistonError(str(exc)) from None


def _make_limits(**limits) -> Limits:
    try:
        return Limits(**limits)
    except ValueError as exc:
        raise PistonError(str(exc)) from None


def _source(job: ExecuteRequest) -> str:
    main = job.files[0]
    if main.encoding != "utf8":
        raise PistonError(f"files[0] ({main.name}) is the program: send it utf8-encoded, got {main.encoding}")
    return main.content


def _refuse_args(job: ExecuteRequest) -> None:
    if job.args:
        raise PistonError(f"args {job.args}: not supported here (programs run without command-line arguments)")


def check_plain(job: ExecuteRequest, caps: Caps = Caps()) -> Limits:
    """A plain job's request checked before it waits for the sandbox: one utf8 program file, no args, limits within
    ``caps``; its limits."""
    _source(job)
    _refuse_args(job)
    if len(job.files) > 1:
        names = [f.name for f in job.files[1:]]
        raise PistonError(f"files {names}: this server runs one program file (files[0]); extra files are not supported")
    compile_timeout = _seconds(caps, "compile_timeout", job.compile_timeout, COMPILE_TIMEOUT_MS)
    compile_cpu_time = _seconds(caps, "compile_cpu_time", job.compile_cpu_time, COMPILE_TIMEOUT_MS)
    return _make_limits(
        time_limit_s=_seconds(caps, "run_cpu_time", job.run_cpu_time, RUN_CPU_TIME_MS),
        wall_limit_s=_seconds(caps, "run_timeout", job.run_timeout, RUN_TIMEOUT_MS),
        memory_limit_mb=_megabytes(caps, "run_memory_limit", job.run_memory_limit, NO_LIMIT_MEMORY_MB),
        compile_time_limit_s=min(compile_timeout, compile_cpu_time),
        compile_memory_mb=_megabytes(caps, "compile_memory_limit", job.compile_memory_limit, COMPILE_MEMORY_MB),
    )


def _stage(stdout: str, stderr: str, code, signal_name, status, message, cpu_s, wall_s, memory_mb, verdict) -> dict:
    return {
        "stdout": stdout,
        "stderr": stderr,
        "output": stdout + stderr,  # Piston interleaves the two; ours are captured apart: stdout, then stderr
        "code": code,
        "signal": signal_name,
        "message": message,
        "status": status,
        "cpu_time": None if cpu_s is None else round(cpu_s * 1000, 3),
        "wall_time": None if wall_s is None else round(wall_s * 1000, 3),
        "memory": None if memory_mb is None else int(memory_mb * 1024 * 1024),
        "verdict": verdict,
    }


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def plain_run_stage(run: ExecResult) -> dict:
    """A run as Piston reports it: status TO (time), OL (output), SG (signal), RE (non-zero exit), else null."""
    verdict = run.verdict
    code, name, status, message = run.exit_code, None, None, None
    if verdict == Verdict.TLE:
        code, name, status, message = None, "SIGKILL", "TO", "Time limit exceeded"
    elif verdict == Verdict.OLE:
        code, name, status, message = None, "SIGKILL", "OL", "stdout length exceeded"
    elif run.signal:
        code, name, status, message = None, _signal_name(run.signal), "SG", f"Caught fatal signal {run.signal}"
    elif run.exit_code:
        status, message = "RE", f"Exited with error status {run.exit_code}"
    elif verdict == Verdict.MLE:  # over the limit at a clean exit: where Piston's cgroup would have killed it
        code, name, status, message = None, "SIGKILL", "SG", "Memory limit exceeded"
    cpu, wall, memory = run.cpu_time_s, run.wall_time_s, run.memory_mb
    return _stage(run.stdout, run.stderr, code, name, status, message, cpu, wall, memory, verdict.value)


def _compile_stage(ok: bool, output: str, seconds: float, stdout: str = "") -> dict:
    code = 0 if ok else 1
    status, message = (None, None) if ok else ("RE", "Exited with error status 1")
    verdict = None if ok else Verdict.CE.value
    return _stage(stdout, output, code, None, status, message, None, seconds, None, verdict)


def run_plain(job: ExecuteRequest, runtime: Runtime, version: str, backend: str, caps: Caps = Caps()) -> dict:
    """Run a plain job: compile where the language compiles, run once on stdin."""
    limits = check_plain(job, caps)
    done: ProgramRun = run_program(_source(job), runtime.judge_lang, job.stdin.encode(), limits, backend)
    if done.run.verdict == Verdict.JE:
        raise PistonError(f"judge error (not the program's fault): {done.run.error}", status=500)
    result: dict[str, Any] = {"language": runtime.language, "version": version}
    if done.compiled:
        result["compile"] = _compile_stage(done.compile_ok, done.compile_output, done.compile_time_s)
    # Piston's own rule when the run stage never started: run is the compile stage.
    result["run"] = plain_run_stage(done.run) if done.compile_ok else result["compile"]
    return result


@dataclass
class CodeforcesTest:
    """What a codeforces-package request asks: one test, its limits, how input is read, the checker."""

    source: str
    input: bytes
    answer: bytes
    limits: Limits
    io_mode: str
    checker_source: str | None
    checker: str = PACKAGE_CHECKER


def _grader_config(text: str) -> dict[str, str]:
    """``grader_config``'s ``KEY=VALUE`` lines (the run script ``source``s them)."""
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.strip().partition("=")
        if not sep or key not in GRADER_KEYS:
            raise PistonError(f"grader_config line {number} {line!r}: expected KEY=VALUE with KEY one of {GRADER_KEYS}")
        values[key] = value.strip().strip("\"'")
    return values


def _number(values: dict[str, str], key: str) -> float | None:
    if key not in values:
        return None
    try:
        number = float(values[key])
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise PistonError(f"grader_config {key}={values[key]!r}: expected a finite number")
    return number


def _package_checker(values: dict[str, str]) -> str:
    """``CHECKER`` of grader_config (ours): ``diff``, the package's compare (the default), or tokens, float:EPS,
    icpc[:FLAGS]; PistonError for others."""
    spec = values.get("CHECKER", PACKAGE_CHECKER)
    if spec != PACKAGE_CHECKER:
        try:
            if spec.partition(":")[0] in PROGRAM_CHECKERS:
                raise ValueError("no checker programs here (send checker.py)")
            make_checker(spec)
        except ValueError as exc:
            raise PistonError(
                f"grader_config CHECKER={spec!r}: expected {PACKAGE_CHECKER} (the package's compare, the default), "
                f"tokens, float:EPS or icpc[:FLAGS]; {exc}"
            ) from None
    return spec


def _checker(spec: str) -> Checker:
    return YesNoTokensChecker() if spec == PACKAGE_CHECKER else make_checker(spec)


def codeforces_test(job: ExecuteRequest, caps: Caps = Caps()) -> CodeforcesTest:
    """Read a codeforces-package request (see the module docstring); PistonError names what it cannot run, limits
    over ``caps`` included."""
    _refuse_args(job)
    if job.stdin:
        raise PistonError("stdin: the codeforces package reads the test from input.txt; send stdin empty")
    named: dict[str, PistonFile] = {}
    for file in job.files[1:]:
        if file.name not in CODEFORCES_FILES or file.name in named:
            raise PistonError(
                f"file {file.name!r}: a codeforces request carries the program (files[0]) and at most one each of "
                f"{list(CODEFORCES_FILES)}"
            )
        named[file.name] = file
    for needed in ("input.txt", "correct_output.txt"):
        if needed not in named:
            raise PistonError(f"{needed} is missing: this server judges a test (send input.txt and correct_output.txt)")
    config = _grader_config(named["grader_config"].data().decode()) if "grader_config" in named else {}
    io_mode = config.get("INPUT_MODE", "stdio")
    if io_mode not in ("stdio", "file"):
        raise PistonError(f"grader_config INPUT_MODE={io_mode!r}: expected stdio or file")
    hard_wall = _seconds(caps, "run_timeout", job.run_timeout, RUN_TIMEOUT_MS)
    try:
        given = _number(config, "TIME_LIMIT")
        time_limit = caps.time("grader_config TIME_LIMIT", given) if given else hard_wall
        given = _number(config, "MEMORY_LIMIT")
        memory = caps.memory("grader_config MEMORY_LIMIT", given) if given else caps.default_memory(NO_LIMIT_MEMORY_MB)
    except OverCap as exc:
        raise PistonError(str(exc)) from None
    if job.run_cpu_time:
        time_limit = min(time_limit, _seconds(caps, "run_cpu_time", job.run_cpu_time, RUN_CPU_TIME_MS))
    if job.run_memory_limit and job.run_memory_limit > 0:
        memory = min(memory, _megabytes(caps, "run_memory_limit", job.run_memory_limit, memory))
    limits = _make_limits(
        time_limit_s=time_limit,
        wall_limit_s=min(2 * time_limit + 1, hard_wall) if job.run_timeout else None,
        memory_limit_mb=memory,
        compile_time_limit_s=_seconds(caps, "compile_timeout", job.compile_timeout, COMPILE_TIMEOUT_MS),
    )
    checker = named["checker.py"].data().decode() if "checker.py" in named else None
    return CodeforcesTest(
        _source(job),
        named["input.txt"].data(),
        named["correct_output.txt"].data(),
        limits,
        io_mode,
        checker,
        _package_checker(config),
    )


# Runs open-r1's generated checker in the sandbox: ``checker.py INPUT CORRECT_OUTPUT SOLUTION_OUTPUT`` with the three
# files written where the checker can read them (the sizes on stdin's first line, then the bytes).
_CHECKER_HARNESS = """import os, sys, tempfile
sizes = [int(size) for size in sys.stdin.buffer.readline().split()]
folder = tempfile.mkdtemp()
paths = []
for name, size in zip(("input.txt", "correct_output.txt", "solution_output.txt"), sizes):
    paths.append(os.path.join(folder, name))
    with open(paths[-1], "wb") as f:
        f.write(sys.stdin.buffer.read(size))
sys.argv = ["checker.py", *paths]
exec(compile(SOURCE, "checker.py", "exec"), {"__name__": "__main__", "__file__": "checker.py"})
"""


@dataclass
class SandboxedChecker:
    """open-r1's generated checker (prints 1 or 100 for a pass), run in the sandbox: the client sent it, so it is
    not trusted as jury code is. A checker that fails (exit status, time) is a judge error, as our judge's
    ``openr1:`` checker."""

    source: str
    backend: str

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """Run the checker on the three files; AC when it prints 1 or 100."""
        program = _CHECKER_HARNESS.replace("SOURCE", repr(self.source), 1)
        stdin = b"%d %d %d\n" % (len(input_data), len(answer), len(output)) + input_data + answer + output
        done = run_python(program, stdin, limits=CHECKER_LIMITS, backend=self.backend)
        if done.verdict != Verdict.OK:
            return Verdict.JE, f"checker.py failed ({done.verdict.value}): {(done.error or done.stderr)[-500:]}"
        first = done.stdout.split()[:1]
        return (Verdict.AC if first in (["1"], ["100"]) else Verdict.WA), done.stderr[-500:]


def _package_exit(result: JudgeResult) -> int:
    """The exit status the codeforces package's run script gives the test's outcome."""
    test = result.tests[0]
    if test.verdict == Verdict.TLE:
        return EXIT_TIME_LIMIT
    if test.verdict == Verdict.MLE:
        return EXIT_MEMORY_LIMIT
    if test.verdict == Verdict.OLE:
        return 128 + signal.SIGXFSZ  # its file size limit kills the solution
    if test.verdict == Verdict.RE:
        return test.exit_code or 128 + (test.signal or 0) or 1
    return 0


def judge_codeforces(job: ExecuteRequest, runtime: Runtime, backend: str, caps: Caps = Caps()) -> dict:
    """Judge a codeforces-package request's test with our judge; answer as the package's scripts do."""
    test = codeforces_test(job, caps)
    checker = SandboxedChecker(test.checker_source, backend) if test.checker_source else _checker(test.checker)
    how = "checker" if test.checker_source else "diff"
    case = TestCase(test.input, test.answer, "1")
    result = judge(
        test.source,
        [case],
        lang=runtime.judge_lang,
        checker=checker,
        limits=test.limits,
        io_mode=test.io_mode,
        backend=backend,
    )
    if result.verdict == Verdict.JE:
        raise PistonError(judge_error(result), status=500)
    answer: dict[str, Any] = {"language": runtime.language, "version": CODEFORCES_VERSION}
    verdict = result.verdict.value
    if compiles(runtime.judge_lang):
        answer["compile"] = _compile_stage(result.verdict != Verdict.CE, result.compile_output, result.compile_time_s)
        if result.verdict == Verdict.CE:
            answer["run"] = answer["compile"]  # Piston: no run stage after a failed compile
            return answer
    else:
        skipped = f"Skipping compile - {runtime.language}\n"
        answer["compile"] = _compile_stage(True, "", 0.0, stdout=skipped)
    if result.verdict == Verdict.CE:  # CPython: the syntax error ends the run, exit status 1
        stderr = f"{result.compile_output}Runtime error with exit code 1\n"
        answer["run"] = _stage("0\n", stderr, 1, None, "RE", "Exited with error status 1", 0.0, 0.0, 0.0, verdict)
        return answer
    tested = result.tests[0]
    code = _package_exit(result)
    if tested.verdict == Verdict.AC:
        stdout, stderr = "1\n", f"Output is correct ({how})\n"
    elif code == 0:
        stdout, stderr = "0\n", f"Output isn't correct ({how})\n"
    else:
        stdout = "0\n"
        stderr = {
            EXIT_TIME_LIMIT: f"Time limit exceeded ({test.limits.time_limit_s:g}s)\n",
            EXIT_MEMORY_LIMIT: f"Memory limit exceeded ({test.limits.memory_limit_mb:g}MB)\n",
        }.get(code, f"Runtime error with exit code {code}\n")
        stderr = f"{tested.message}\n{stderr}" if tested.message else stderr
    status, message = (None, None) if code == 0 else ("RE", f"Exited with error status {code}")
    answer["run"] = _stage(
        stdout, stderr, code, None, status, message, tested.time_s, tested.wall_time_s, tested.memory_mb, verdict
    )
    return answer


def _pick(job: ExecuteRequest, caps: Caps = Caps()) -> list[Runtime]:
    """The runtimes a job names, its request checked before any sandbox is used where they are of one kind (a name
    both kinds claim is checked once the version picked one)."""
    candidates = find_runtime(job.language)
    kinds = {runtime.codeforces for runtime in candidates}
    if kinds == {True}:
        codeforces_test(job, caps)
    elif kinds == {False}:
        check_plain(job, caps)
    return candidates


def execute_job(job: ExecuteRequest, candidates: list[Runtime], backend: str, caps: Caps = Caps()) -> dict:
    """Pick the runtime whose version matches (asking the sandbox for versions), then run or judge the job."""
    for runtime in candidates:
        version = version_of(runtime, backend)
        if version_matches(job.version, version):
            if runtime.codeforces:
                return judge_codeforces(job, runtime, backend, caps)
            return run_plain(job, runtime, version, backend, caps)
    raise PistonError(f"{job.language}-{job.version} runtime is unknown")


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())


def build_router(limited: Callable[..., Awaitable[Any]], backend: str, caps: Caps = Caps()) -> APIRouter:
    """Piston's routes over the server's judge: ``limited(fn, *args)`` runs fn under the server's concurrency
    cap, ``backend`` is the server's sandbox backend, ``caps`` the largest limits a request may ask."""
    router = APIRouter()

    @router.post("/execute")
    async def execute(request: Request) -> JSONResponse:
        try:
            body = load_json(await request.body())
        except NonFiniteNumber as exc:
            return JSONResponse({"message": str(exc)}, status_code=400)
        except ValueError as exc:
            return JSONResponse({"message": f"requests must be JSON ({exc})"}, status_code=400)
        try:
            job = ExecuteRequest.model_validate(body)
        except ValidationError as exc:
            return JSONResponse({"message": _validation_message(exc)}, status_code=400)
        try:
            candidates = _pick(job, caps)
            return JSONResponse(await limited(execute_job, job, candidates, backend, caps))
        except PistonError as exc:
            return JSONResponse({"message": str(exc)}, status_code=exc.status)

    @router.get("/runtimes")
    async def list_runtimes() -> list[dict]:
        def listing() -> list[dict]:
            out = []
            for runtime in runtimes():
                entry = {"language": runtime.language, "version": version_of(runtime, backend)}
                entry["aliases"] = list(runtime.aliases)
                if runtime.package:
                    entry["runtime"] = runtime.package
                out.append(entry)
            return out

        return await limited(listing)

    return router
