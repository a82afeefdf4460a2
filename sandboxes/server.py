"""The sandbox server behind the remote backend (``agentgspo sandbox-server``): FastAPI, token auth, a concurrency cap.

Endpoints:
    GET  /health       no auth; ``{"status": "ok", "backend", "machine", "in_flight", "max_concurrency"}``
                       (``machine``: ``calibration.machine_fingerprint`` of the server's backend)
    POST /run_python   ``RunRequest`` -> ``ExecResult.to_dict()``
    POST /judge        ``JudgeRequest`` -> ``JudgeResult.to_dict()``
    POST /judge_package  ``PackageJudgeRequest`` (a Kattis package as a tar) -> ``JudgeResult.to_dict()``; with
                       ``calibrate`` the package's limit is calibrated here, to this server's machine and backend
                       (``judge/calibration.py``, cached in the server's ``$AGENTGSPO_CACHE``)
    /compat/SECRET/...   only with ``compat_secret`` (``--compat-apis``): SandboxFusion's /run_code, /submit,
                         /v1/ping (``sandbox_fusion_api.py``) and Piston's /api/v2/execute, /api/v2/runtimes
                         (``piston_api.py``); docs/sandbox_apis.md. Their time and memory limits are capped
                         (``max_time_limit_s``, ``max_memory_mb``: ``--max-time-limit``, ``--max-memory-mb``)
Every POST needs ``Authorization: Bearer TOKEN``, checked before the body is read (401, whatever the body), except
under ``/compat/SECRET`` with the right secret (those APIs' clients send no credentials); a body over
``max_body_mb`` is 413, compat paths included. At most ``max_concurrency`` requests execute at once; the others
wait in the server (the client has its own limit too). The server judges with one of its own backends (local or
docker), so the threat model is that backend's; checker and interactor programs sent by clients run unsandboxed
on the server like any jury program, which is why the token is mandatory. The server's judge compiles through its
own compile cache (``judge/compile_cache.py``, in the server's ``$AGENTGSPO_CACHE``); each verdict's
``compile_cache`` says whether it hit.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import io
import os
import stat
import tarfile
import tempfile
from typing import Literal

from pydantic import BaseModel, Field

from .compat_apis import (
    COMPAT_ROOT,
    DEFAULT_MAX_MEMORY_MB,
    DEFAULT_MAX_TIME_LIMIT_S,
    Caps,
    check_compat_secret,
    compat_prefix,
)
from .judge.calibration import machine_fingerprint
from .judge.compile_cache import cache_limit_bytes
from .judge.core import judge, run_python
from .judge.formats.kattis import judge_kattis
from .registry import get_sandbox
from .results import Limits
from .submission import PROGRAM_CHECKERS

__all__ = ["RunRequest", "TestModel", "ProgramModel", "JudgeRequest", "PackageJudgeRequest", "create_app"]


class RunRequest(BaseModel):
    """Run a Python program with stdin."""

    code: str
    stdin_b64: str = ""
    limits: Limits = Field(default_factory=Limits)  # pydantic validates the dataclass


class TestModel(BaseModel):
    """One test: base64 input and answer."""

    name: str = ""
    input_b64: str
    answer_b64: str = ""


class ProgramModel(BaseModel):
    """A jury program (checker or interactor) shipped by the client: its file name and bytes."""

    name: str
    data_b64: str


class JudgeRequest(BaseModel):
    """Judge a source on tests (see ``sandboxes.judge.judge``)."""

    source: str
    lang: str = "py"
    tests: list[TestModel]
    checker: str = "tokens"  # tokens | float:EPS | icpc | testlib | openr1 | kattis (the program in checker_program),
    # any of them after capture: (the output as the message)
    checker_program: ProgramModel | None = None
    interactor: ProgramModel | None = None
    limits: Limits = Field(default_factory=Limits)  # pydantic validates the dataclass
    stop_on_failure: bool = False
    io_mode: str = "stdio"


MAX_PACKAGE_BYTES = 4 << 30  # unpacked size of a package sent to /judge_package


class PackageJudgeRequest(BaseModel):
    """Judge a source on a whole problem package (``judge.formats.kattis``): the package as a base64 gzipped tar."""

    format: Literal["kattis"] = "kattis"
    archive_b64: str
    source: str
    lang: str = "py"
    time_limit_s: float | None = Field(default=None, gt=0)
    memory_limit_mb: float | None = Field(default=None, gt=0)
    output_limit_mb: float | None = Field(default=None, gt=0)
    calibrate: bool = False  # scale the package's own limit to this server (the archive holds its submissions)


def _b64decode(value: str, field: str) -> bytes:
    """Strict base64 (``b64decode`` alone drops stray characters, so text sent unencoded became other bytes)."""
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise ValueError(f"{field}: not valid base64 ({exc}); send the bytes base64-encoded") from None


def _write_program(directory: str, program: ProgramModel) -> str:
    path = os.path.join(directory, os.path.basename(program.name) or "program")
    with open(path, "wb") as f:
        f.write(_b64decode(program.data_b64, "data_b64"))
    os.chmod(path, stat.S_IRWXU)
    return path


def _judge_request(request: JudgeRequest, backend: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="agentgspo-server-") as tmp:
        capture = "capture:" if request.checker.startswith("capture:") else ""  # the output as the message
        checker = request.checker.removeprefix(capture)
        if checker.partition(":")[0] in PROGRAM_CHECKERS and checker not in PROGRAM_CHECKERS:
            raise ValueError(
                f"checker {request.checker!r}: a path on the client means nothing here; send the kind "
                "(testlib, openr1 or kattis) as checker and the program in checker_program"
            )
        if checker in PROGRAM_CHECKERS:
            if request.checker_program is None:
                raise ValueError(f"checker {request.checker!r} needs checker_program")
            checker = f"{checker}:{_write_program(tmp, request.checker_program)}"
        checker = capture + checker
        interactor = _write_program(tmp, request.interactor) if request.interactor else None
        tests = [
            (_b64decode(t.input_b64, f"tests[{i}].input_b64"), _b64decode(t.answer_b64, f"tests[{i}].answer_b64"))
            for i, t in enumerate(request.tests)
        ]
        result = judge(
            request.source,
            tests,
            lang=request.lang,
            checker=checker,
            interactor=interactor,
            limits=request.limits,
            stop_on_failure=request.stop_on_failure,
            io_mode=request.io_mode,
            backend=backend,
        )
    for test, wire in zip(result.tests, request.tests):
        test.name = wire.name or test.name
    return result.to_dict()


def _judge_package_request(request: PackageJudgeRequest, backend: str) -> dict:
    """Unpack the package into a private folder (the tar's ``data`` filter refuses links out, absolute paths and
    devices) and judge it there with this server's backend."""
    archive = _b64decode(request.archive_b64, "archive_b64")
    with tempfile.TemporaryDirectory(prefix="agentgspo-package-") as tmp:
        try:
            with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
                unpacked = sum(member.size for member in tar.getmembers())
                if unpacked > MAX_PACKAGE_BYTES:  # a small gzip can hold a huge package
                    raise ValueError(
                        f"archive_b64: the package unpacks to {unpacked} bytes, over the server's "
                        f"limit of {MAX_PACKAGE_BYTES}"
                    )
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise ValueError(f"archive_b64: not a readable package archive ({exc})") from None
        result = judge_kattis(
            tmp,
            request.source,
            request.lang,
            backend=backend,
            time_limit_s=request.time_limit_s,
            memory_limit_mb=request.memory_limit_mb,
            output_limit_mb=request.output_limit_mb,
            calibrate=request.calibrate,
        )
    return result.to_dict()


