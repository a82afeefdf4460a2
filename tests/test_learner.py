"""GSPOLearner on the tiny MoE with synthetic trajectories: what trains, what is skipped, what is logged."""

from __future__ import annotations

import random

import pytest
import torch
from accelerate import Accelerator

from agentgspo.learner import GSPOLearner, LearnerConfig, routing_volatility
from agentgspo.trajectory import Trajectory

from tiny_models import FAMILIES, MOE_FAMILIES, build_tiny  # tests/tiny_models.py


@pytest.fixture
def tiny():
    from transformers import AutoModelForCausalLM

    from agentgspo.tiny import tiny_policy_path

    return AutoModelForCausalLM.from_pretrained(tiny_policy_path())


def _trajectories(rewards, *, stop_reasons=None, group_size=4, seed=0):
    rng = random.Random(seed)
    out = []
    for i, reward in enumerate(rewards):
        t = Trajectory(group_id=i // group_size, sample_id=i % group_size)
        t.append_forced([rng.randrange(3, 100) for _ in range(10)])
        sampled = [rng.randrange(3, 100) for _ in range(rng.randrange(3, 12))]
        t.append_sampled(sampled, [-4.0] * len(sampled))
        t.reward = float(reward)
        if stop_reasons:
            t.stop_reason = stop_reasons[i]
        out.append(t)
    return out


def _learner(model, **config):
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    return GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=LearnerConfig(**config))


def _snapshot(model):
    return [p.detach().clone() for p in model.parameters()]


def _changed(model, before):
    return max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))


def test_mixed_rewards_train_and_log_the_paper_diagnostics(tiny):
    learner = _learner(tiny)
    before = _snapshot(tiny)
    metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))
    assert _changed(tiny, before) > 0
    assert metrics["optimizer_steps"] == 4  # paper §5.1: 4 minibatches per rollout batch
    for key in ("loss", "clip_frac_seq", "clip_frac_token", "clip_frac_low", "clip_frac_high", "ratio_mean",
                "entropy", "grad_norm", "aux_loss", "routing_volatility", "sampler_logprob_gap", "trained_tokens"):
        assert key in metrics, key
    assert 0 <= metrics["clip_frac_seq"] <= 1 and 0 <= metrics["routing_volatility"] <= 1
    # logp_old is recomputed by the same model before any update: the first minibatch's ratios are exactly 1.
    assert metrics["ratio_min"] <= 1.0 <= metrics["ratio_max"]
    # Synthetic sampler log-probs (-4.0) are not the model's: the gap metric shows the mismatch.
    assert metrics["sampler_logprob_gap"] > 0.1


def test_all_equal_rewards_leave_the_policy_untouched(tiny):
    learner = _learner(tiny)
    before = _snapshot(tiny)
    metrics = learner.step(_trajectories([1, 1, 1, 1, 0, 0, 0, 0]))
    assert _changed(tiny, before) == 0  # no optimizer step: AdamW would move weights even on a zero gradient
    assert metrics["optimizer_steps"] == 0 and metrics["zero_variance_frac"] == 1.0
    assert metrics["loss"] == 0.0 and metrics["clip_frac_seq"] == 0.0


def test_env_and_judge_errors_are_left_out_of_advantages(tiny):
    # Group 0: the only failure is an env crash, so the group is all-equal among real episodes: nothing to learn.
    reasons = ["completed", "completed", "completed", "env_error", "completed", "judge_error", "completed",
               "completed"]
    learner = _learner(tiny)
    before = _snapshot(tiny)
    metrics = learner.step(_trajectories([1, 1, 1, 0, 1, 0, 1, 1], stop_reasons=reasons))
    assert _changed(tiny, before) == 0
    assert metrics["excluded_sequences"] == 2 and metrics["trained_sequences"] == 0


def test_sampler_logprobs_as_logp_old_show_up_in_the_ratio(tiny):
    metrics = _learner(tiny, logp_old="sampler").step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))
    # Sampler log-probs of -4.0 sit above the untrained model's (~ -ln 123 = -4.8), so every ratio is far below
    # 1 - eps_low: exactly the negative-advantage half is clipped (at the low side), the positive half is not.
    assert metrics["clip_frac_seq"] == pytest.approx(0.5)
    assert metrics["clip_frac_low"] == pytest.approx(0.5) and metrics["clip_frac_high"] == 0.0
    assert "sampler_logprob_gap" not in metrics


def test_routing_volatility_counts_changed_expert_choices():
    before = torch.tensor([[[0, 1], [2, 3]]])  # [L=1, N=2, k=2]
    assert routing_volatility(before, before) == 0.0
    assert routing_volatility(before, torch.tensor([[[0, 2], [2, 3]]])) == pytest.approx(0.25)


def test_config_errors_name_the_setting():
    with pytest.raises(ValueError, match="objective"):
        LearnerConfig(objective="ppo")
    with pytest.raises(ValueError, match="logp_old"):
        LearnerConfig(logp_old="ref")
    assert (LearnerConfig(objective="grpo").eps_low, LearnerConfig().eps_high) == (0.2, 4e-4)


@pytest.mark.parametrize("objective", ["gspo", "grpo"])
def test_compiled_loss_region_trains_like_the_eager_one(objective):
    """``compile=True`` (fused fp32 log-probs + objective under torch.compile) makes the same update as eager."""
    from transformers import AutoModelForCausalLM

    from agentgspo.tiny import tiny_policy_path

    results = []
    for compile_region in (False, True):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_policy_path())
        learner = _learner(model, objective=objective, compile=compile_region, volatility_rows=0)
        metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0]))
        results.append((_snapshot(model), metrics))
    (eager_params, eager), (compiled_params, compiled) = results
    assert compiled["optimizer_steps"] == eager["optimizer_steps"] == 4
    for name in ("loss", "clip_frac_seq", "clip_frac_token", "ratio_mean", "grad_norm", "trained_tokens"):
        assert compiled[name] == pytest.approx(eager[name], rel=1e-4, abs=1e-6), name
    for a, b in zip(eager_params, compiled_params):
        torch.testing.assert_close(b, a, rtol=0, atol=2e-5)
    assert _changed(AutoModelForCausalLM.from_pretrained(tiny_policy_path()), compiled_params) > 1e-4



@pytest.mark.parametrize("name", FAMILIES)
def test_other_architectures_train_with_router_loss_and_volatility(name):
    """Any HF MoE causal LM gets the aux loss and routing volatility; a dense model trains without them."""
    model = build_tiny(name)
    learner = _learner(model, router_aux_loss_coef=0.01)
    before = _snapshot(model)
    metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))  # token ids < 100 < vocab 128
    assert _changed(model, before) > 0 and metrics["optimizer_steps"] == 4
    moe = name in MOE_FAMILIES
    assert ("aux_loss" in metrics) == moe and ("routing_volatility" in metrics) == moe
    if moe:
        assert metrics["aux_loss"] > 0 and 0 <= metrics["routing_volatility"] <= 1
