"""SandboxFusion's API (bytedance/SandboxFusion; PyPI client ``sandbox-fusion`` 0.3.7) over this package's judge.

    POST /run_code   RunCodeRequest -> RunCodeResponse: compile where the language compiles, run once on stdin
    POST /submit     SubmitRequest -> EvalResult: the code block of ``completion`` judged on the stdin/stdout tests
                     in ``config.provided_data`` (SandboxFusion's CommonOJDataset, the type verl's rewards use)
    GET  /v1/ping    "pong"

Served by ``agentgspo sandbox-server --compat-apis`` under ``/compat/SECRET`` (``server.create_app``), through the
server's backend (local bubblewrap or docker), limits and concurrency cap. Field by field, what maps, what is
ignored and what is refused: docs/sandbox_apis.md. Refusals use SandboxFusion's own error formats: a field this
server cannot honour is FastAPI's 422 ``{"detail": [{"loc", "msg", ...}]}`` (as SandboxFusion answers an unknown
language), a dataset it does not serve a 400 ``{"detail": "..."}`` (as SandboxFusion's dataset errors); a limit over
the server's cap (``Caps``) and a NaN or Infinity in the body are 422s naming the field. Outputs are compared as
SandboxFusion compares them (``LinesChecker``), or by a checker of ours named in ``config.extra.checker``. Our own
verdict (OK/AC, WA, TLE, MLE, RE, CE, OLE, JE) rides along in fields SandboxFusion does not have (``verdict``) and
in ``EvalResult.extra``, which the client keeps.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Awaitable, Callable, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .compat_apis import (
    NO_LIMIT_MEMORY_MB,
    Caps,
    NonFiniteNumber,
    OverCap,
    ProgramRun,
    compiles,
    judge_error,
    judge_languages,
    load_json,
    run_program,
)
from .judge.checkers import Checker, LinesChecker, make_checker
from .judge.core import judge
from .judge.languages import normalize_language
from .results import JudgeResult, Limits, TestResult, Verdict
from .submission import PROGRAM_CHECKERS, TestCase

#: SandboxFusion dataset types this server judges, and the registered dataset ids that mean them.
DATASET_TYPES = ("CommonOJDataset",)
DATASET_IDS = {"code_contests": "CommonOJDataset"}
#: ``config.extra`` keys: SandboxFusion's own two, and ours (``memory_limit_MB``, ``checker``).
EXTRA_KEYS = ("run_all_cases", "return_full_case", "memory_limit_MB", "checker")
#: ``config.extra.checker``'s default: SandboxFusion's own compare (``LinesChecker``); our checkers are opt-ins.
SANDBOX_FUSION_CHECKER = "sandbox_fusion"
#: SandboxFusion's defaults for a stdin/stdout test without timeouts in the config (sandbox/utils/testing.py).
COMPILED_RUN_TIMEOUT_S, INTERPRETED_RUN_TIMEOUT_S, COMPILE_TIMEOUT_S = 10.0, 20.0, 10.0
TEST_INFO_CHARS = 1000  # a passed test's test_info strings are cut to this (both ends kept), as SandboxFusion does


def judge_language(name: str) -> str:
    """Our judge language for a SandboxFusion language name: ``python`` is CPython, ``cpp`` C++17, and the judge's
    own names (``pypy3``, ``c``, ...) are accepted too. ValueError names what this server runs.

    >>> judge_language("python") == judge_language("py")
    True
    """
    try:
        return normalize_language("py" if name == "python" else name)
    except ValueError:
        cpython = normalize_language("py")
        others = [lang for lang in judge_languages() if lang not in (cpython, "cpp")]
        runs = ", ".join(["python (CPython)", "cpp", *others])
        raise ValueError(f"language {name!r} is not run by this server: it runs {runs}") from None


def _invalid(loc: list, message: str, value: Any) -> HTTPException:
    """FastAPI's 422 for one field (SandboxFusion answers a field it refuses so): ``loc`` from the body down."""
    error = {"type": "value_error", "loc": ["body", *loc], "msg": f"Value error, {message}", "input": value}
    return HTTPException(status_code=422, detail=[error])


