"""A real tokenizer and chat template end to end: Qwen3's vocabulary and template (vendored, tests/qwen3.py) drive
token-exact multi-turn rollouts on every bundled env, with the env's oracle and with a tiny random Qwen3-MoE that
samples over the full 151,669-token vocabulary."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest
import torch

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.objective.batching import collate, score
from agentgspo.core.chat import ChatRenderer
from agentgspo.core.sampling import SampleRequest, SampledTurn, SamplingParams
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.policy.hf import HFPolicy
from agentgspo.environments.registry import registered_ids
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner
from qwen3 import build_tiny_qwen3_moe, load_tokenizer, unpack_tokenizer
from token_exact import assert_token_exact  # tests/token_exact.py

# The sampler (left-padded, KV cache, one token at a time) and the learner's scoring pass (right-padded, whole
# sequence) run different kernels on the same fp32 weights.
LOGPROB_ATOL = 1e-4


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory):
    return build_tiny_qwen3_moe(tmp_path_factory.mktemp("qwen3-moe"))


@pytest.fixture(scope="module")
def qwen3_renderer(qwen3_folder):
    return ChatRenderer(load_tokenizer(qwen3_folder))


@pytest.fixture(scope="module")
def qwen3_model(qwen3_folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(qwen3_folder, dtype=torch.float32).eval()


def make_env_factory(env_id):
    return lambda: gym.make(env_id, disable_env_checker=True)


def test_the_vendored_tokenizer_is_qwen3s(tmp_path):
    tokenizer = load_tokenizer(unpack_tokenizer(tmp_path))
    assert len(tokenizer) == 151669
    assert tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]) == [151645, 151643]
    text = 'Hi,  there!\n  def f(x):\n\treturn x ** 2  # 计算 <tool_call>{"a": 1}</tool_call>'
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text  # byte-level round trip
    assert "<think>" in tokenizer.chat_template


@pytest.mark.slow
@pytest.mark.parametrize("env_id", registered_ids())
def test_oracle_episodes_are_token_exact_under_the_qwen3_template(env_id, qwen3_renderer):
    make_env = make_env_factory(env_id)
    env = make_env()
    config = RolloutConfig(group_size=2, max_turns=12, max_context=32768, sampling=SamplingParams(max_new_tokens=4096))
    runner = RolloutRunner(
        make_env, ScriptedPolicy(env.unwrapped.oracle, qwen3_renderer), qwen3_renderer, config, env_id=env_id
    )
    trajectories = runner.run_sync(range(3))
    assert [t.reward for t in trajectories] == [1.0] * 6, [t.metadata for t in trajectories]
    assert any(t.num_turns >= 2 for t in trajectories)
    for trajectory in trajectories:
        assert_token_exact(trajectory, qwen3_renderer, env.unwrapped.tool_schemas)
    assert all(t.matches_full_render is True for t in trajectories)
    env.close()


class OracleThenModel:
    """Turn 1 from the env's oracle (a tool call, so the episode goes on), later turns sampled by the model."""

    logprob_semantics = "none"  # turn 1's (the oracle's): the record cannot claim the model's for the whole episode

    def __init__(self, oracle: ScriptedPolicy, model: HFPolicy):
        self.oracle, self.model = oracle, model
        self.end_of_turn_id = model.end_of_turn_id

    async def sample(self, request: SampleRequest) -> SampledTurn:
        if any(m["role"] == "assistant" for m in request.messages):
            return await self.model.sample(request)
        unlimited = dataclasses.replace(request.params, max_new_tokens=4096)  # the limit is for the model's turns
        return await self.oracle.sample(dataclasses.replace(request, params=unlimited))


@pytest.mark.slow
@pytest.mark.parametrize("env_id", registered_ids())
def test_sampled_turns_of_a_random_qwen3_moe_are_token_exact(env_id, qwen3_renderer, qwen3_model):
    make_env = make_env_factory(env_id)
    env = make_env()
    tokenizer = qwen3_renderer.tokenizer
    model_policy = HFPolicy(
        qwen3_model,
        end_of_turn_id=qwen3_renderer.end_of_turn_id,
        pad_token_id=tokenizer.pad_token_id,
        stop_ids=[tokenizer.convert_tokens_to_ids("<|endoftext|>")],
        seed=0,
    )
    policy = OracleThenModel(ScriptedPolicy(env.unwrapped.oracle, qwen3_renderer), model_policy)
    config = RolloutConfig(group_size=2, max_turns=4, max_context=32768, sampling=SamplingParams(max_new_tokens=12))
    trajectories = RolloutRunner(make_env, policy, qwen3_renderer, config, env_id=env_id).run_sync(range(2))
    multi_turn = [t for t in trajectories if t.num_turns >= 2]
    assert multi_turn, [(t.stop_reason, t.num_turns) for t in trajectories]
    for trajectory in trajectories:
        assert_token_exact(trajectory, qwen3_renderer, env.unwrapped.tool_schemas)
    # The model's turns carry real log-probs (about -log 151669 for random weights) equal to a fresh fp32 forward.
    batch = collate(trajectories, tokenizer.pad_token_id)
    with torch.no_grad():
        logprobs, _ = score(qwen3_model, batch, temperature=1.0)
    sampled = batch.loss_mask & (batch.sampler_logprobs != 0.0)  # the oracle's turns carry 0.0
    assert int(sampled.sum()) >= 12
    difference = (logprobs - batch.sampler_logprobs).abs()[sampled]
    assert float(difference.max()) <= LOGPROB_ATOL, f"max |sampler - learner| = {float(difference.max()):.2e}"
    env.close()


def test_check_template_flags_qwen3_only_where_it_drops_reasoning(tmp_path):
    """Qwen3's template drops earlier <think> blocks (a real rewrite: flagged from the turn after a new user message)
    and decorates its last assistant message with an empty <think></think> block (not a rewrite of what was
    sampled: a conversation without reasoning is prefix-preserving)."""
    from agentgspo.core.chat import SCRIPTED_CONVERSATION, check_template

    tokenizer = load_tokenizer(unpack_tokenizer(tmp_path))
    with_reasoning = check_template(tokenizer)
    assert [t["prefix"] for t in with_reasoning.turns] == [True, False, False]
    without = [
        dict(m, content=m["content"].split("</think>")[-1].lstrip()) if m["role"] == "assistant" else m
        for m in SCRIPTED_CONVERSATION
    ]
    assert check_template(tokenizer, without).prefix_preserving
