"""What the SandboxFusion and Piston APIs of ``agentgspo sandbox-server`` share (docs/sandbox_apis.md).

``sandbox_fusion_api.py`` and ``piston_api.py`` each build a FastAPI router over this package's judge; the server
(``server.create_app``) mounts both under ``/compat/SECRET`` when it runs with ``--compat-apis``. Neither API's
client sends credentials, so the secret in the path is their authentication (``check_compat_secret``).

Here: which languages the judge runs (``judge_languages``, read from ``judge/languages.py`` on every call, so that a
language added there appears in both APIs), ``run_program`` (compile once where the language compiles, run once on
stdin: the "run this code" call both APIs have, where ``judge`` compares outputs with answers), the version of a
language as the sandbox runs it (``language_version``), the server's caps on the limits a request asks for
(``Caps``: ``sandbox-server --max-time-limit``, ``--max-memory-mb``) and a JSON reader that refuses NaN and Infinity
(``load_json``), which Python's ``json`` would read as numbers.
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass
from typing import Any

from agentgspo.core.errors import AgentGSPOError

from .judge import compile as compile_module
from .judge import languages as languages_module
from .judge.core import _compile, _run_spec, exec_result, missing_tool
from .registry import get_sandbox
from .results import ExecResult, JudgeResult, Limits, Verdict

#: The path segment the compat APIs are mounted under: ``/compat/SECRET/...``.
COMPAT_ROOT = "/compat"
#: A secret rides in URLs (and so in clients' logs): long enough not to be guessed, in URL-safe characters.
MIN_SECRET_CHARS = 16
_SECRET = re.compile(r"[A-Za-z0-9_-]+")
#: What "no memory limit" (SandboxFusion's ``memory_limit_MB=-1``, Piston's ``-1``) becomes: every run here has one.
NO_LIMIT_MEMORY_MB = 1024.0
#: The server's caps on what a compat request may ask (``sandbox-server --max-time-limit``, ``--max-memory-mb``).
DEFAULT_MAX_TIME_LIMIT_S, DEFAULT_MAX_MEMORY_MB = 60.0, 4096.0


class OverCap(ValueError, AgentGSPOError):
    """A limit a request names above the server's cap; ``field`` is the request's name for it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Caps:
    """The largest time (CPU or wall clock, run or compile, in seconds) and memory (MB) a compat request may ask
    for. A limit the request names above its cap is refused (``OverCap``, as Piston refuses a limit over its
    configured one); a default the server picks is lowered to the cap (``default_time``, ``default_memory``)."""

    max_time_s: float = DEFAULT_MAX_TIME_LIMIT_S
    max_memory_mb: float = DEFAULT_MAX_MEMORY_MB

    def __post_init__(self) -> None:
        if not 0 < self.max_time_s < math.inf:
            raise ValueError(f"--max-time-limit must be a finite number of seconds > 0, got {self.max_time_s!r}")
        if not 16 <= self.max_memory_mb < math.inf:
            raise ValueError(
                f"--max-memory-mb must be a finite number of MB >= 16 (an interpreter needs it), got "
                f"{self.max_memory_mb!r}"
            )

    def time(self, field: str, value: float, per_second: float = 1.0, unit: str = " s") -> float:
        """``value`` (in the request's unit: ``per_second`` of them make a second) in seconds; OverCap above the
        cap, naming ``field``, the cap in the request's unit and the server option."""
        seconds = value / per_second
        if seconds > self.max_time_s:
            limit = f"{self.max_time_s * per_second:.15g}{unit}"
            raise OverCap(
                field,
                f"{field} cannot exceed the configured limit of {limit} (this server's --max-time-limit "
                f"{self.max_time_s:g} s): send {field} <= {limit}, or raise the cap where the server starts",
            )
        return seconds

    def memory(self, field: str, value: float, per_mb: float = 1.0, unit: str = " MB") -> float:
        """``value`` (``per_mb`` of its unit make a MB) in MB; OverCap above the cap (see ``time``)."""
        megabytes = value / per_mb
        if megabytes > self.max_memory_mb:
            limit = f"{self.max_memory_mb * per_mb:.15g}{unit}"
            raise OverCap(
                field,
                f"{field} cannot exceed the configured limit of {limit} (this server's --max-memory-mb "
                f"{self.max_memory_mb:g}): send {field} <= {limit}, or raise the cap where the server starts",
            )
        return megabytes

    def default_time(self, seconds: float) -> float:
        """A time limit the request did not name, within the cap."""
        return min(seconds, self.max_time_s)

    def default_memory(self, megabytes: float) -> float:
        """A memory limit the request did not name (``-1``: none), within the cap."""
        return min(megabytes, self.max_memory_mb)


class NonFiniteNumber(ValueError, AgentGSPOError):
    """A request body holding NaN, Infinity or -Infinity (or a number too large for a float, read as infinity):
    not JSON (RFC 8259), though Python's ``json`` reads them. ``path`` is where (keys and list indices)."""

    def __init__(self, path: tuple, text: str):
        where = ".".join(map(str, path)) or "the body"
        super().__init__(f"{where}: {text} is not a finite number (JSON has no NaN or Infinity); send a finite number")
        self.path, self.text = path, text


class _Constant(str):
    """What ``load_json`` reads NaN, Infinity and -Infinity as, so that it can say where they stood."""


def _non_finite(value: Any, path: tuple = ()) -> tuple[tuple, str] | None:
    if isinstance(value, _Constant):
        return path, str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return path, "a number too large for a float"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite(item, (*path, key))
        if found is not None:
            return found
    return None


