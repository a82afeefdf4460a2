"""The ray launcher for real, on the package's local Ray cluster (tests/fleet/conftest.py: `ray start --head` on
127.0.0.1 with honest resources, 2 CPUs and a capped object store): `agentgspo fleet up` places two vLLM (CPU build)
replicas of the tiny policy, one placement group each, a sandbox server and (with the openenv venv) an env server; a
hung engine is caught by the generation probe; a replica's vLLM process, another's Ray actor and the servers killed:
each noticed, restarted by Ray, dropped from and re-added to the manifest; the learner (ServerPolicy on
fleet:MANIFEST) updates every live replica and admits a returned one only once it sent it the current weights;
`fleet down` leaves no process (nor actor, nor placement group) behind."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys

import httpx
import pytest
from fleet.fleet_support import (
    NOTICE_BOUND_S,
    OPENENV_PYTHON,
    fleet,
    generates,
    kill_all_and_watch,
    nothing_left,
    processes,
    wait_for,
)

from agentgspo.fleet.local import group_members, pid_alive
from agentgspo.core.fleet_manifest import manifest_path, read_manifest
from agentgspo.fleet.probes import probe_sampler

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
def ray_fleet(ray_cluster, tmp_path_factory):
    address, _ = ray_cluster
    folder = tmp_path_factory.mktemp("ray-fleet")
    spec = folder / "fleet.yaml"
    spec.write_text(FLEET % address + (ENV_SERVER % OPENENV_PYTHON if OPENENV_PYTHON.exists() else ""))
    up = fleet("up", spec)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield spec, manifest_path(spec), address
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


def test_a_hung_engine_answers_health_but_fails_the_generation_probe(ray_fleet):
    """Why the probe generates: with its engine process stopped (a hung GPU, say), vLLM's /health still says 200."""
    _, path, _ = ray_fleet
    part = read_manifest(path).part("policy-1")
    engine = next(pid for pid in group_members(part.pgid) if open(f"/proc/{pid}/comm").read().startswith("VLLM::Eng"))

    async def probe():
        async with httpx.AsyncClient() as client:
            return await probe_sampler(client, part.url, 3.0)

    os.kill(engine, signal.SIGSTOP)
    try:
        assert httpx.get(f"{part.url}/health", timeout=10).status_code == 200
        hung = asyncio.run(probe())
    finally:
        os.kill(engine, signal.SIGCONT)
    assert not hung.ok and "no token generated in 3.0 s" in hung.detail and hung.latency_s < 3.5
    assert asyncio.run(probe()).ok  # the same replica, running again


def test_killed_parts_are_restarted_by_ray_and_a_replica_samples_only_once_the_learner_sent_it_its_weights(
    ray_fleet, renderer
):
    """The learner (ServerPolicy on fleet:MANIFEST) updates both replicas; then, all at once (each replica restarts
    on its own core), one replica's vLLM API server, the other's Ray actor (its worker process, as the OOM killer
    would), the sandbox server and the env server (with the openenv venv) are killed: each noticed, restarted by Ray
    (the same actor), probed; the replicas come back with the fleet file's weights and get no turn until the next
    update sent them the learner's, after which their log-probs are the learner's."""
    import torch
    from transformers import AutoModelForCausalLM
    from vllm_support import LOGPROB_ATOL, learner_logprobs, perturbed

    from agentgspo.core.sampling import SampleRequest, SamplingParams
    from agentgspo.policy.server import ServerPolicy
    from agentgspo.models.tiny import tiny_policy_path

    _, path, _ = ray_fleet
    model = AutoModelForCausalLM.from_pretrained(tiny_policy_path(), dtype=torch.float32).eval()
    updated = perturbed(model)
    policy = ServerPolicy([f"fleet:{path}"], renderer, timeout_s=120.0)
    version = policy.update_weights(updated)
    wait_for(
        path,
        lambda m: all(p.status == "healthy" and p.weight_version == version for p in m.parts if p.kind == "sampler"),
        30,
        "both replicas acknowledged at the learner's version",
    )
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
    # back with the fleet file's weights: they sample, but clients do not send to them yet
    assert {p.weight_version for p in back.needing_weights()} == {0} and back.urls("sampler") == []
    assert all(generates(p.url) for p in back.needing_weights())
    policy.sync_fleet(force=True)
    assert [(s.part, s.incarnation, s.admitted) for s in policy.servers] == [
        ("policy-0", 1, False),
        ("policy-1", 1, False),
    ]
    version = policy.update_weights(updated)
    assert all(s.admitted and s.version == version for s in policy.servers)
    after = wait_for(path, lambda m: len(m.urls("sampler")) == 2, 30, "both replicas healthy once updated")
    assert {p.weight_version for p in after.parts if p.kind == "sampler"} == {version}
    prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12*7?"}])

    async def turns():
        requests = [SampleRequest(prompt, [], SamplingParams(0.7, 1.0, 16), seed=k) for k in range(4)]
        return await asyncio.gather(*(policy.sample(request) for request in requests))

    for turn in asyncio.run(turns()):
        expected = learner_logprobs(updated, prompt, turn.token_ids, 0.7)
        assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= LOGPROB_ATOL
    assert all(s.served > 0 for s in policy.servers)  # both returned replicas took turns, on the learner's weights


def test_down_leaves_no_process_actor_or_placement_group_behind(ray_fleet):
    spec, path, address = ray_fleet
    running = read_manifest(path)
    assert any(processes(running).values())
    down = fleet("down", spec)
    assert down.returncode == 0, down.stdout + down.stderr
    assert read_manifest(path).state == "stopped"
    nothing_left(running)  # supervisor, actors' processes, keepers, servers' groups, ports
    assert not [name for name, state in placement_groups(address).items() if state != "REMOVED"]
