"""The local launcher for real: `agentgspo fleet up` with two sandbox servers, one killed and brought back by the
supervisor while the other serves on; `fleet down` leaves no process behind; and the cores it gives sampler replicas.
Env servers under it: tests/fleet/test_env_fleet.py. vLLM replicas under a supervisor are tested through the ray
launcher (tests/fleet/test_ray.py: the same keeper, probes and learner's side); the local launcher's vLLM kills are
measured by benchmarks/bench_fleet_learning.py --launcher local (a vLLM restart costs 30-80 s here)."""

from __future__ import annotations

import os
import signal

import pytest
from fleet.fleet_support import (
    NOTICE_BOUND_S,
    closed,
    fleet,
    fleet_running,
    kill_and_watch,
    nothing_left,
    processes,
)

from agentgspo.fleet.local import LocalLauncher, free_ports, group_members
from agentgspo.core.fleet_manifest import read_manifest
from agentgspo.fleet.spec import load_spec

pytest.importorskip("uvicorn", reason="sandbox servers need the server extra")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

FLEET = """
probes: {interval_s: 5, timeout_s: 30}
max_restarts: 2
sandboxes:
  - {name: judge, count: 2, cpus: 0}
"""


@pytest.fixture(scope="module")
def local_fleet(tmp_path_factory):
    """The fleet file and its manifest's path, the fleet up (stopped at the end whatever happened)."""
    folder = tmp_path_factory.mktemp("local-fleet")
    spec = folder / "fleet.yaml"
    spec.write_text(FLEET)
    with fleet_running(spec) as path:
        yield spec, path


def test_ports_chosen_together_are_distinct():
    """Ray refuses a port named twice; free ports chosen one at a time can repeat (the kernel hands a released port
    out again), which once failed the fleet tests' cluster start."""
    assert len(set(free_ports("127.0.0.1", 64))) == 64


def test_each_sampler_replica_gets_cores_of_its_own_and_vllm_is_told_them(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two replicas pinned to a core each need two cores")
    spec_path = tmp_path / "fleet.yaml"
    spec_path.write_text(
        "samplers: [{name: policy, model: tiny, count: 2, cpus: 1}]\nsandboxes: [{name: judge, cpus: 0}]\n"
    )
    spec = load_spec(spec_path)
    launcher = LocalLauncher(spec, tmp_path, None)  # claims the cores (lock files), starts nothing
    try:
        cores = launcher.cores
        assert set(cores) == {"policy-0", "policy-1"} and all(len(c) == 1 for c in cores.values())
        assert cores["policy-0"] != cores["policy-1"]
        parts = {part.id: part for part in spec.parts()}
        for part_id, core in cores.items():  # vLLM's OpenMP threads bound to the replica's core
            assert launcher.environment(parts[part_id])["VLLM_CPU_OMP_THREADS_BIND"] == str(core[0])
        assert "VLLM_CPU_OMP_THREADS_BIND" not in launcher.environment(parts["judge-0"])
        with pytest.raises(ValueError, match="cores of their own.*stop the other fleet"):
            LocalLauncher(spec, tmp_path, None)  # a second fleet on this machine finds them held
    finally:
        launcher.close_sync()
    LocalLauncher(spec, tmp_path, None).close_sync()  # released with the fleet


@pytest.mark.slow
def test_up_returns_once_every_part_passed_its_probe(local_fleet):
    spec, path = local_fleet
    manifest = read_manifest(path)
    assert manifest.state == "running" and manifest.launcher == "local"
    assert all(part.status == "healthy" and part.url for part in manifest.parts)
    status = fleet("status", spec)
    assert status.returncode == 0, status.stdout + status.stderr
    for part in manifest.parts:
        assert part.id in status.stdout and part.url in status.stdout
    assert status.stdout.count("healthy") == len(manifest.parts)


def test_a_killed_part_is_noticed_restarted_and_probed_while_the_others_serve_on(local_fleet):
    """judge-0's server SIGKILLed: taken out of the manifest within the bound, restarted at a new URL (the old one
    closed: a stale client fails loudly), probed and back in service; judge-1 never disturbed."""
    _, path = local_fleet
    other = read_manifest(path).part("judge-1")
    watched = kill_and_watch(path, "judge-0", lambda part: os.kill(part.pid, signal.SIGKILL))
    before, out, back = watched["before"], watched["out"], watched["back"].part("judge-0")
    assert watched["noticed_s"] < NOTICE_BOUND_S, watched["noticed_s"]
    assert out.urls("sandbox") == [other.url]  # clients stop sending to it
    assert "killed by SIGKILL" in out.part("judge-0").last_error
    assert not group_members(before.pgid)  # nothing of the old one left
    assert back.restarts == 1 and back.pid != before.pid and back.probe.ok and back.status == "healthy"
    assert back.url != before.url and closed(before.url)
    after = read_manifest(path).part("judge-1")
    assert (after.since, after.restarts, after.pid) == (other.since, 0, other.pid)


def test_down_leaves_no_process_behind(local_fleet):
    spec, path = local_fleet
    running = read_manifest(path)
    assert any(processes(running).values())
    down = fleet("down", spec)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "nothing of it is left running" in down.stdout
    stopped = read_manifest(path)
    assert stopped.state == "stopped" and {p.status for p in stopped.parts} == {"stopped"}
    nothing_left(running)  # every pid, group and port of the running fleet
