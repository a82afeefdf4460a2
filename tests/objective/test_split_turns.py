"""Split-turns mode (RolloutConfig(history="split_turns")): each assistant turn is sampled in, and trained on, the
context the chat template renders at that turn; its episode's advantage is counted once per episode.

Qwen3's template drops the <think> block of assistant turns before the latest user message, so a conversation with
a follow-up question is where the as-sampled sequence and the template's render part ways."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest
import torch
from accelerate import Accelerator

import agentgspo
from agentgspo.objective.batching import collate, score
from agentgspo.core.chat import ChatRenderer
from agentgspo.learning.learner import GSPOLearner, LearnerConfig
from agentgspo.core.sampling import SampleRequest, SampledTurn, SamplingParams
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.policy.hf import HFPolicy
from agentgspo.environments.registry import registered_ids
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
from agentgspo.objective.split_turns import episode_advantages
from agentgspo.core.trajectory import Trajectory
from qwen3 import build_tiny_qwen3_moe, load_tokenizer

THINK = "<think>\nSeven plus five, carry the one.\n</think>\n\n"


class FollowUpEnv(agentgspo.ChatEnv):
    """A question, then a follow-up user message about the answer; reward 1 when both answers are right."""

    def __init__(self, **kwargs):
        super().__init__(tools=[], **kwargs)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.asked = 1
        return [{"role": "user", "content": "What is 7+5?"}], {}

    def respond(self, action):
        answer = action.content.split("</think>")[-1].strip()
        if self.asked == 1:
            self.asked, self.first = 2, answer == "12"
            return [{"role": "user", "content": "And doubled?"}], 0.0, False, False, {}
        return [], float(self.first and answer == "24"), True, False, {}

    @staticmethod
    def oracle(messages):
        return THINK + ("12" if len(messages) < 3 else "24")


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory):
    return build_tiny_qwen3_moe(tmp_path_factory.mktemp("qwen3-moe"))


@pytest.fixture(scope="module")
def renderer(qwen3_folder):
    return ChatRenderer(load_tokenizer(qwen3_folder))


def template_render(tokenizer, messages, tools=None):
    """The template's own render of ``messages`` with the generation prompt (independent of ChatRenderer)."""
    text = tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def play(renderer, history, make_env=FollowUpEnv, fn=FollowUpEnv.oracle, group_size=2, seeds=range(1)):
    config = RolloutConfig(
        group_size=group_size,
        max_turns=12,
        max_context=32768,
        history=history,
        sampling=SamplingParams(max_new_tokens=4096),
    )
    return RolloutRunner(make_env, ScriptedPolicy(fn, renderer), renderer, config).run_sync(list(seeds))


