"""The ray launcher for real: a local Ray cluster (`ray start --head` on 127.0.0.1 with honest resources: 2 CPUs, a
capped object store) started and stopped here; `agentgspo fleet up` places two vLLM (CPU build) replicas of the tiny
policy, one placement group each, a sandbox server and (with the openenv venv) an env server; a replica's vLLM
process, another's Ray actor and the servers killed: each noticed, restarted by Ray, dropped from and re-added to the
manifest; `fleet down` leaves no process (nor actor, nor placement group) behind."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys

import pytest
from fleet.fleet_support import (
    NOTICE_BOUND_S,
    OPENENV_PYTHON,
    fleet,
    generates,
    kill_all_and_watch,
    nothing_left,
    processes,
    ray_head,
    wait_for,
)

from agentgspo.fleet.local import group_members, pid_alive
from agentgspo.fleet.manifest import acknowledge_weights, manifest_path, read_manifest

for needed in ("ray", "vllm"):
    if importlib.util.find_spec(needed) is None:
        pytest.skip(f"{needed} is not installed (.ci/run installs it)", allow_module_level=True)
if len(os.sched_getaffinity(0)) < 2:
    pytest.skip("two replicas pinned to a core each need two cores", allow_module_level=True)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

FLEET = """
launcher: ray
ray: {address: "%s", namespace: agentgspo-fleet-test}
probes: {interval_s: 5, timeout_s: 30}
max_restarts: 2
samplers:
  - {name: policy, model: tiny, count: 2, cpus: 1, enforce_eager: true, max_num_seqs: 8}
sandboxes:
  - {name: judge, cpus: 0}
"""
ENV_SERVER = """env_servers:
  - {name: calc, env: agentgspo/Calculator-v0, cpus: 0, python: %s}
"""


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs, 100 MiB object store, no dashboard), stopped at the end."""
    with ray_head() as address:
        yield address


@pytest.fixture(scope="module")
def ray_fleet(ray_cluster, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray-fleet")
    spec = folder / "fleet.yaml"
    spec.write_text(FLEET % ray_cluster + (ENV_SERVER % OPENENV_PYTHON if OPENENV_PYTHON.exists() else ""))
    up = fleet("up", spec)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield spec, manifest_path(spec), ray_cluster
    finally:
        fleet("down", spec)


def placement_groups(address: str) -> dict:
    """The cluster's placement groups (name -> state), asked by a driver of its own."""
    script = (
        "import json, ray; ray.init(address=%r, logging_level='ERROR');"
        "print(json.dumps({g['name']: g['state'] for g in ray.util.placement_group_table().values()}))" % address
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


def test_up_places_each_replica_in_its_own_placement_group(ray_fleet):
    spec, path, address = ray_fleet
    manifest = read_manifest(path)
    assert manifest.state == "running" and manifest.launcher == "ray" and manifest.ray_address == address
    assert all(part.status == "healthy" and part.actor and part.actor_pid for part in manifest.parts)
    assert all(generates(url) for url in manifest.urls("sampler"))
    groups = placement_groups(address)
    assert {name: state for name, state in groups.items() if state == "CREATED"} == {
        "fleet.policy-0": "CREATED",
        "fleet.policy-1": "CREATED",
    }
    samplers = manifest.serving("sampler")
    assert len({tuple(p.cores) for p in samplers}) == 2  # each pinned to a core of its own on the node
    for part in samplers:
        assert all(os.sched_getaffinity(pid) == set(part.cores) for pid in group_members(part.pgid))
    status = fleet("status", spec)
    assert status.returncode == 0 and all(p.url in status.stdout for p in manifest.parts), status.stdout


def test_a_killed_vllm_process_actor_and_sandbox_are_restarted_by_ray(ray_fleet):
    _, path, _ = ray_fleet
    manifest = read_manifest(path)
    acknowledge_weights(path, 1, {p.id: p.restarts for p in manifest.parts if p.kind == "sampler"})
    manifest = wait_for(path, lambda m: m.weight_version == 1, 30, "the learner's version read")
    # all at once (each replica restarts on its own core): one replica's vLLM API server, the other's Ray actor (its
    # worker process, as the OOM killer would), the sandbox server, the env server (with the openenv venv)
    seen = kill_all_and_watch(
        path,
        {
            "policy-0": lambda part: os.kill(part.pid, signal.SIGKILL),
            "policy-1": lambda part: os.kill(part.actor_pid, signal.SIGKILL),
            "judge-0": lambda part: os.kill(part.pid, signal.SIGKILL),
            **({"calc-0": lambda part: os.kill(part.pid, signal.SIGKILL)} if OPENENV_PYTHON.exists() else {}),
        },
    )
    for part_id, watched in seen.items():
        before, back = watched["before"], watched["back"].part(part_id)
        assert watched["noticed_s"] < NOTICE_BOUND_S, (part_id, watched["noticed_s"])
        assert part_id not in [p.id for p in watched["out"].parts if p.status == "healthy"]
        assert not group_members(before.pgid) and not pid_alive(before.actor_pid)  # the old actor and its server
        assert back.actor_pid != before.actor_pid and back.actor == before.actor  # Ray restarted the same actor
        assert back.url != before.url
        assert back.probe.ok and back.status == ("needs_weights" if back.kind == "sampler" else "healthy")
    assert "killed by SIGKILL" in seen["policy-0"]["out"].part("policy-0").last_error
    assert "Ray actor died" in seen["policy-1"]["out"].part("policy-1").last_error
    back = read_manifest(path)
    assert {p.weight_version for p in back.needing_weights()} == {0} and back.urls("sampler") == []
    assert all(generates(p.url) for p in back.needing_weights())
    acknowledge_weights(path, 1, {p.id: p.restarts for p in back.parts if p.kind == "sampler"})
    after = wait_for(path, lambda m: len(m.urls("sampler")) == 2, 30, "both replicas healthy once updated")
    assert {p.weight_version for p in after.parts if p.kind == "sampler"} == {1}


def test_down_leaves_no_process_actor_or_placement_group_behind(ray_fleet):
    spec, path, address = ray_fleet
    running = read_manifest(path)
    assert any(processes(running).values())
    down = fleet("down", spec)
    assert down.returncode == 0, down.stdout + down.stderr
    assert read_manifest(path).state == "stopped"
    nothing_left(running)  # supervisor, actors' processes, keepers, servers' groups, ports
    assert not [name for name, state in placement_groups(address).items() if state != "REMOVED"]
