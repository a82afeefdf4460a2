"""The learner's ``unit="turn"`` and ``credit="turn"`` settings: the update each gives, derived by hand at s = 1."""

from __future__ import annotations

import json
import random

import pytest
import torch
from accelerate import Accelerator

from agentgspo.objective.advantages import group_advantages, turn_advantages
from agentgspo.objective.batching import collate, forward, logprobs_from_logits
from agentgspo.learning.learner import GSPOLearner, LearnerConfig
from agentgspo.core.sampling import SamplingParams
from agentgspo.core.trajectory import Trajectory, read_jsonl, write_jsonl

from tiny_models import build_tiny  # tests/tiny_models.py

TURN_REWARDS = [[0.0, 1.0], [0.5, 0.0], [0.0, 0.0], [1.0, 1.0]]  # one group of 4 two-turn episodes


def _two_turn_trajectories(seed=0):
    rng = random.Random(seed)
    out = []
    for i, rewards in enumerate(TURN_REWARDS):
        t = Trajectory(group_id=0, sample_id=i)
        t.append_forced([rng.randrange(3, 100) for _ in range(5)])
        for turn in range(2):
            sampled = [rng.randrange(3, 100) for _ in range(3 + 2 * turn + i)]  # turns of unequal length
            t.append_sampled(sampled, [-4.0] * len(sampled))
            t.append_forced([rng.randrange(3, 100) for _ in range(4)])  # the tool's output
        t.turn_rewards = list(rewards)
        t.reward = sum(rewards)
        out.append(t)
    return out


def _update(model, trajectories, **config):
    """The parameter change of one learner step with SGD(lr=1), one minibatch, no clipping: minus its gradient."""
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model, optimizer = accelerator.prepare(model, optimizer)
    learner = GSPOLearner(
        model,
        optimizer,
        accelerator,
        pad_token_id=0,
        config=LearnerConfig(minibatches=1, max_grad_norm=None, memory_estimate=False, **config),
    )
    before = [p.detach().clone() for p in model.parameters()]
    metrics = learner.step(trajectories)
    return [b - p.detach() for p, b in zip(model.parameters(), before)], metrics


def _hand_gradient(model, trajectories, token_weight):
    """Gradient of loss = -sum_i sum_t token_weight[i][t] * logp_it (the s = 1 form of every objective here)."""
    model.zero_grad(set_to_none=True)
    batch = collate(trajectories, 0)
    logp = logprobs_from_logits(forward(model, batch).logits, batch.input_ids).double()  # [B, T]
    weights = torch.zeros_like(logp)
    for i, row in enumerate(token_weight):
        for t, w in row.items():
            weights[i, t] = w
    (-(weights * logp).sum()).backward()
    grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return grads


def _close(a, b):
    return all(torch.allclose(x, y, atol=1e-6, rtol=1e-4) for x, y in zip(a, b))


def test_turn_unit_weighs_each_turn_as_its_own_sequence():
    """unit="turn" at s = 1: a token of turn k of trajectory i has weight A_i / (N K_i |y_ik|) (loss.gspo_turn_loss);
    the trajectory unit gives A_i / (N |y_i|), which differs because the turns have unequal lengths."""
    trajectories = _two_turn_trajectories()
    n = len(trajectories)
    adv, _ = group_advantages(torch.tensor([t.reward for t in trajectories], dtype=torch.float64), 4)
    per_turn = [
        {t: float(adv[i]) / (n * 2 * (e - s)) for s, e in tr.turn_spans for t in range(s, e)}
        for i, tr in enumerate(trajectories)
    ]
    per_traj = [
        {t: float(adv[i]) / (n * tr.num_sampled_tokens) for s, e in tr.turn_spans for t in range(s, e)}
        for i, tr in enumerate(trajectories)
    ]
    reference = build_tiny("dense_qwen3")
    expected_turn = _hand_gradient(reference, trajectories, per_turn)
    expected_traj = _hand_gradient(reference, trajectories, per_traj)
    assert not _close(expected_turn, expected_traj)  # the case tells the units apart

    turn_update, metrics = _update(build_tiny("dense_qwen3"), trajectories, unit="turn")
    assert _close(turn_update, expected_turn)
    assert metrics["clip_frac_turn"] == 0.0  # s_ik = 1 for every turn: nothing clipped
    traj_update, _ = _update(build_tiny("dense_qwen3"), trajectories)
    assert _close(traj_update, expected_traj)