def assert_each_sample_is_the_template_render_plus_its_turn(samples, tokenizer, tools=None):
    for sample in samples:
        turn = sample.metadata["episode_turn"]
        assistant_at = [i for i, m in enumerate(sample.messages) if m["role"] == "assistant"]
        before = sample.messages[: assistant_at[turn]]
        ((start, end),) = sample.turn_spans
        assert sample.token_ids[:start] == template_render(tokenizer, before, tools)
        content = sample.messages[assistant_at[turn]]["content"]
        assert sample.token_ids[start:end] == tokenizer.encode(content, add_special_tokens=False) + [
            tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        assert sample.loss_mask == [0] * start + [1] * (end - start)


@pytest.mark.slow
def test_each_turn_is_sampled_in_the_context_the_template_renders_dropping_earlier_reasoning(renderer):
    tokenizer = renderer.tokenizer
    samples = play(renderer, "split_turns")
    assert len(samples) == 4 and [s.metadata["episode_turn"] for s in samples] == [0, 1, 0, 1]
    assert all(s.reward == 1.0 and s.stop_reason == "completed" for s in samples)
    assert_each_sample_is_the_template_render_plus_its_turn(samples, tokenizer)
    reasoning = tokenizer.encode("Seven plus five", add_special_tokens=False)

    def holds(ids, part):
        return any(ids[i : i + len(part)] == part for i in range(len(ids)))

    second_context = samples[1].token_ids[: samples[1].turn_spans[0][0]]
    assert not holds(second_context, reasoning)  # the template dropped turn 1's <think> block
    as_sampled = play(renderer, "as_sampled")
    assert len(as_sampled) == 2 and as_sampled[0].num_turns == 2
    start_of_turn_2 = as_sampled[0].turn_spans[1][0]
    assert holds(as_sampled[0].token_ids[:start_of_turn_2], reasoning)  # as sampled: still there
    stats = summarize(samples)
    assert stats["episodes"] == 2 and stats["turns_mean"] == 2 and stats["reward_mean"] == 1.0


@pytest.mark.parametrize("env_id", registered_ids())
def test_split_turn_samples_of_every_bundled_env_are_the_template_render(env_id, renderer):
    def make_env():
        return gym.make(env_id, disable_env_checker=True)

    env = make_env()
    samples = play(renderer, "split_turns", make_env=make_env, fn=env.unwrapped.oracle, seeds=range(2))
    assert all(s.reward == 1.0 for s in samples), [s.metadata for s in samples]
    assert max(s.metadata["episode_turns"] for s in samples) >= 2
    assert_each_sample_is_the_template_render_plus_its_turn(samples, renderer.tokenizer, env.unwrapped.tool_schemas)
    env.close()


def test_the_learner_trains_each_turn_on_exactly_its_sample_ids(renderer, qwen3_folder, monkeypatch):
    from transformers import AutoModelForCausalLM

    import agentgspo.learning.learner

    samples = play(renderer, "split_turns")
    for sample in samples[2:]:  # the second episode fails: the group's advantages are +-0.7071 per episode
        sample.reward = 0.0
    computed = []

    def spy(trajectories):
        computed.append(episode_advantages(trajectories)[0].tolist())
        return episode_advantages(trajectories)

    monkeypatch.setattr(agentgspo.learning.learner, "episode_advantages", spy)
    model = AutoModelForCausalLM.from_pretrained(qwen3_folder, dtype=torch.float32)
    seen: list[list[int]] = []

    def record(module, args, kwargs):
        ids, mask = kwargs["input_ids"], kwargs["attention_mask"]
        seen.extend(row[m.bool()].tolist() for row, m in zip(ids, mask))

    model.register_forward_pre_hook(record, with_kwargs=True)
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    learner = GSPOLearner(
        model,
        optimizer,
        accelerator,
        pad_token_id=renderer.tokenizer.pad_token_id,
        config=LearnerConfig(minibatches=1, skip_zero_advantage=False, volatility_rows=0, memory_estimate=False),
    )
    learner.step(samples)
    assert computed == [pytest.approx([0.70710, 0.70710, -0.70710, -0.70710], abs=1e-4)]
    # Each sample forwarded once (one minibatch: the update's forward gives its logp_old), exactly its own ids.
    assert sorted(seen) == sorted(s.token_ids for s in samples)
    batch = collate(samples, renderer.tokenizer.pad_token_id)
    for row, sample in enumerate(samples):
        ((start, end),) = sample.turn_spans
        assert batch.loss_mask[row].nonzero().flatten().tolist() == list(range(start, end))


def test_an_episodes_turns_share_one_advantage_counted_once_in_its_group():
    def sample(reward, sample_id, turn, turns):
        return Trajectory(
            group_id=0,
            sample_id=sample_id,
            seed=5,
            reward=reward,
            metadata={"episode_turn": turn, "episode_turns": turns},
        )

    # Episode 0: three turns, reward 1; episode 1: one turn, reward 0. Per episode: z = +-0.7071 (unbiased std).
    samples = [sample(1.0, 0, k, 3) for k in range(3)] + [sample(0.0, 1, 0, 1)]
    advantages, stats = episode_advantages(samples)
    assert advantages.tolist() == pytest.approx([0.70710, 0.70710, 0.70710, -0.70710], abs=1e-4)
    assert stats["num_groups"] == 1
    broken = [dataclasses.replace(samples[0], reward=0.5), *samples[1:]]
    with pytest.raises(ValueError, match="different rewards"):
        episode_advantages(broken)


class OracleThenModel:
    """Turn 1 from the env's oracle (a tool call), later turns sampled by the tiny random Qwen3-MoE."""

    logprob_semantics = "none"  # turn 1's (the oracle's): the record cannot claim the model's for the whole episode

    def __init__(self, oracle, model):
        self.oracle, self.model, self.end_of_turn_id = oracle, model, model.end_of_turn_id

    async def sample(self, request: SampleRequest) -> SampledTurn:
        if any(m["role"] == "assistant" for m in request.messages):
            return await self.model.sample(request)
        unlimited = dataclasses.replace(request.params, max_new_tokens=4096)
        return await self.oracle.sample(dataclasses.replace(request, params=unlimited))


def test_sampled_split_turns_carry_the_log_probs_of_their_own_context(renderer, qwen3_folder):
    env_id = "agentgspo/Calculator-v0"
    policy = HFPolicy.from_pretrained(str(qwen3_folder), seed=0)
    env = gym.make(env_id)
    sampler = OracleThenModel(ScriptedPolicy(env.unwrapped.oracle, renderer), policy)
    config = RolloutConfig(
        group_size=2, max_turns=3, max_context=32768, history="split_turns", sampling=SamplingParams(max_new_tokens=8)
    )
    samples = RolloutRunner(lambda: gym.make(env_id), sampler, renderer, config, env_id=env_id).run_sync([0, 1])
    sampled = [s for s in samples if s.metadata["episode_turn"] >= 1]
    assert sampled
    batch = collate(sampled, renderer.tokenizer.pad_token_id)
    with torch.no_grad():
        logprobs, _ = score(policy.model, batch, temperature=1.0)
    difference = (logprobs - batch.sampler_logprobs).abs()[batch.loss_mask]
    assert int(batch.loss_mask.sum()) >= 8 and float(difference.max()) <= 1e-4
    env.close()
