"""The supervisor's rules with cheap real parts (sandbox servers, seconds to start): a hung part (alive, not
answering) fails its probes and is restarted, stopped process and all; a part that cannot start is given up at the
restart bound and `fleet up` says why, leaving nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fleet.fleet_support import fleet, kill_and_watch, nothing_left, wait_for

from agentgspo.fleet.local import group_members
from agentgspo.core.fleet_manifest import manifest_path, read_manifest

pytest.importorskip("uvicorn", reason="sandbox servers need the server extra")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_hung_part_fails_its_probes_and_is_restarted(tmp_path):
    spec = tmp_path / "hung.yaml"
    spec.write_text("probes: {interval_s: 0.5, timeout_s: 2, failures: 2}\nsandboxes: [{name: judge, cpus: 0}]\n")
    up = fleet("up", spec)
    assert up.returncode == 0, up.stdout + up.stderr
    path = manifest_path(spec)
    try:
        # SIGSTOP: the process is alive (its keeper sees nothing), only the probes can tell
        seen = kill_and_watch(path, "judge-0", lambda part: os.kill(part.pid, signal.SIGSTOP))
        # 2 failed probes of <= 2 s each, 0.5 s apart (noticed later than a dead process, as it must be)
        assert 2.0 < seen["noticed_s"] < 10.0
        assert "2 probes in a row failed" in seen["out"].part("judge-0").last_error
        assert not group_members(seen["before"].pgid)  # the stopped server was killed, not left frozen
        assert seen["back"].part("judge-0").status == "healthy"
    finally:
        running = read_manifest(path)
        down = fleet("down", spec)
    assert down.returncode == 0, down.stdout + down.stderr
    nothing_left(running)


def test_foreground_runs_the_supervisor_here_until_interrupted(tmp_path):
    spec = tmp_path / "fg.yaml"
    spec.write_text("sandboxes: [{name: judge, cpus: 0}]\n")
    path = manifest_path(spec)
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "agentgspo.cli", "fleet", "up", "--foreground", str(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_file(path, supervisor)
        running = wait_for(path, lambda m: m.state == "running", 120, "the foreground fleet up")
        assert running.supervisor.pid == supervisor.pid and running.supervisor.log is None
        # the token clients use is in the file the manifest names (0600)
        token_file = Path(running.sandbox_token_file)
        assert token_file.stat().st_mode & 0o777 == 0o600
        body = {"source": "print(input())", "tests": [{"input_b64": "MQo=", "answer_b64": "MQo="}]}
        headers = {"Authorization": f"Bearer {running.sandbox_token()}"}
        judged = httpx.post(f"{running.part('judge-0').url}/judge", json=body, headers=headers, timeout=60)
        assert judged.json()["verdict"] == "AC"
    finally:
        supervisor.send_signal(signal.SIGINT)  # Ctrl-C
        output = supervisor.communicate(timeout=120)[0]
    assert supervisor.returncode == 0, output
    assert "fleet stopped" in output
    nothing_left(running)


def wait_for_file(path: Path, process: subprocess.Popen) -> None:
    while not path.exists():
        assert process.poll() is None, process.communicate()[0]
        time.sleep(0.02)


def test_a_part_that_cannot_start_is_given_up_and_up_says_why(tmp_path):
    spec = tmp_path / "broken.yaml"
    # an env server for an env id that does not exist, in a venv that may lack openenv: it exits at once, each time
    spec.write_text(
        f"max_restarts: 1\nprobes: {{interval_s: 0.5}}\nsandboxes: [{{name: judge, cpus: 0}}]\n"
        f"env_servers: [{{name: broken, env: nosuch/Env-v0, python: {sys.executable}}}]\n"
    )
    up = fleet("up", spec, "--timeout", "300")
    assert up.returncode == 1
    assert "given up: broken-0" in up.stderr and "after 1 restarts, the bound" in up.stderr
    assert "agentgspo env-server" in up.stderr  # the part's own log tail says what went wrong
    stopped = read_manifest(manifest_path(spec))
    assert stopped.part("broken-0").status in ("failed", "stopped") and stopped.part("broken-0").restarts == 1
    assert stopped.state == "stopped"  # up stopped what it had started
    nothing_left(stopped)
    status = fleet("status", spec)
    assert status.returncode == 1 and "NOT RUNNING" in status.stdout