def _compat_path(path: str, secret: bytes | None) -> bool:
    """Whether ``path`` is under ``/compat/SECRET/`` with this server's secret (compared in constant time)."""
    root, _, rest = path.lstrip("/").partition("/")
    if secret is None or f"/{root}" != COMPAT_ROOT:
        return False
    return hmac.compare_digest(rest.partition("/")[0].encode(), secret)


def _guard(app, token: str, max_body_bytes: int, compat_secret: str | None = None):
    """ASGI wrapper: a POST without the token gets 401 before its body is read (an unauthenticated client could
    otherwise make the server buffer any amount, and a broken body got 422 before auth); a body over the limit: 413.
    A POST under ``/compat/SECRET/`` with the right secret needs no token (its clients send none); the body limit
    still applies. Any other path, a wrong secret's included, needs the token."""
    import json

    expected = f"Bearer {token}".encode()
    secret = compat_secret.encode() if compat_secret else None

    async def reply(send, status: int, detail: str, compat: bool = False) -> None:
        # Piston's clients read errors from "message", FastAPI's (ours, SandboxFusion's) from "detail"
        body = json.dumps({"detail": detail, "message": detail} if compat else {"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def guarded(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        compat = _compat_path(scope["path"], secret)
        headers = dict(scope["headers"])
        if not compat and not hmac.compare_digest(headers.get(b"authorization", b""), expected):
            return await reply(send, 401, "missing or wrong bearer token")
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > max_body_bytes:
                return await reply(
                    send,
                    413,
                    f"request body over the server's limit of {max_body_bytes} bytes (sandbox-server --max-body-mb)",
                    compat,
                )
            if not message.get("more_body"):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await app(scope, replay, send)

    return guarded


def create_app(
    token: str,
    backend: str = "local",
    max_concurrency: int = 8,
    max_body_mb: float = 512.0,
    compat_secret: str | None = None,
    max_time_limit_s: float = DEFAULT_MAX_TIME_LIMIT_S,
    max_memory_mb: float = DEFAULT_MAX_MEMORY_MB,
):
    """Build the FastAPI app. ``token`` must be non-empty; ``backend`` is the server's own sandbox backend.
    ``compat_secret``: serve SandboxFusion's and Piston's APIs under ``/compat/SECRET`` (off when None), whose
    requests may ask for at most ``max_time_limit_s`` seconds (CPU or wall clock, run or compile) and
    ``max_memory_mb`` MB (``compat_apis.Caps``)."""
    from fastapi import FastAPI, HTTPException

    if not token:
        raise ValueError("the sandbox server needs a token (--token or AGENTGSPO_SANDBOX_TOKEN)")
    if compat_secret is not None:
        check_compat_secret(compat_secret, token)
    caps = Caps(max_time_limit_s, max_memory_mb)
    if max_concurrency < 1:  # a semaphore of 0 would make every request wait forever
        raise ValueError(f"max_concurrency (--max-concurrency) must be >= 1, got {max_concurrency}")
    get_sandbox(backend)  # fail at start, with the fix, when the backend cannot run here
    cache_limit_bytes()  # a bad AGENTGSPO_COMPILE_CACHE_MB fails the start, not every request
    machine = machine_fingerprint(backend)
    app = FastAPI(title="agentgspo sandbox server")
    gate = asyncio.Semaphore(max_concurrency)
    state = {"in_flight": 0}

    async def limited(fn, *args):
        async with gate:
            state["in_flight"] += 1
            try:
                return await asyncio.to_thread(fn, *args)
            finally:
                state["in_flight"] -= 1

    @app.get("/health")
    async def health() -> dict:
        return {
            "status": "ok",
            "backend": backend,
            "machine": machine,
            "in_flight": state["in_flight"],
            "max_concurrency": max_concurrency,
        }

    @app.post("/run_python")  # every POST's token is checked by _guard, before its body is read
    async def run_python_endpoint(request: RunRequest) -> dict:
        limits = request.limits
        try:
            stdin = _b64decode(request.stdin_b64, "stdin_b64")
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        result = await limited(lambda: run_python(request.code, stdin, limits=limits, backend=backend))
        return result.to_dict()

    @app.post("/judge")
    async def judge_endpoint(request: JudgeRequest) -> dict:
        try:
            return await limited(_judge_request, request, backend)
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None

    @app.post("/judge_package")
    async def judge_package_endpoint(request: PackageJudgeRequest) -> dict:
        try:
            return await limited(_judge_package_request, request, backend)
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None

    if compat_secret is not None:  # out of /docs and /openapi.json: the paths hold the secret
        from . import piston_api, sandbox_fusion_api

        prefix, hidden = compat_prefix(compat_secret), {"include_in_schema": False}
        app.include_router(sandbox_fusion_api.build_router(limited, backend, caps), prefix=prefix, **hidden)
        app.include_router(piston_api.build_router(limited, backend, caps), prefix=f"{prefix}/api/v2", **hidden)
    return _guard(app, token, int(max_body_mb * 1024 * 1024), compat_secret)
