"""The remote sandbox backend following a fleet (``endpoints="fleet:MANIFEST"``), against a real local fleet of one
sandbox server: the fleet's token and URL come from its manifest; a server killed under a judge request is replaced
by the supervisor and the request is sent again to its new incarnation (the verdict stands, nothing is lost); a fleet
that is down fails the request at once with a judge error naming it; bad input is refused naming the fix."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from fleet.fleet_support import fleet, fleet_running

from agentgspo.fleet.local import descendants
from agentgspo.core.fleet_manifest import Manifest, SupervisorEntry, manifest_path, read_manifest, write_json_atomic
from agentgspo.sandboxes import Limits, SandboxUnavailable, Verdict, judge
from agentgspo.sandboxes.remote import RemoteSandbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FLEET = """
probes: {interval_s: 0.5, timeout_s: 5, failures: 2}
max_restarts: 2
sandboxes:
  - {name: judge, cpus: 0}
"""
#: sleeps long enough for the test to kill its server while it runs, then answers
SLOW_ECHO = "import time\ntime.sleep(3)\nprint(input())\n"


@pytest.fixture(scope="module")
def sandbox_fleet(tmp_path_factory):
    """A local fleet of one sandbox server (its manifest's path); stopped at the end whatever happened."""
    spec = tmp_path_factory.mktemp("sandbox-fleet") / "fleet.yaml"
    spec.write_text(FLEET)
    with fleet_running(spec) as path:
        yield path


def test_a_fleet_client_judges_with_the_fleets_url_and_token(sandbox_fleet, monkeypatch):
    monkeypatch.delenv("AGENTGSPO_SANDBOX_TOKEN", raising=False)
    monkeypatch.setenv("AGENTGSPO_SANDBOX_URLS", f"fleet:{sandbox_fleet}")
    remote = RemoteSandbox()  # both from the environment, as a recipe's --sandbox remote reads them
    assert remote.token == read_manifest(sandbox_fleet).sandbox_token()
    result = judge("print(int(input()) * 2)", [("21\n", "42\n")], backend=remote)
    assert result.verdict == Verdict.AC, result


@pytest.mark.slow
def test_a_server_killed_under_a_request_is_replaced_and_the_request_sent_again(sandbox_fleet):
    remote = RemoteSandbox(f"fleet:{sandbox_fleet}")
    before = read_manifest(sandbox_fleet).part("judge-0")
    idle = descendants(before.pid)
    outcome: dict = {}
    worker = threading.Thread(
        target=lambda: outcome.update(
            result=judge(SLOW_ECHO, [("7\n", "7\n")], backend=remote, limits=Limits(time_limit_s=20.0))
        )
    )
    worker.start()
    deadline = time.monotonic() + 60
    while descendants(before.pid) <= idle:  # the judge started the program (bwrap): the request is in flight
        assert time.monotonic() < deadline, "the judge never started the program"
        time.sleep(0.01)
    os.kill(before.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    worker.join(timeout=120)
    assert not worker.is_alive()
    after = read_manifest(sandbox_fleet).part("judge-0")
    print(f"killed under a request: answered {time.monotonic() - killed_at:.1f} s later, by {after.url}")
    assert outcome["result"].verdict == Verdict.AC, outcome["result"]  # sent again, judged by the new incarnation
    assert after.restarts == before.restarts + 1 and after.url != before.url and after.status == "healthy"


@pytest.mark.slow
def test_a_fleet_that_is_down_is_a_judge_error_naming_it_at_once(tmp_path):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(FLEET)
    up = fleet("up", spec)
    assert up.returncode == 0, up.stdout + up.stderr
    remote = RemoteSandbox(f"fleet:{manifest_path(spec)}", fleet_wait_s=120)
    assert fleet("down", spec).returncode == 0
    started = time.monotonic()
    result = judge("print(1)", [("", "1\n")], backend=remote)
    assert result.verdict == Verdict.JE
    assert "no sandbox that could serve" in result.message and "fleet status" in result.message
    assert time.monotonic() - started < 10  # not the 120 s wait: nothing could come back


def test_bad_fleet_endpoints_are_refused_naming_the_fix(tmp_path):
    with pytest.raises(SandboxUnavailable, match="fleet up"):
        RemoteSandbox(f"fleet:{tmp_path / 'missing.manifest.json'}", token="t")
    with pytest.raises(ValueError, match="only entry"):
        RemoteSandbox([f"fleet:{tmp_path / 'm.json'}", "http://127.0.0.1:1"], token="t")
    no_sandboxes = Manifest(
        fleet="policy-only",
        spec=str(tmp_path / "fleet.yaml"),
        launcher="local",
        weights_file=str(tmp_path / "weights.json"),
        supervisor=SupervisorEntry(pid=os.getpid(), host="here", log="-", started_at=time.time()),
    )
    write_json_atomic(tmp_path / "m.json", no_sandboxes.dump())
    with pytest.raises(SandboxUnavailable, match="no sandbox servers.*sandboxes:"):
        RemoteSandbox(f"fleet:{tmp_path / 'm.json'}")
