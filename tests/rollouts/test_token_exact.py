"""Token exactness with a sampled policy: a multi-turn episode of the (briefly warm-started) tiny MoE is the
concatenation of its sampled ids and the env ids the renderer appends, the loss mask is 1 exactly on sampled ids,
and the sampler's log-probs equal a fresh fp32 forward pass of the learner on the record."""

from __future__ import annotations

import pytest
import torch

from agentgspo.objective.batching import collate, score
from agentgspo.envs.calculator import CalculatorEnv
from agentgspo.core.sampling import SamplingParams
from agentgspo.policy.hf import HFPolicy
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner
from token_exact import AgainCalculator, rerender  # tests/token_exact.py

# HF sampling (left-padded batch, KV cache, one token at a time) and scoring (right-padded, full sequence) run
# different kernels on the same fp32 weights; they agree to ~1e-5 per token.
LOGPROB_ATOL = 1e-4


@pytest.fixture(scope="module")
def sampled(warm_model, renderer, tokenizer):
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id, seed=0)
    config = RolloutConfig(
        group_size=2,
        max_turns=5,
        max_context=1024,
        env_call_timeout_s=120,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=48),
    )
    return RolloutRunner(AgainCalculator, policy, renderer, config).run_sync([11, 12, 13])


def test_the_sampled_episodes_are_multi_turn_with_tool_messages(sampled):
    long_ones = [t for t in sampled if t.num_turns >= 3 and any(m["role"] == "tool" for m in t.messages)]
    assert long_ones, [(t.stop_reason, t.num_turns, t.messages[2:]) for t in sampled]
    assert all(t.stop_reason in ("completed", "max_turns", "max_tokens") for t in sampled)


def test_ids_are_the_sampled_turns_and_the_appended_env_ids(sampled, renderer):
    for trajectory in sampled:
        assert trajectory.token_ids == rerender(trajectory, renderer, CalculatorEnv().tool_schemas)


def test_loss_mask_is_one_exactly_on_sampled_tokens(sampled):
    for trajectory in sampled:
        on_turns = {i for start, end in trajectory.turn_spans for i in range(start, end)}
        assert {i for i, m in enumerate(trajectory.loss_mask) if m} == on_turns
        assert all(trajectory.sampler_logprobs[i] == 0.0 for i in range(len(trajectory.token_ids)) if i not in on_turns)


def test_tiny_template_matches_the_full_render(sampled):
    assert all(t.matches_full_render is True for t in sampled)
    assert all("template_fallbacks" not in t.metadata for t in sampled)


def test_sampler_logprobs_equal_a_fresh_fp32_forward_pass(sampled, warm_model, tokenizer):
    batch = collate(sampled, tokenizer.pad_token_id)
    with torch.no_grad():
        logprobs, _ = score(warm_model, batch, temperature=1.0)  # [B, T] fp32
    assert logprobs.dtype == torch.float32
    mask = batch.loss_mask
    assert int(mask.sum()) == sum(t.num_sampled_tokens for t in sampled)
    difference = (logprobs - batch.sampler_logprobs).abs()[mask]  # [N]
    assert float(difference.max()) <= LOGPROB_ATOL, f"max |sampler - learner| = {float(difference.max()):.2e}"
    assert bool((batch.sampler_logprobs[mask] < 0).all())  # real log-probs, not placeholders


@pytest.mark.parametrize(
    ("prompts", "seeds", "expected"),
    [
        ([[5, 6], [7, 8, 9]], [1], "seeds: expected one per prompt, got 1 for 2 prompts"),
        ([[5, 6], []], None, "prompt 1 is empty"),
        ([], None, "prompts: expected at least one"),
    ],
)
def test_generate_refuses_bad_input_with_a_clear_error(warm_model, renderer, tokenizer, prompts, seeds, expected):
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    with pytest.raises(ValueError, match=expected):
        policy.generate(prompts, SamplingParams(max_new_tokens=4), seeds)


def test_top_p_keeps_the_smallest_set_that_reaches_top_p():
    from agentgspo.policy.hf import _top_p_filter

    probs = torch.tensor([[0.25, 0.5, 0.125, 0.125]])
    # 0.5 + 0.25 reaches 0.75 exactly: the nucleus stops there (transformers' and vLLM's convention).
    assert _top_p_filter(probs, 0.75).tolist() == [[0.25, 0.5, 0.0, 0.0]]
    assert float(_top_p_filter(probs, 0.8).sum()) == 0.875  # one of the two 0.125 tokens is needed
    assert _top_p_filter(probs, 1.0).tolist() == probs.tolist()
