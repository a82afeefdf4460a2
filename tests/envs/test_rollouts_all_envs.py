"""Every registered env: a tiny-policy rollout writes valid records (``agentgspo rollout``), 64 concurrent episodes
of its oracle all score 1.0, and only what follows the reasoning (``</think>``) acts or answers."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.cli import main
from agentgspo.environments.env_checker import play
from agentgspo.core.sampling import SamplingParams
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.environments.registry import registered_ids
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner
from agentgspo.core.trajectory import read_jsonl


@pytest.mark.parametrize("env_id", registered_ids())
def test_tiny_policy_rollout_writes_valid_records(env_id, tmp_path, capsys):
    # The CLI's own entry point, in process: the same code path as `agentgspo rollout ...` without paying the
    # interpreter and torch start-up once per env.
    status = main(
        [
            "rollout",
            "--env",
            env_id,
            "--policy",
            "tiny",
            "--episodes",
            "2",
            "--group-size",
            "2",
            "--max-new-tokens",
            "16",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{") :])
    assert summary["episodes"] == 4 and "env_error" not in summary["stop_reasons"], summary
    trajectories = read_jsonl(tmp_path / "trajectories.jsonl")  # validates every record
    assert len(trajectories) == 4
    for trajectory in trajectories:
        assert trajectory.env_id == env_id and len(trajectory.turn_spans) >= 1
        assert trajectory.stop_reason != "env_error", trajectory.metadata
        assert len(trajectory.token_ids) == len(trajectory.loss_mask) == len(trajectory.sampler_logprobs)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", registered_ids())
def test_64_concurrent_oracle_episodes_all_score_one(env_id, renderer):
    def make_env():
        return gym.make(env_id, disable_env_checker=True)

    config = RolloutConfig(
        group_size=2, max_context=16384, env_workers=64, sampling=SamplingParams(max_new_tokens=4096)
    )
    runner = RolloutRunner(
        make_env, ScriptedPolicy(make_env().unwrapped.oracle, renderer), renderer, config, env_id=env_id
    )
    trajectories = runner.run_sync(range(32))
    assert len(trajectories) == 64
    assert [t.reward for t in trajectories] == [1.0] * 64, [t.metadata for t in trajectories if t.reward != 1.0]


# CodeForces-v0's oracle answers with the submit tool, never in a turn without tool calls: its plain-turn code is
# covered by tests/envs/test_codeforces.py.
@pytest.mark.parametrize("env_id", [e for e in registered_ids() if e != "agentgspo/CodeForces-v0"])
def test_answers_written_while_reasoning_do_not_count(env_id):
    """The oracle's final answer (its turn without tool calls) earns the reward after a ``</think>`` and nothing
    inside ``<think>...</think>``: answers and code written while reasoning are thoughts, as tool calls are."""
    env = gym.make(env_id, disable_env_checker=True)
    oracle = env.unwrapped.oracle

    def answer_while_reasoning(messages):
        text = oracle(messages)
        return text if "<tool_call>" in text else f"<think>{text}</think>"

    for seed in range(3):
        shown, _, _ = play(env, lambda messages: "<think>I know this.</think>" + oracle(messages), seed=seed)
        hidden, _, _ = play(env, answer_while_reasoning, seed=seed)
        assert (shown, hidden) == (1.0, 0.0), (seed, shown, hidden)
    env.close()