def _limits(
    caps: Caps,
    run_timeout: float | None,
    compile_timeout: float | None,
    memory_limit_mb: int | None,
    defaults: tuple[float, float],
    where: tuple[str, ...] = (),
) -> Limits:
    """SandboxFusion's limits as ours: ``run_timeout`` caps CPU time and the wall clock; -1 MB is our no-limit. A
    limit the request names over the server's caps is a 422 at ``where`` + its field; None is ``defaults``' (run,
    compile), within the caps."""
    try:
        run_s = caps.default_time(defaults[0]) if run_timeout is None else caps.time("run_timeout", run_timeout)
        compile_s = (
            caps.default_time(defaults[1]) if compile_timeout is None else caps.time("compile_timeout", compile_timeout)
        )
        if memory_limit_mb is None or memory_limit_mb == -1:
            memory = caps.default_memory(NO_LIMIT_MEMORY_MB)
        else:
            memory = caps.memory("memory_limit_MB", memory_limit_mb)
    except OverCap as exc:
        sent = {"run_timeout": run_timeout, "compile_timeout": compile_timeout, "memory_limit_MB": memory_limit_mb}
        raise _invalid([*where, exc.field], str(exc), sent[exc.field]) from None
    return Limits(time_limit_s=run_s, wall_limit_s=run_s, memory_limit_mb=memory, compile_time_limit_s=compile_s)