def test_turn_credit_feeds_gspo_token_each_tokens_turn_advantage():
    """credit="turn" with gspo_token at s = 1: token t of turn k gets A_ik / (N |y_i|) with A_ik the turn's
    return-to-go advantage (advantages.turn_advantages); plain gspo gets the episode's A_i on every token. They
    differ on the turns whose advantage differs from the episode's (turn 2 of episodes 0 and 1)."""
    trajectories = _two_turn_trajectories()
    n = len(trajectories)
    turn_adv = turn_advantages(TURN_REWARDS, 4)[0].double()  # [4, 2]
    episode_adv, _ = group_advantages(torch.tensor([sum(r) for r in TURN_REWARDS], dtype=torch.float64), 4)
    assert torch.allclose(turn_adv[:, 0], episode_adv)  # turn 1's return-to-go is the episode return
    assert not torch.allclose(turn_adv[:, 1], episode_adv)  # turn 2's is not (for episodes 0 and 1)
    per_token = [
        {
            t: float(turn_adv[i, k]) / (n * tr.num_sampled_tokens)
            for k, (s, e) in enumerate(tr.turn_spans)
            for t in range(s, e)
        }
        for i, tr in enumerate(trajectories)
    ]
    reference = build_tiny("dense_qwen3")
    expected = _hand_gradient(reference, trajectories, per_token)

    token_update, _ = _update(build_tiny("dense_qwen3"), trajectories, objective="gspo_token", credit="turn")
    assert _close(token_update, expected)
    plain_update, _ = _update(build_tiny("dense_qwen3"), trajectories, objective="gspo")
    assert not _close(plain_update, expected)


def test_turn_unit_and_turn_credit_together_give_each_turn_its_advantage():
    """unit="turn" + credit="turn": turn k's tokens get A_ik / (N K_i |y_ik|)."""
    trajectories = _two_turn_trajectories()
    turn_adv, _ = turn_advantages(TURN_REWARDS, 4)
    per_token = [
        {t: float(turn_adv[i, k]) / (4 * 2 * (e - s)) for k, (s, e) in enumerate(tr.turn_spans) for t in range(s, e)}
        for i, tr in enumerate(trajectories)
    ]
    expected = _hand_gradient(build_tiny("dense_qwen3"), trajectories, per_token)
    update, _ = _update(build_tiny("dense_qwen3"), trajectories, unit="turn", credit="turn")
    assert _close(update, expected)


def test_turn_rewards_round_trip_and_old_records_are_refused_by_turn_credit(tmp_path):
    trajectories = _two_turn_trajectories()
    path = tmp_path / "trajectories.jsonl"
    write_jsonl(trajectories, path)
    assert [t.turn_rewards for t in read_jsonl(path)] == TURN_REWARDS
    # A record written before per-turn rewards existed: still readable, refused by credit="turn" with the reason.
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        del line["turn_rewards"], line["routed_experts"]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    old = read_jsonl(path)
    assert all(t.turn_rewards == [] for t in old)
    with pytest.raises(ValueError, match="without per-turn rewards"):
        _update(build_tiny("dense_qwen3"), old, objective="gspo_token", credit="turn")


def test_turn_rewards_that_disagree_with_the_episode_reward_are_an_error():
    trajectories = _two_turn_trajectories()
    trajectories[0].reward = 5.0  # e.g. a group reward function rewrote the episode's reward
    with pytest.raises(ValueError, match="turn rewards sum to"):
        _update(build_tiny("dense_qwen3"), trajectories, objective="gspo_token", credit="turn")


@pytest.mark.parametrize(
    "config, message",
    [
        (dict(unit="turn", objective="grpo"), "unit='turn'"),
        (dict(credit="turn", objective="gspo"), "cannot carry per-turn advantages"),
        (dict(unit="episode"), "unit: expected"),
    ],
)
def test_settings_that_do_not_fit_together_are_refused(config, message):
    with pytest.raises(ValueError, match=message):
        LearnerConfig(**config)


def test_rollout_records_each_steps_reward_and_zero_for_a_turn_no_step_consumed(renderer):
    from agentgspo.envs.calculator import CalculatorEnv, calculator_oracle
    from agentgspo.policy.base import ScriptedPolicy
    from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner

    def run(max_new_tokens):
        runner = RolloutRunner(
            CalculatorEnv,
            ScriptedPolicy(calculator_oracle, renderer),
            renderer,
            RolloutConfig(group_size=1, sampling=SamplingParams(max_new_tokens=max_new_tokens)),
            env_id="test",
        )
        return runner.run_sync([0])[0]

    solved = run(256)  # the oracle: a tool call (step reward 0), then the right answer (reward 1)
    assert solved.turn_rewards == [0.0, 1.0] and solved.reward == 1.0
    cut = run(3)  # the first turn is cut at 3 ids: no step consumed it
    assert cut.stop_reason == "max_tokens" and cut.turn_rewards == [0.0] and cut.num_turns == 1
