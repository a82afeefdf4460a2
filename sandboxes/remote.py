"""Remote backend: an httpx async client for ``agentgspo sandbox-server`` instances, to scale execution out.

The unit of remote work is a whole submission (``/judge``) or a whole program run (``/run_python``): answers and
jury programs travel to the server, which judges with its own local or Docker backend. Requests are spread over
several endpoints (round robin), retried with exponential backoff on connection errors, 429, 500, 502 and 503,
and capped by a client-side concurrency limit. A request that times out waiting for its answer (here, or at a
proxy: 504) is not retried (the server may still be running it; a retry would run it twice): it ends as a JE
result saying so. The sync methods run the async ones on a private event-loop thread, so any number of worker
threads may call them at once.

A fleet (``agentgspo fleet up``): ``endpoints="fleet:MANIFEST"`` (or ``AGENTGSPO_SANDBOX_URLS=fleet:MANIFEST``) sends
work to the fleet's healthy sandbox servers as its manifest lists them now, with the fleet's token. A server that
dies under a request is the supervisor's to replace: the request waits for a healthy server (up to ``fleet_wait_s``)
and is sent again, rather than ending as a judge error after a few quick retries; it fails at once when the fleet
has no sandbox server left that could come back (every one ``failed``, or the fleet stopped).

The judge's compile cache (``judge/compile_cache.py``) is off in this client (nothing is compiled here): each
server compiles through its own, and the ``compile_cache`` of the verdicts it returns says whether it hit.

Threat model: the server's backend isolates the code (see ``local.py`` / ``docker_backend.py``); this client adds
bearer-token authentication and nothing else. Use TLS (a reverse proxy) between machines you do not control; the
token grants running code and jury programs on the server.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import threading
import time
from pathlib import Path

from agentgspo.core.fleet_manifest import FleetFollower

from .protocol import SandboxUnavailable
from .results import ExecResult, JudgeResult, Limits, Verdict
from .submission import PROGRAM_CHECKERS, TestCase

__all__ = ["RemoteSandbox"]


def _detail(response) -> str:
    """The ``detail`` of a FastAPI error response, or its text."""
    try:
        return str(response.json().get("detail"))[:500]
    except ValueError:
        return response.text[:500]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class _Retry(Exception):
    """An attempt failed in a way another attempt may fix (no connection, 429, 500, 502, 503)."""


class RemoteSandbox:
    """Client for one or more sandbox servers. Thread-safe; also usable from asyncio (``ajudge``, ``arun_python``).

    endpoints: base URLs (default ``$AGENTGSPO_SANDBOX_URLS``, comma-separated), or ``fleet:MANIFEST``; token: bearer
    token (default ``$AGENTGSPO_SANDBOX_TOKEN``; a fleet's own); max_concurrency: requests in flight at once; retries:
    extra attempts per request; backoff_s: first retry delay (doubles each attempt); timeout_s: per-request timeout;
    fleet_wait_s: how long a request waits for a healthy sandbox server of a fleet.
    """

    name = "remote"

    def __init__(
        self,
        endpoints: "list[str] | str | None" = None,
        token: str | None = None,
        max_concurrency: int = 32,
        retries: int = 3,
        backoff_s: float = 0.2,
        timeout_s: float = 600.0,
        fleet_wait_s: float = 300.0,
    ) -> None:
        if endpoints is None:
            endpoints = os.environ.get("AGENTGSPO_SANDBOX_URLS", "")
        if isinstance(endpoints, str):
            endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
        fleets = [e for e in endpoints if e.startswith("fleet:")]
        if fleets and len(endpoints) > 1:
            raise ValueError(f"sandbox endpoints {endpoints}: a fleet (fleet:MANIFEST) is the only entry when given")
        self.fleet_manifest = Path(fleets[0].removeprefix("fleet:")) if fleets else None
        self.fleet_wait_s = fleet_wait_s
        self._fleet: FleetFollower | None = None
        if self.fleet_manifest is not None:
            try:
                self._fleet = FleetFollower(self.fleet_manifest)
            except FileNotFoundError as exc:
                raise SandboxUnavailable(str(exc)) from None
            fleet = self._fleet.read()
            if not any(part.kind == "sandbox" for part in fleet.parts):
                raise SandboxUnavailable(
                    f"fleet {fleet.fleet} ({self.fleet_manifest}) has no sandbox servers: add a `sandboxes:` group to "
                    f"its fleet file {fleet.spec}"
                )
            token = token if token is not None else fleet.sandbox_token()
            endpoints = []
        if not endpoints and self.fleet_manifest is None:
            raise SandboxUnavailable(
                "the remote backend needs endpoints: pass endpoints=[...] or set "
                "AGENTGSPO_SANDBOX_URLS=http://host:8910 "
                "(start one with `agentgspo sandbox-server`)"
            )
        if max_concurrency < 1 or retries < 0:  # a semaphore of 0 waits forever; no attempt at all never succeeds
            raise ValueError(
                f"the remote backend needs max_concurrency >= 1 and retries >= 0, got "
                f"max_concurrency={max_concurrency}, retries={retries}"
            )
        self.endpoints = [e.rstrip("/") for e in endpoints]  # a fleet's are read from its manifest per request
        self.token = token if token is not None else os.environ.get("AGENTGSPO_SANDBOX_TOKEN", "")
        if not self.token.strip() or any(c in self.token for c in "\r\n\0"):
            # else httpx fails on the first request with "Illegal header value b'Bearer '"
            raise SandboxUnavailable(
                "the remote backend needs the sandbox server's bearer token: set "
                "AGENTGSPO_SANDBOX_TOKEN=<token> (the one `agentgspo sandbox-server` was started "
                "with, --token or its AGENTGSPO_SANDBOX_TOKEN) or pass token=... to "
                "get_sandbox('remote', ...); a token is one line without spaces at its ends"
            )
        (self.max_concurrency, self.retries, self.backoff_s, self.timeout_s) = (
            max_concurrency,
            retries,
            backoff_s,
            timeout_s,
        )
        self._cycle = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()
        self._clients: dict[int, tuple] = {}  # id(loop) -> (loop, httpx.AsyncClient, Semaphore)

    def session(self, limits_pids: int = 64):
        """Not supported: the remote backend works at submission level (``judge`` / ``run_python``)."""
        raise NotImplementedError(
            "the remote backend judges whole submissions; call judge() or run_python() with backend='remote'"
        )

    # --- async core ---------------------------------------------------------------------------------------
    def _client(self):
        import httpx

        loop = asyncio.get_running_loop()
        # One client per event loop (httpx clients and semaphores are bound to theirs). Entries of loops that were
        # closed since (each asyncio.run makes a new one) are dropped, so their clients and sockets are freed and a
        # new loop that reuses a dead loop's id never gets its client.
        stale = [
            key
            for key, (other, _, _) in self._clients.items()
            if other.is_closed() or (key == id(loop) and other is not loop)
        ]
        for key in stale:
            del self._clients[key]
        if id(loop) not in self._clients:
            limits = httpx.Limits(max_connections=self.max_concurrency)
            self._clients[id(loop)] = (
                loop,
                httpx.AsyncClient(timeout=self.timeout_s, limits=limits),
                asyncio.Semaphore(self.max_concurrency),
            )
        return self._clients[id(loop)][1:]

    async def _attempt(self, client, url: str, payload: dict, headers: dict) -> dict:
        """One POST. Returns the answer; raises ``_Retry`` for what another attempt may fix (no connection, 429, 500,
        502, 503), ConnectionError for what must not be sent twice (a timeout: the server may still be running it),
        ValueError for a refused request and RuntimeError for any other status."""
        import httpx

        try:
            response = await client.post(url, json=payload, headers=headers)
        except httpx.ReadTimeout as exc:
            # The request was sent and the server may still be running it: a retry would duplicate work.
            raise ConnectionError(
                f"{url}: no response within {self.timeout_s} s ({type(exc).__name__}); "
                "not retried, since the server may still be running it"
            ) from None
        except httpx.HTTPError as exc:
            raise _Retry(f"{url}: {type(exc).__name__}: {exc}") from None
        if response.status_code == 200:
            return response.json()
        error = f"{url}: HTTP {response.status_code}: {response.text[:300]}"
        if response.status_code == 422:  # bad input (language, checker, limits...): the caller's to fix
            raise ValueError(f"{url}: the sandbox server refused the request: {_detail(response)}")
        if response.status_code == 504:  # a proxy gave up waiting: the server may still be running it
            raise ConnectionError(f"{error}; not retried, since the server may still be running it")
        if response.status_code in (429, 500, 502, 503):
            raise _Retry(error)
        raise RuntimeError(error)

    async def _post(self, path: str, payload: dict) -> dict:
        """POST with round robin over endpoints, retries with exponential backoff, and the concurrency cap."""
        client, gate = self._client()
        headers = {"Authorization": f"Bearer {self.token}"}
        last_error = ""
        async with gate:
            if self.fleet_manifest is not None:
                return await self._post_to_fleet(client, path, payload, headers)
            # Round robin picks where a request starts; its retries then walk the other endpoints in turn, so a
            # dead endpoint cannot take every attempt of one request while concurrent requests share the cycle.
            first = next(self._cycle)
            for attempt in range(self.retries + 1):
                url = self.endpoints[(first + attempt) % len(self.endpoints)] + path
                try:
                    return await self._attempt(client, url, payload, headers)
                except _Retry as exc:
                    last_error = str(exc)
                if attempt < self.retries:
                    await asyncio.sleep(self.backoff_s * 2**attempt)
        raise ConnectionError(f"sandbox server unreachable after {self.retries + 1} attempts; last: {last_error}")

    async def _post_to_fleet(self, client, path: str, payload: dict, headers: dict) -> dict:
        """A fleet's request: sent to a healthy server of the manifest; after a failure, sent again (to whichever
        server is healthy by then: the supervisor restarts a dead one on a new port) until ``fleet_wait_s``."""
        deadline = time.monotonic() + self.fleet_wait_s
        last_error, delay = "no healthy sandbox server in the manifest yet", self.backoff_s
        while True:
            endpoints = self._fleet.serving_urls("sandbox")
            if endpoints:
                url = endpoints[next(self._cycle) % len(endpoints)] + path
                try:
                    return await self._attempt(client, url, payload, headers)
                except _Retry as exc:
                    last_error = str(exc)
            if time.monotonic() + delay > deadline:
                raise ConnectionError(
                    f"no sandbox server of fleet {self.fleet_manifest} answered within {self.fleet_wait_s} s "
                    f"(fleet_wait_s); last: {last_error}"
                )
            await asyncio.sleep(delay)
            delay = min(2 * delay, 1.0)  # the manifest changes within a second of a death; look that often

    async def ajudge(
        self,
        source: str,
        tests,
        *,
        lang: str = "py",
        checker="tokens",
        interactor=None,
        limits: Limits | None = None,
        stop_on_failure: bool = False,
        io_mode: str = "stdio",
    ) -> JudgeResult:
        """Judge on a server (arguments as ``sandboxes.judge``); transport failures give a JE result."""
        limits = limits or Limits()
        cases = [TestCase.coerce(t, i) for i, t in enumerate(tests)]
        payload: dict = {
            "source": source,
            "lang": lang,
            "limits": limits.to_dict(),
            "stop_on_failure": stop_on_failure,
            "io_mode": io_mode,
            "checker": "tokens",
            "tests": [{"name": c.name, "input_b64": _b64(c.input), "answer_b64": _b64(c.answer)} for c in cases],
        }
        if isinstance(checker, str):
            capture = "capture:" if checker.startswith("capture:") else ""  # the output as the message
            inner = checker.removeprefix(capture)
            kind, _, arg = inner.partition(":")
            if kind in PROGRAM_CHECKERS:  # the program travels with the request
                if not arg or not Path(arg).is_file():
                    raise ValueError(f"bad checker {checker!r}: checker program {arg!r} does not exist")
                payload["checker"] = capture + kind
                payload["checker_program"] = {"name": Path(arg).name, "data_b64": _b64(Path(arg).read_bytes())}
            else:
                payload["checker"] = checker
        elif checker is not None:
            raise ValueError(
                "the remote backend takes checkers as strings (tokens, float:EPS, icpc[:FLAGS], testlib:PATH, "
                "openr1:PATH, kattis:PATH, capture[:SPEC]), not checker objects"
            )
        if interactor is not None:
            payload["interactor"] = {"name": Path(interactor).name, "data_b64": _b64(Path(interactor).read_bytes())}
        try:
            return JudgeResult.from_dict(await self._post("/judge", payload))
        except (ConnectionError, RuntimeError) as exc:
            return JudgeResult(Verdict.JE, message=str(exc))

    async def ajudge_package(
        self,
        archive: bytes,
        source: str,
        *,
        lang: str = "py",
        package_format: str = "kattis",
        time_limit_s: float | None = None,
        memory_limit_mb: float | None = None,
        output_limit_mb: float | None = None,
        calibrate: bool = False,
    ) -> JudgeResult:
        """Judge ``source`` on a whole problem package (a gzipped tar, see ``judge.formats.kattis``) on a server, which
        judges it with the same code as the local backend; ``calibrate``: the server calibrates the package's limit
        to itself (``judge/calibration.py``; the archive holds the submissions); transport failures give a JE
        result."""
        payload = {
            "format": package_format,
            "archive_b64": _b64(archive),
            "source": source,
            "lang": lang,
            "time_limit_s": time_limit_s,
            "memory_limit_mb": memory_limit_mb,
            "output_limit_mb": output_limit_mb,
            "calibrate": calibrate,
        }
        try:
            return JudgeResult.from_dict(await self._post("/judge_package", payload))
        except (ConnectionError, RuntimeError) as exc:
            return JudgeResult(Verdict.JE, message=str(exc))

    async def arun_python(self, code: str, stdin: bytes | str = b"", *, limits: Limits | None = None) -> ExecResult:
        """Run a Python program on a server; transport failures give a JE result."""
        limits = limits or Limits(time_limit_s=5.0, memory_limit_mb=256, output_limit_mb=1.0)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        try:
            out = await self._post("/run_python", {"code": code, "stdin_b64": _b64(data), "limits": limits.to_dict()})
        except (ConnectionError, RuntimeError) as exc:
            return ExecResult(verdict=Verdict.JE, error=str(exc))
        out["verdict"] = Verdict(out["verdict"])
        return ExecResult(**out)

    # --- sync wrappers (used by sandboxes.judge / run_python with backend="remote") --------------------------
    def _run(self, coro):
        with self._loop_lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, daemon=True, name="agentgspo-remote").start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def judge_remote(self, source: str, tests, **kwargs) -> JudgeResult:
        """Synchronous ``ajudge``; safe from any thread."""
        return self._run(self.ajudge(source, tests, **kwargs))

    async def amachine_fingerprint(self) -> str:
        """What every server (of the endpoints, or the fleet's serving ones) reports about its machine (``/health``'s
        ``machine``: its backend kind, CPU model and count). ValueError when they differ (a time calibrated on one
        would be applied on another: calibrate on each, as ``judge_kattis(calibrate=True)`` does server-side) or a
        server reports none (an older server: upgrade it); ConnectionError when one does not answer."""
        import httpx

        client, _ = self._client()
        urls = self._fleet.serving_urls("sandbox") if self._fleet is not None else self.endpoints
        if not urls:
            raise ConnectionError(f"no healthy sandbox server in fleet {self.fleet_manifest} to ask for its machine")
        reports = {}
        for url in urls:
            try:
                response = await client.get(url + "/health")
                response.raise_for_status()
            except httpx.HTTPError as exc:
                raise ConnectionError(f"{url}/health: {type(exc).__name__}: {exc}") from None
            machine = response.json().get("machine")
            if not machine:
                raise ValueError(
                    f"{url}: the sandbox server does not report its machine (/health has no 'machine'): upgrade it "
                    "to calibrate time limits through it"
                )
            reports[url] = machine
        if len(set(reports.values())) > 1:
            raise ValueError(
                "the sandbox servers run on different machines, so one calibration cannot hold for all: "
                + "; ".join(f"{url}: {machine}" for url, machine in reports.items())
                + ". Calibrate a Kattis package server-side (judge_kattis(calibrate=True)), or point the remote "
                "backend at servers of one machine"
            )
        return next(iter(reports.values()))

    def machine_fingerprint(self) -> str:
        """Synchronous ``amachine_fingerprint``."""
        return self._run(self.amachine_fingerprint())

    def judge_package_remote(self, archive: bytes, source: str, **kwargs) -> JudgeResult:
        """Synchronous ``ajudge_package``; safe from any thread."""
        return self._run(self.ajudge_package(archive, source, **kwargs))

    def run_remote(self, code: str, stdin: bytes | str = b"", *, limits: Limits | None = None) -> ExecResult:
        """Synchronous ``arun_python``; safe from any thread."""
        return self._run(self.arun_python(code, stdin, limits=limits))
