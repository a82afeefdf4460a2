"""Sandboxes and a CodeForces-grade judge (shipped as ``agentgspo.sandboxes``).

Public API (all functions are thread-safe; results are values, bad solutions never raise)::

    from agentgspo.sandboxes import run_python, judge, judge_problem, Limits, Verdict

    run_python(code, stdin="", *, limits=None, backend="local") -> ExecResult
        # stdout, stderr, exit_code, signal, cpu_time_s, wall_time_s, memory_mb, stdout_truncated,
        # stderr_truncated, timed_out, verdict (OK|TLE|MLE|OLE|RE|CE|JE), error. Default: 5 s, 256 MB, 1 MB out.
    judge(source, tests, *, lang="py", checker="tokens", interactor=None, limits=None,
          stop_on_failure=False, io_mode="stdio", backend="local", workers=None) -> JudgeResult
        # tests: [(input, answer)] | [{"input", "output"}] | [TestCase]; lang "py" | "cpp";
        # checker "tokens" | "float:EPS" | "testlib:PATH" | "openr1:PATH" | "kattis:PATH";
        # JudgeResult.verdict (AC WA PE TLE MLE RE CE OLE ILE, JE = judge error, never the solution's fault),
        # .tests[i].verdict/.time_s/.memory_mb/.message, .passed, .to_dict().
        # workers: tests run at once in the box (default: usable CPUs shared by concurrent submissions).
    load_problem(dir) / load_kattis_problem(dir) / problem_from_codeforces_row(row) -> Problem
    load_any_problem(dir) -> Problem             # by marker file: problem.json | problem.yaml | problem.xml
    load_any_package(dir) -> ProblemPackage      # the same, with statement and shipped solutions (for an env)
    load_kattis_package(dir) -> KattisPackage; judge_kattis(package, source, lang) -> JudgeResult (+ score, groups)
    judge_problem(problem, source, lang="py", *, backend="local", stop_on_failure=False) -> JudgeResult
    read_tests_dir(dir) -> [TestCase]            # NAME.in / NAME.ans pairs
    get_sandbox("local" | "docker" | "remote", **options) -> Sandbox   # shared, cached per options
    Limits(time_limit_s=2, memory_limit_mb=256, output_limit_mb=64, wall_limit_s=None, ...)

    async: ``await ajudge(...)`` and ``await arun_python(...)`` (same arguments) run the sync calls in a worker
    thread; ``RemoteSandbox.ajudge`` / ``arun_python`` are natively async.

Backends (``backend=`` takes a name or a Sandbox instance):
    local   bubblewrap + rlimits + cgroups (default). Refuses to run without bubblewrap unless
            ``get_sandbox("local", allow_unisolated=True)``. See ``sandboxes/local.py`` for the threat model.
    docker  warm hardened containers on ``$AGENTGSPO_DOCKER_HOST`` (default unix:///run/agentgspo-docker.sock,
            started with ``.ci/setup_sandboxes.sh``); ``get_sandbox("docker", pool_size=8)``.
    remote  ``agentgspo sandbox-server`` instances: ``get_sandbox("remote", endpoints=[URL], token=TOKEN)`` or
            ``$AGENTGSPO_SANDBOX_URLS`` and ``$AGENTGSPO_SANDBOX_TOKEN``.

Layout: ``results.py`` and ``submission.py`` (values), ``protocol.py`` (Sandbox/Session protocol), ``registry.py``
(``get_sandbox``), ``runner.py`` (runs inside the box), ``local.py``, ``docker_backend.py``, ``remote.py`` +
``server.py`` (backends), ``cgroups.py``, ``judge/`` (``core.py`` judging, ``checkers.py``, ``compile.py``,
``testlib.py``, ``testdata.py`` (``Problem``), ``problems.py`` (facade); ``formats/``: every problem format and their
registry (``registry.py``, ``own_format.py``, ``kattis.py`` (+ ``kattis_package.py``, ``kattis_grading.py``,
``kattis_interactor.py``), ``polygon.py``, ``openr1.py``); ``languages.py``: which submission languages run).
"""

from __future__ import annotations

import asyncio

from .judge import TestCase, judge, language_of, run_python
from .judge.formats.kattis import KattisPackage, judge_kattis, load_kattis_package
from .judge.problems import (
    Problem,
    judge_problem,
    load_any_package,
    load_any_problem,
    load_kattis_problem,
    load_problem,
    problem_from_codeforces_row,
    read_tests_dir,
)
from .protocol import Sandbox, SandboxUnavailable, Session
from .registry import get_sandbox
from .results import ExecResult, JudgeResult, Limits, TestResult, Verdict


async def ajudge(*args, **kwargs) -> JudgeResult:
    """Async ``judge``: runs it in a worker thread (same arguments)."""
    return await asyncio.to_thread(judge, *args, **kwargs)


async def arun_python(*args, **kwargs) -> ExecResult:
    """Async ``run_python``: runs it in a worker thread (same arguments)."""
    return await asyncio.to_thread(run_python, *args, **kwargs)


__all__ = [
    "ExecResult",
    "JudgeResult",
    "KattisPackage",
    "Limits",
    "Problem",
    "Sandbox",
    "SandboxUnavailable",
    "Session",
    "TestCase",
    "TestResult",
    "Verdict",
    "ajudge",
    "arun_python",
    "get_sandbox",
    "judge",
    "judge_kattis",
    "judge_problem",
    "language_of",
    "load_any_package",
    "load_any_problem",
    "load_kattis_package",
    "load_kattis_problem",
    "load_problem",
    "problem_from_codeforces_row",
    "read_tests_dir",
    "run_python",
]