def load_json(body: bytes) -> Any:
    """The body as JSON; json.JSONDecodeError when it is none, NonFiniteNumber for NaN, Infinity, -Infinity and
    numbers beyond a float (1e999), naming where they stand."""
    value = json.loads(body, parse_constant=_Constant)
    found = _non_finite(value)
    if found is not None:
        raise NonFiniteNumber(*found)
    return value


def check_compat_secret(secret: str, token: str) -> None:
    """Refuse a secret that cannot guard the compat APIs: too short, not URL-safe, or the bearer token itself (which
    would then travel in URLs)."""
    if len(secret) < MIN_SECRET_CHARS or not _SECRET.fullmatch(secret):
        raise ValueError(
            f"the compat APIs' secret must be at least {MIN_SECRET_CHARS} characters of A-Z a-z 0-9 _ - (it is a "
            f"path segment), got {len(secret)} characters; make one with "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    if secret == token:
        raise ValueError("the compat APIs' secret must differ from the bearer token: the secret travels in URLs")


def compat_prefix(secret: str) -> str:
    """The path the compat APIs are served under."""
    return f"{COMPAT_ROOT}/{secret}"


def judge_languages() -> list[str]:
    """The judge's language names, read from ``judge/languages.py`` now (its ``LANGUAGES`` table, in its order)."""
    return list(languages_module.LANGUAGES)


def compiles(lang: str) -> bool:
    """Whether the judge compiles ``lang`` in the box before running it (C, C++; PyPy's syntax check): every language
    but the one its runner executes itself (CPython)."""
    return not languages_module.get_language(lang).in_runner


@dataclass
class ProgramRun:
    """One program, compiled where its language compiles and run once.

    compiled: the language has a compile stage. compile_ok / compile_output / compile_time_s: that stage (a Python
    syntax error is found by the run instead: ``run.verdict`` CE). run: the run, or for a compile error an ExecResult
    with verdict CE and the compiler's output as stderr; verdict JE when the sandbox failed (``run.error`` says why).
    """

    compiled: bool
    run: ExecResult
    compile_ok: bool = True
    compile_output: str = ""
    compile_time_s: float = 0.0


def run_program(source: str, lang: str, stdin: bytes, limits: Limits, backend: str = "local") -> ProgramRun:
    """Compile ``source`` (when ``lang`` compiles) and run it once on ``stdin`` in one sandbox of ``backend``.

    The judge's own compile and run steps, so that limits, measurements and verdicts (OK, TLE, MLE, OLE, RE, CE, JE)
    are the judge's, for every language it runs. Never raises for the program.
    """
    lang = languages_module.normalize_language(lang)
    compiled = compiles(lang)
    sandbox = get_sandbox(backend)
    missing = missing_tool(languages_module.get_language(lang), sandbox)  # not installed here: JE, not CE
    if missing is not None:
        return ProgramRun(compiled, ExecResult(verdict=Verdict.JE, error=missing))
    if lang == "cpp":
        compile_module.host_pch_dir(build=True)
    try:
        with sandbox.session(limits.pids_limit) as box:
            step = _compile(box, source, lang, limits)
            output, seconds = step.output, step.seconds
            if step.error is not None:
                failed = ExecResult(verdict=Verdict.JE, error=f"compilation could not run: {step.error}")
                return ProgramRun(compiled, failed)
            if not step.ok:
                failed = ExecResult(stderr=output, exit_code=1, verdict=Verdict.CE)
                return ProgramRun(compiled, failed, False, output, seconds)
            events = box.call(_run_spec(source, lang, box, limits, "stdio", "run"), [stdin])
    except Exception as exc:  # infrastructure: never the program's fault
        return ProgramRun(compiled, ExecResult(verdict=Verdict.JE, error=f"{type(exc).__name__}: {exc}"))
    return ProgramRun(compiled, exec_result(events, limits), True, output, seconds)


# Programs that print the version of what runs them: Python's, or GCC's for C and C++ (one source is both).
_PYTHON_VERSION = "import platform\nprint(platform.python_version())\n"
_GCC_VERSION = (
    "#include <stdio.h>\n"
    'int main(void) { printf("%d.%d.%d\\n", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__); return 0; }\n'
)
_versions: dict[tuple[str, str], str | None] = {}
_versions_lock = threading.Lock()


def language_version(lang: str, backend: str = "local") -> str | None:
    """The version of ``lang`` as the sandbox runs it ("3.11.2" for Python, the compiler's for C and C++), asked of
    the sandbox once per language and backend; None when neither probe runs (a language of another family)."""
    key = (lang, backend)
    with _versions_lock:
        if key in _versions:
            return _versions[key]
    probes = (_GCC_VERSION, _PYTHON_VERSION) if compiles(lang) else (_PYTHON_VERSION, _GCC_VERSION)
    limits = Limits(time_limit_s=10, memory_limit_mb=NO_LIMIT_MEMORY_MB, output_limit_mb=1)
    for probe in probes:
        done = run_program(probe, lang, b"", limits, backend).run
        version = done.stdout.strip()
        if done.verdict == Verdict.OK and re.fullmatch(r"\d+(\.\d+)*", version):
            with _versions_lock:
                _versions[key] = version
            return version
        if done.verdict == Verdict.JE:
            return None  # the sandbox failed: ask again next time
    with _versions_lock:
        _versions[key] = None
    return None


def judge_error(result: JudgeResult) -> str:
    """Why a JE result is one: its message, else its first JE test's (a checker's failure is reported there)."""
    failed = next((t.message for t in result.tests if t.verdict == Verdict.JE), "")
    return f"judge error (not the program's fault): {result.message or failed or 'no reason given'}"
