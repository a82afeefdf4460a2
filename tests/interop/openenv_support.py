"""Servers of the OpenEnv tests, run by the openenv venv's Python (openenv 0.10 cannot share a venv with vLLM or
verifiers 0.4: pyproject.toml's openenv extra). `.ci/run` makes that venv; without it the tests skip, saying how."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import stop_group  # tests/servers.py

ROOT = Path(__file__).resolve().parents[2]
#: The openenv venv's Python: $AGENTGSPO_OPENENV_PYTHON, else ROOT/.venv-openenv/bin/python.
OPENENV_PYTHON = Path(os.environ.get("AGENTGSPO_OPENENV_PYTHON", ROOT / ".venv-openenv" / "bin" / "python"))
MAKE_VENV = (
    'python3 -m venv .venv-openenv && .venv-openenv/bin/pip install "torch==2.13.0" -e ".[envs,openenv]" '
    "(what .ci/run does)"
)


def openenv_python() -> Path:
    """The openenv venv's Python, or a skip naming the command that makes it."""
    if not OPENENV_PYTHON.exists():
        pytest.skip(f"no openenv venv at {OPENENV_PYTHON}: make it with {MAKE_VENV}")
    return OPENENV_PYTHON


@contextlib.contextmanager
def served(
    args: list[str], *, marker: str = "http://", timeout_s: float = 120.0
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start ``python ARGS`` with the openenv venv; yield (the URL its first line names, the process) once it
    printed it; SIGTERM its process group afterwards (SIGKILL if it outlives 30 s)."""
    process = subprocess.Popen(
        [str(openenv_python()), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    output = []
    try:
        while True:
            try:
                line = lines.get(timeout=timeout_s)
            except queue.Empty:
                raise AssertionError(f"{args} printed no URL in {timeout_s} s: {''.join(output)}") from None
            output.append(line)
            if marker in line:
                url = line[line.index(marker) :].split()[0].rstrip(")")
                break
            if process.poll() is not None:
                raise AssertionError(f"{args} exited {process.returncode}: {''.join(output)}")
        yield url, process
    finally:
        stop_group(process)


def env_server(env_id: str, *extra: str):
    """``agentgspo env-server --env ENV_ID --port 0 EXTRA...`` in the openenv venv (see :func:`served`)."""
    return served(["-m", "agentgspo.cli", "env-server", "--env", env_id, "--port", "0", *extra])
