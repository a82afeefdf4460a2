"""Every bundled env pays rewards as they are earned (agentgspo.environments.env, "Rewards are paid as they are
earned"): an episode the runner cuts keeps what it earned, and the step rewards sum to the episode's reward.
CodeForces-v0's partial credit and compile-error penalty, the one score that was paid late, have their own tests in
test_codeforces.py (test_an_episode_the_runner_cuts_keeps_what_it_earned)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.environments.registry import registered_ids
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner

UNKNOWN_TOOL = '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>'
PENALTY = 0.125


def _runner(env_id, renderer, max_turns):
    def make_env():
        return gym.make(env_id, disable_env_checker=True, tool_error_policy="penalise", tool_error_penalty=PENALTY)

    oracle = make_env().unwrapped.oracle

    def policy(messages):  # the oracle's turns, the first with a failed tool call before its own (penalised at once)
        if not any(m["role"] == "assistant" for m in messages):
            return UNKNOWN_TOOL + "\n" + oracle(messages)
        return oracle([m for m in messages if "no_such_tool" not in m["content"]])  # as if it had not made it

    config = RolloutConfig(group_size=1, max_turns=max_turns, max_context=16384)
    return RolloutRunner(make_env, ScriptedPolicy(policy, renderer), renderer, config, env_id=env_id)


@pytest.mark.parametrize("env_id", registered_ids())
def test_an_episode_cut_by_max_turns_keeps_what_it_earned(env_id, renderer):
    (t,) = _runner(env_id, renderer, max_turns=1).run_sync([0])
    assert (t.stop_reason, t.num_turns) == ("max_turns", 1)
    assert t.reward == -PENALTY and t.turn_rewards == [-PENALTY]


@pytest.mark.parametrize("env_id", registered_ids())
def test_step_rewards_sum_to_the_episode_reward(env_id, renderer):
    (t,) = _runner(env_id, renderer, max_turns=8).run_sync([0])
    assert t.stop_reason == "completed", t.metadata
    assert t.reward == pytest.approx(1.0 - PENALTY) and sum(t.turn_rewards) == pytest.approx(t.reward)
    assert t.turn_rewards[0] == -PENALTY  # paid at the step that earned it, not at the end