class RunCodeRequest(BaseModel):
    """``POST /run_code``: SandboxFusion's request. Unknown fields are refused (422), not dropped."""

    model_config = ConfigDict(extra="forbid")

    code: str
    language: str
    compile_timeout: float = Field(10, gt=0)
    run_timeout: float = Field(10, gt=0)
    memory_limit_MB: int = -1
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict)
    fetch_files: list[str] = Field(default_factory=list)

    @field_validator("language")
    @classmethod
    def _runs_here(cls, value: str) -> str:
        judge_language(value)
        return value

    @field_validator("memory_limit_MB")
    @classmethod
    def _memory(cls, value: int) -> int:
        if value != -1 and value < 16:
            raise ValueError(f"memory_limit_MB must be -1 (no limit: {NO_LIMIT_MEMORY_MB:.0f} MB here) or >= 16")
        return value

    @field_validator("files")
    @classmethod
    def _no_files(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        sent = [path for path, content in value.items() if content is not None]
        if sent:
            raise ValueError(f"files {sent}: not supported here (the box holds the program and its stdin only)")
        return value

    @field_validator("fetch_files")
    @classmethod
    def _no_fetch(cls, value: list[str]) -> list[str]:
        if value:
            raise ValueError(f"fetch_files {value}: not supported here (a run leaves no files to fetch)")
        return value

    def limits(self, caps: Caps) -> Limits:
        """This request's limits as the judge's, within ``caps`` (a 422 for one it names above them)."""
        sent = self.model_fields_set
        return _limits(
            caps,
            self.run_timeout if "run_timeout" in sent else None,
            self.compile_timeout if "compile_timeout" in sent else None,
            self.memory_limit_MB if "memory_limit_MB" in sent else None,
            (self.run_timeout, self.compile_timeout),
        )


class CommandRunResult(BaseModel):
    """One command (compile or run) as SandboxFusion reports it; ``verdict`` is ours (an addition)."""

    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    cpu_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    verdict: str | None = None


class RunCodeResponse(BaseModel):
    """``/run_code``'s answer; ``verdict`` (ours: OK, TLE, MLE, OLE, RE, CE, JE) is an addition."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    verdict: str


class TestConfig(BaseModel):
    """``SubmitRequest.config``, SandboxFusion's TestConfig; unknown fields are refused (422)."""

    __test__ = False  # not a pytest class
    model_config = ConfigDict(extra="forbid")

    dataset_type: str | None = None
    language: str | None = None
    locale: str | None = None  # ignored: it picks a prompt's wording, and /submit builds no prompt
    is_fewshot: bool | None = None  # ignored: CommonOJDataset's code extraction does not read it
    compile_timeout: float | None = Field(None, gt=0)
    run_timeout: float | None = Field(None, gt=0)
    custom_extract_logic: str | None = None
    provided_data: list[dict[str, Any]] | dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("language")
    @classmethod
    def _runs_here(cls, value: str | None) -> str | None:
        if value is not None:
            judge_language(value)
        return value

    @field_validator("custom_extract_logic")
    @classmethod
    def _no_server_code(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(
                "custom_extract_logic: refused; it is Python that SandboxFusion runs on its server, outside any "
                "sandbox. Extract the code yourself and send it as a fenced block in completion"
            )
        return value


class SubmitRequest(BaseModel):
    """``POST /submit``: a completion and where its tests are."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    id: int | str
    completion: str
    config: TestConfig


class EvalTestCase(BaseModel):
    """One judged test: passed, the run as ``/run_code`` would report it, the test; ``verdict`` is ours."""

    passed: bool
    exec_info: RunCodeResponse
    test_info: dict[str, Any] | None = None
    verdict: str


class EvalResult(BaseModel):
    """``/submit``'s answer. ``extra`` (a SandboxFusion field the client keeps) holds our verdicts."""

    id: int | str
    accepted: bool
    extracted_code: str
    full_code: str | None = None
    test_code: str | None = None
    tests: list[EvalTestCase]
    extracted_type: Literal["fenced", "incomplete_fenced", "heuristic", "empty"] | None = None
    extra: dict[str, Any] | None = None


# Code extraction, SandboxFusion's rule (sandbox/utils/extraction.py, default_extract_helper): collect complete
# fenced blocks (priority 30), blocks of Python definitions found without fences (10, Python only) and a fence
# left open to the end (20); keep the highest priority found; take the first block tagged with the language, else
# the first block. Tags are matched exactly against SandboxFusion's aliases of the language.
_COMPLETE_FENCE = re.compile(r"```([^\n]*)\n(.*?)\n\s*```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```([^\n]*)\n(.*)", re.DOTALL)
_PYTHON_DEFINITIONS = re.compile(
    r"""(?:^(?:import|from|\#)[^\n]+\n)*   # imports and comments right above
        ^(?:def|class)\ [^\n]+\n           # a def or class line
        (?:\s+[^\n]+\n)+                   # its indented body""",
    re.MULTILINE | re.VERBOSE,
)
FENCE_TAGS = {
    "python": ("python", "Python", "py", "Python3", "python3", "PY"),
    "cpp": ("cpp", "c++", "C++", "Cpp", "CPP"),
    "c": ("c", "C"),
}


def extract_code(completion: str, language: str) -> tuple[str, str]:
    """The code ``/submit`` judges from a raw completion, and how it was found (fenced, incomplete_fenced,
    heuristic, empty), by SandboxFusion's rule (see above).

    >>> extract_code("Try:\\n```cpp\\nint main(){}\\n```\\nor\\n```python\\nprint(1)\\n```", "python")
    ('print(1)', 'fenced')
    >>> extract_code("```python\\nprint(2)", "python")
    ('print(2)', 'incomplete_fenced')
    """
    tags = FENCE_TAGS.get(language, ())
    candidates = [
        (30, "fenced", [(tag.strip() in tags, code) for tag, code in _COMPLETE_FENCE.findall(completion)]),
        (20, "incomplete_fenced", [(tag.strip() in tags, code) for tag, code in _OPEN_FENCE.findall(completion)]),
    ]
    if language == "python":
        dense = "\n".join(line for line in completion.split("\n") if line.strip()) + "\n"
        candidates.append((10, "heuristic", [(True, code) for code in _PYTHON_DEFINITIONS.findall(dense)]))
    for _, kind, blocks in sorted(candidates, key=lambda c: -c[0]):
        if blocks:
            return next((code for tagged, code in blocks if tagged), blocks[0][1]), kind
    return "", "empty"


def _return_code(exit_code: int | None, signal: int | None) -> int | None:
    """A process's return code as asyncio reports it (SandboxFusion's runner): -N when killed by signal N."""
    return -signal if signal else exit_code


def _compile_result(done: ProgramRun | JudgeResult, ok: bool) -> CommandRunResult:
    output = done.compile_output
    seconds = done.compile_time_s
    return CommandRunResult(
        status="Finished", execution_time=seconds, return_code=0 if ok else 1, stdout="", stderr=output
    )


def run_code_response(done: ProgramRun) -> RunCodeResponse:
    """``/run_code``'s answer for one run: Success only for a clean run (our OK); TLE is TimeLimitExceeded with no
    return code; a sandbox failure (JE) is SandboxError, which the client retries."""
    run = done.run
    if run.verdict == Verdict.JE:
        return RunCodeResponse(status="SandboxError", message=run.error, verdict=run.verdict.value)
    compile_result = _compile_result(done, done.compile_ok) if done.compiled else None
    if not done.compile_ok:
        return RunCodeResponse(status="Failed", compile_result=compile_result, verdict=Verdict.CE.value)
    run_result = _command(
        run.verdict, run.exit_code, run.signal, run.wall_time_s, run.cpu_time_s, run.stdout, run.stderr
    )
    status = "Success" if run.verdict == Verdict.OK else "Failed"
    return RunCodeResponse(
        status=status, compile_result=compile_result, run_result=run_result, verdict=run.verdict.value
    )


def _command(verdict, exit_code, signal, wall_s, cpu_s, stdout, stderr) -> CommandRunResult:
    timed_out = verdict == Verdict.TLE
    return CommandRunResult(
        status="TimeLimitExceeded" if timed_out else "Finished",
        execution_time=wall_s,
        cpu_time=cpu_s,
        return_code=None if timed_out else _return_code(exit_code, signal),
        stdout=stdout,
        stderr=stderr,
        verdict=verdict.value,
    )


def _refuse(detail: str) -> HTTPException:
    return HTTPException(status_code=400, detail=detail)


def _dataset_type(request: SubmitRequest) -> str:
    """The dataset type a submission names (its config's, else its registered dataset id's); 400 for others."""
    kind = request.config.dataset_type or DATASET_IDS.get(request.dataset)
    if kind is None:
        raise _refuse(
            f"no eval class found for dataset {request.dataset}: this server has no dataset tables; set "
            f"config.dataset_type to one of {list(DATASET_TYPES)} and send the tests in config.provided_data"
        )
    if kind not in DATASET_TYPES:
        raise _refuse(
            f"eval class {kind} not served here: this server judges {list(DATASET_TYPES)} (stdin/stdout tests) only"
        )
    return kind


def _tests(config: TestConfig) -> list[tuple[str, str]]:
    """CommonOJDataset's tests from ``provided_data`` (its row: ``test``, a list or JSON text of ``{"input":
    {"stdin"}, "output": {"stdout"}}``; the row's other columns are the prompt's); 400 names what is wrong."""
    row = config.provided_data
    if not isinstance(row, dict) or "test" not in row:
        raise _refuse(
            "config.provided_data must be the problem's row, a dict with 'test': [{'input': {'stdin': ...}, "
            "'output': {'stdout': ...}}, ...] (this server has no dataset tables to read it from)"
        )
    cases = row["test"]
    if isinstance(cases, str):
        try:
            cases = json.loads(cases, strict=False)
        except json.JSONDecodeError as exc:
            raise _refuse(f"config.provided_data.test: not JSON ({exc})") from None
    if not isinstance(cases, list) or not cases:
        raise _refuse("config.provided_data.test must be a non-empty list of tests")
    tests = []
    for i, case in enumerate(cases):
        stdin = case.get("input") if isinstance(case, dict) else None
        stdout = case.get("output") if isinstance(case, dict) else None
        if not (isinstance(stdin, dict) and set(stdin) == {"stdin"} and isinstance(stdin["stdin"], str)):
            raise _refuse(f"test {i}: input must be {{'stdin': TEXT}} (files as other keys are not supported here)")
        if not (isinstance(stdout, dict) and set(stdout) == {"stdout"} and isinstance(stdout["stdout"], str)):
            raise _refuse(f"test {i}: output must be {{'stdout': TEXT}} (files as other keys are not supported here)")
        tests.append((stdin["stdin"], stdout["stdout"]))
    return tests


def _extra(config: TestConfig) -> dict[str, Any]:
    """``config.extra`` checked: run_all_cases and return_full_case (bools), memory_limit_MB, checker."""
    extra = dict(config.extra)
    unknown = sorted(set(extra) - set(EXTRA_KEYS))
    if unknown:
        raise _refuse(f"config.extra {unknown}: not supported here; supported keys: {list(EXTRA_KEYS)}")
    for key in ("run_all_cases", "return_full_case"):
        if not isinstance(extra.get(key, False), bool):
            raise _refuse(f"config.extra.{key} must be true or false")
    memory = extra.get("memory_limit_MB", -1)
    if not isinstance(memory, int) or (memory != -1 and memory < 16):
        raise _refuse("config.extra.memory_limit_MB must be -1 (no limit) or an integer >= 16")
    checker = extra.get("checker", SANDBOX_FUSION_CHECKER)
    if not isinstance(checker, str) or checker.partition(":")[0] in PROGRAM_CHECKERS:
        raise _refuse(
            f"config.extra.checker must be {SANDBOX_FUSION_CHECKER} (the default), tokens, float:EPS or icpc[:FLAGS] "
            "(no checker programs here)"
        )
    try:
        _checker(checker)
    except ValueError as exc:
        raise _refuse(f"config.extra.checker: {exc}") from None
    return extra


def _checker(spec: str) -> Checker:
    """``config.extra.checker``'s checker: SandboxFusion's compare by default, else one of ours."""
    return LinesChecker() if spec == SANDBOX_FUSION_CHECKER else make_checker(spec)


class _RecordingChecker:
    """Wraps a checker and keeps each checked test's output (``/submit`` reports it as the run's stdout)."""

    def __init__(self, spec: str):
        self.inner = _checker(spec)
        self.outputs: dict[str, bytes] = {}

    def check(self, input_data: bytes, output: bytes, answer: bytes):
        """The wrapped checker's decision."""
        return self.inner.check(input_data, output, answer)

    def check_case(self, case: TestCase, output: bytes):
        """Record ``output`` under the test's name, then decide as the wrapped checker."""
        self.outputs[case.name] = output
        return self.inner.check(case.input, output, case.answer)


def _clip(text: str) -> str:
    if len(text) <= TEST_INFO_CHARS:
        return text
    half = (TEST_INFO_CHARS - 3) // 2
    return text[:half] + "..." + text[-half:]


def _eval_case(test: TestResult, case: tuple[str, str], output: bytes | None, compiled, full: bool) -> EvalTestCase:
    """One judged test as SandboxFusion reports it: a WA still ran cleanly (exec_info Success, passed false)."""
    verdict = test.verdict
    ran_cleanly = verdict in (Verdict.AC, Verdict.WA, Verdict.PE)
    stdout = output.decode("utf-8", "replace") if output is not None else ""
    stderr = "" if ran_cleanly else test.message
    run_result = _command(
        Verdict.OK if ran_cleanly else verdict,
        test.exit_code,
        test.signal,
        test.wall_time_s,
        test.time_s,
        stdout,
        stderr,
    )
    run_result.verdict = verdict.value
    exec_info = RunCodeResponse(
        status="Success" if ran_cleanly else "Failed",
        compile_result=compiled,
        run_result=run_result,
        verdict=verdict.value,
    )
    passed = verdict == Verdict.AC
    clip = (lambda text: text) if full or not passed else _clip
    info = {"input": {"stdin": clip(case[0])}, "output": {"stdout": clip(case[1])}}
    return EvalTestCase(passed=passed, exec_info=exec_info, test_info=info, verdict=verdict.value)


def check_submission(
    request: SubmitRequest, caps: Caps = Caps()
) -> tuple[str, list[tuple[str, str]], dict[str, Any], Limits]:
    """What a ``/submit`` request asks for, checked before it waits for the sandbox: its judge language, tests,
    extra settings and limits; HTTPException 400 for what this server cannot judge, 422 for a timeout over ``caps``
    (400 for ``extra.memory_limit_MB``, as the other ``extra`` refusals)."""
    _dataset_type(request)
    config = request.config
    if config.language is None:
        raise _refuse("config.language field must exist for CommonOJDataset, got None")
    lang, tests, extra = judge_language(config.language), _tests(config), _extra(config)
    defaults = (COMPILED_RUN_TIMEOUT_S if compiles(lang) else INTERPRETED_RUN_TIMEOUT_S, COMPILE_TIMEOUT_S)
    limits = _limits(caps, config.run_timeout, config.compile_timeout, None, defaults, ("config",))
    memory = extra.get("memory_limit_MB", -1)
    if memory != -1:
        try:
            limits = dataclasses.replace(limits, memory_limit_mb=caps.memory("config.extra.memory_limit_MB", memory))
        except OverCap as exc:
            raise _refuse(str(exc)) from None
    return lang, tests, extra, limits


def judge_submission(request: SubmitRequest, backend: str, caps: Caps = Caps()) -> EvalResult:
    """Judge a ``/submit`` request with our judge (HTTPException 400 for what it cannot judge, 500 for a judge error,
    which is never the submission's fault)."""
    lang, tests, extra, limits = check_submission(request, caps)
    config = request.config
    code, kind = extract_code(request.completion, config.language)
    compiled = compiles(lang)
    checker = _RecordingChecker(extra.get("checker", SANDBOX_FUSION_CHECKER))
    run_all = extra.get("run_all_cases", False)
    cases = [TestCase(stdin.encode(), answer.encode(), str(i)) for i, (stdin, answer) in enumerate(tests)]
    result = judge(code, cases, lang=lang, checker=checker, limits=limits, stop_on_failure=not run_all, backend=backend)
    if result.verdict == Verdict.JE:
        raise HTTPException(status_code=500, detail=judge_error(result))
    compile_result = _compile_result(result, result.verdict != Verdict.CE) if compiled else None
    if result.verdict == Verdict.CE:
        failed = RunCodeResponse(status="Failed", compile_result=compile_result, verdict=Verdict.CE.value)
        if compile_result is None:  # CPython: the syntax error is the run's
            failed.run_result = CommandRunResult(
                status="Finished", return_code=1, stdout="", stderr=result.compile_output, verdict=Verdict.CE.value
            )
        evaluated = [EvalTestCase(passed=False, exec_info=failed, verdict=Verdict.CE.value)]
        evaluated *= len(tests) if run_all else 1
    else:
        judged = [t for t in result.tests if t.verdict != Verdict.SKIPPED]
        full = extra.get("return_full_case", False)
        evaluated = [
            _eval_case(t, tests[int(t.name)], checker.outputs.get(t.name), compile_result, full) for t in judged
        ]
    return EvalResult(
        id=request.id,
        accepted=result.verdict == Verdict.AC,
        extracted_code=code,
        tests=evaluated,
        extracted_type=kind,
        extra={
            "verdict": result.verdict.value,
            "test_verdicts": [t.verdict for t in evaluated],
            "message": result.message,
            "compile_output": result.compile_output,
        },
    )


class _FiniteJSONRequest(Request):
    """A request whose JSON body is read by ``load_json`` (NaN and Infinity refused), once."""

    async def json(self) -> Any:
        """The body as JSON (NonFiniteNumber for NaN, Infinity)."""
        if not hasattr(self, "_finite_json"):
            self._finite_json = load_json(await self.body())
        return self._finite_json


class _FiniteJSONRoute(APIRoute):
    """A route whose body may not hold NaN or Infinity: FastAPI's 422 naming the field, where FastAPI would read
    them as numbers (an infinite timeout; a NaN failed validation, then FastAPI could not write its own error: 500)."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        """The route's handler, behind the check."""
        handler = super().get_route_handler()

        async def finite(request: Request) -> Response:
            request = _FiniteJSONRequest(request.scope, request.receive)
            if request.method == "POST":
                try:
                    await request.json()
                except NonFiniteNumber as exc:
                    error = {"type": "finite_number", "loc": ["body", *exc.path], "msg": str(exc), "input": exc.text}
                    return JSONResponse({"detail": [error]}, status_code=422)
                except ValueError:
                    pass  # not JSON: FastAPI answers it (its 422 json_invalid)
            return await handler(request)

        return finite


def build_router(limited: Callable[..., Awaitable[Any]], backend: str, caps: Caps = Caps()) -> APIRouter:
    """SandboxFusion's routes over the server's judge: ``limited(fn, *args)`` runs fn under the server's
    concurrency cap, ``backend`` is the server's sandbox backend, ``caps`` the largest limits a request may ask."""
    router = APIRouter(route_class=_FiniteJSONRoute)

    @router.post("/run_code")
    async def run_code(request: RunCodeRequest) -> RunCodeResponse:
        stdin = (request.stdin or "").encode()
        limits = request.limits(caps)
        done = await limited(run_program, request.code, judge_language(request.language), stdin, limits, backend)
        return run_code_response(done)

    @router.post("/submit")
    async def submit(request: SubmitRequest) -> EvalResult:
        check_submission(request, caps)  # refusals answer at once, without waiting for a sandbox
        return await limited(judge_submission, request, backend, caps)

    @router.get("/v1/ping")
    async def ping() -> str:
        return "pong"

    return router
