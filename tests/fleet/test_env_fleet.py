"""A fleet's env servers as an env id (``fleet:MANIFEST[#GROUP]``), against a real local fleet of one env server
(`agentgspo env-server` in the openenv venv, Calculator-v0): `agentgspo rollout` plays it as it plays the server's
own URL; a server SIGKILLed under open episodes is replaced by the supervisor and those episodes are re-queued onto
its new incarnation while the finished ones stand; bad input and a fleet that is down fail at once, naming the fix."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter

import gymnasium as gym
import pytest
from fleet.fleet_support import OPENENV_PYTHON, fleet, fleet_running, wait_for
from interop.openenv_support import MAKE_VENV
from interop.test_openenv import RECORDED

from agentgspo.cli import main
from agentgspo.environments.interop.openenv_client import FleetEnvUnavailable, fleet_env_servers
from agentgspo.environments.registry import episode_capacity, make
from agentgspo.core.fleet_manifest import (
    Manifest,
    PartEntry,
    SupervisorEntry,
    read_manifest,
    write_json_atomic,
)
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner
from agentgspo.core.trajectory import read_jsonl

if not OPENENV_PYTHON.exists():
    pytest.skip(f"no openenv venv at {OPENENV_PYTHON}: make it with {MAKE_VENV}", allow_module_level=True)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FLEET = """
probes: {interval_s: 0.5, timeout_s: 5, failures: 2}
max_restarts: 2
env_servers:
  - {name: calc, env: agentgspo/Calculator-v0, cpus: 0, max_concurrent_envs: 64, python: %s}
"""
CALCULATOR = "agentgspo/Calculator-v0"


@pytest.fixture(scope="module")
def env_fleet(tmp_path_factory):
    """A local fleet of one env server: (its fleet file, its manifest); stopped at the end whatever happened."""
    spec = tmp_path_factory.mktemp("env-fleet") / "fleet.yaml"
    spec.write_text(FLEET % OPENENV_PYTHON)
    with fleet_running(spec) as path:
        yield spec, path


def by_seed(path) -> list:
    return sorted(read_jsonl(path), key=lambda t: t.seed)


@pytest.mark.slow
def test_rollout_plays_the_fleets_env_server_as_it_plays_its_url(env_fleet, tmp_path):
    _, path = env_fleet
    url = read_manifest(path).part("calc-0").url
    for env_id, out in ((f"fleet:{path}", tmp_path / "fleet"), (url, tmp_path / "url")):
        command = ["rollout", "--env", env_id, "--policy", "oracle", "--episodes", "6", "--group-size", "1"]
        assert main([*command, "--out", str(out)]) == 0
    played, direct = (
        by_seed(tmp_path / "fleet" / "trajectories.jsonl"),
        by_seed(tmp_path / "url" / "trajectories.jsonl"),
    )
    assert [t.reward for t in played] == [1.0] * 6 and {t.env_id for t in played} == {f"fleet:{path}"}
    for remote, here in zip(played, direct, strict=True):
        assert {k: getattr(remote, k) for k in RECORDED} == {k: getattr(here, k) for k in RECORDED}
    assert episode_capacity(f"fleet:{path}") == 64  # the group's session limit: its one server's
    env = make(f"fleet:{path}#calc")  # the group named: the same servers
    env.reset(seed=0)
    assert env.unwrapped.url == url
    env.close()


@pytest.mark.slow
def test_episodes_open_on_a_killed_server_are_requeued_onto_its_new_incarnation(env_fleet, renderer):
    """Four episodes finish; four hold their second turn (a session open on the server each) until then; the server
    is SIGKILLed: those four end as infra_error, are played again (requeue) on the restarted server and succeed;
    the four finished ones are kept as they were."""
    _, path = env_fleet
    env_id = f"fleet:{path}"
    early, late = set(range(4)), set(range(4, 8))
    local = gym.make(CALCULATOR).unwrapped
    questions = {local.reset(seed=seed)[0][-1]["content"]: seed for seed in early | late}
    before = read_manifest(path).part("calc-0")
    finished, held, killed = set(), set(), []
    release = asyncio.Event()

    def kill_when_ready() -> None:
        if finished == early and held == late and not killed:  # every late episode holds an open session
            os.kill(before.pid, signal.SIGKILL)
            killed.append(time.monotonic())
            release.set()

    class Held(ScriptedPolicy):
        async def sample(self, request):
            seed = questions[next(m["content"] for m in request.messages if m["role"] == "user")]
            if seed in late and any(m["role"] == "tool" for m in request.messages) and not release.is_set():
                held.add(seed)
                kill_when_ready()
                await release.wait()
            return await super().sample(request)

    def group_done(group) -> None:
        finished.update(t.seed for t in group if t.seed in early)
        kill_when_ready()

    made = []

    def make_env():
        env = make(env_id)
        made.append(env.unwrapped)
        return env

    runner = RolloutRunner(
        make_env,
        Held(local.oracle, renderer),
        renderer,
        RolloutConfig(group_size=1, max_turns=6, max_context=4096, requeue_limit=2),
        env_id=env_id,
        group_hook=group_done,
    )
    trajectories = {t.seed: t for t in runner.run_sync(sorted(early | late))}
    assert killed and len(trajectories) == 8
    back = read_manifest(path).part("calc-0")
    print(f"requeued episodes done {time.monotonic() - killed[0]:.1f} s after the kill, on {back.url}")
    assert back.restarts == before.restarts + 1 and back.url != before.url and back.status == "healthy"
    for seed in early:
        assert trajectories[seed].reward == 1.0 and trajectories[seed].stop_reason == "completed"
        assert "requeued" not in trajectories[seed].metadata
    for seed in late:
        trajectory = trajectories[seed]
        assert trajectory.reward == 1.0 and trajectory.stop_reason == "completed", trajectory.metadata
        [lost] = trajectory.metadata["requeued"]
        assert lost.startswith("infra_error: EnvServerLost") and "closed the connection" in lost, lost
    # each session's server: the first plays of all eight on the killed one, the four replays on its successor
    assert Counter(env.url for env in made) == {before.url: 8, back.url: 4}


def fake_manifest(folder, parts: list[tuple], **fields) -> str:
    """A fleet id of a manifest written by hand (no processes behind it): ``parts`` as (kind, group[, status]),
    healthy unless said, each at a closed port of its own."""
    entries, counts = [], Counter()
    for position, (kind, group, *status) in enumerate(parts):
        entries.append(
            PartEntry(
                id=f"{group}-{counts[group]}",
                kind=kind,
                group=group,
                index=counts[group],
                status=status[0] if status else "healthy",
                url=f"http://127.0.0.1:{9 + position}",
                info={"max_concurrent_envs": 8} if kind == "env_server" else {},
            )
        )
        counts[group] += 1
    manifest = Manifest(
        fleet="handmade",
        spec=str(folder / "fleet.yaml"),
        launcher="local",
        state="running",
        weights_file=str(folder / "weights.json"),
        supervisor=SupervisorEntry(pid=os.getpid(), host="here", log="-", started_at=time.time()),
        parts=entries,
        **fields,
    )
    path = folder / f"m{len(list(folder.glob('m*.json')))}.json"
    write_json_atomic(path, manifest.dump())
    return f"fleet:{path}"


def test_sessions_go_round_robin_over_the_groups_healthy_servers(tmp_path):
    parts = [
        ("env_server", "calc"),
        ("env_server", "calc", "unhealthy"),
        ("env_server", "calc"),
        ("env_server", "code"),
    ]
    env_id = fake_manifest(tmp_path, [("sandbox", "judge"), *parts])
    servers = fleet_env_servers(f"{env_id}#calc")
    picks = [servers.pick(time.monotonic() + 1) for _ in range(4)]
    assert picks == ["http://127.0.0.1:10", "http://127.0.0.1:12"] * 2  # calc-1 restarts; code is another group
    assert servers.capacity(None) == 24  # the group's servers that are not failed, 8 sessions each
    assert [fleet_env_servers(f"{env_id}#code").pick(time.monotonic() + 1) for _ in range(2)] == [
        "http://127.0.0.1:13"
    ] * 2


def test_bad_fleet_env_ids_are_refused_naming_the_fix(env_fleet, tmp_path, capsys):
    _, path = env_fleet
    out = ["--policy", "oracle", "--episodes", "1", "--out", str(tmp_path / "out")]
    assert main(["rollout", "--env", f"fleet:{tmp_path / 'missing.json'}", *out]) == 2
    error = capsys.readouterr().err
    assert "missing.json" in error and "agentgspo fleet up FILE" in error, error
    assert main(["rollout", "--env", f"fleet:{path}#nosuch", *out]) == 2
    error = capsys.readouterr().err
    assert "no env server group 'nosuch'" in error and f"fleet:{path}#calc" in error, error
    with pytest.raises(ValueError, match="has no env servers; add an `env_servers:` group"):
        make(fake_manifest(tmp_path, [("sandbox", "judge")]))
    both = fake_manifest(tmp_path, [("env_server", "calc"), ("env_server", "code")])
    with pytest.raises(ValueError, match=r"several env server groups \(calc, code\); name one: .*#calc or .*#code"):
        make(both)
    # a manifest its supervisor left behind (not rewritten for minutes) whose server does not answer: at once
    stale = fake_manifest(tmp_path, [("env_server", "calc")], updated_at=time.time() - 600)
    started = time.monotonic()
    with pytest.raises(FleetEnvUnavailable, match="supervisor of fleet handmade is gone.*fleet status"):
        make(stale)
    assert time.monotonic() - started < 10


def test_a_fleet_that_is_down_fails_the_reset_at_once_naming_fleet_status(env_fleet, renderer):
    """Last: it stops the module's fleet."""
    spec, path = env_fleet
    env_id = f"fleet:{path}"
    env = make(env_id)  # while it serves
    down = fleet("down", spec)
    assert down.returncode == 0, down.stdout + down.stderr
    wait_for(path, lambda m: m.state == "stopped", 30, "the fleet stopped")
    started = time.monotonic()
    with pytest.raises(FleetEnvUnavailable, match=f"no env server that could serve.*agentgspo fleet status {spec}"):
        env.reset(seed=0)
    assert time.monotonic() - started < 5  # not the 120 s connect timeout: nothing could come back
    oracle = gym.make(CALCULATOR).unwrapped.oracle
    config = RolloutConfig(group_size=1, max_turns=6, max_context=4096, requeue_limit=2)
    [lost] = RolloutRunner(lambda: make(env_id), ScriptedPolicy(oracle, renderer), renderer, config).run_sync([0])
    assert lost.stop_reason == "infra_error" and "fleet status" in lost.metadata["error"], lost.metadata
    assert len(lost.metadata["requeued"]) == 2  # each replay failed at once too
    assert time.monotonic() - started < 10
