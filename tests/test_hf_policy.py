"""The transformers backend: the prefill keeps only the last position's logits, and any of several stop ids ends
a turn (real tokenizers have more than one end token)."""

from __future__ import annotations

import torch

from agentgspo.policy.base import SamplingParams
from agentgspo.policy.hf import HFPolicy, stop_ids_of

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)


def test_prefill_builds_logits_for_the_last_position_only(warm_model, renderer, tokenizer):
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    shapes = []
    hook = warm_model.register_forward_hook(lambda module, args, output: shapes.append(tuple(output.logits.shape)))
    try:
        prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7?"}])
        policy.generate([prompt, prompt[:-3]], SamplingParams(max_new_tokens=4), seeds=[1, 2])
    finally:
        hook.remove()
    assert len(prompt) > 10 and shapes
    assert all(shape[1] == 1 for shape in shapes), shapes  # [B, 1, V] at the prefill too, never [B, L, V]


def test_any_stop_id_ends_the_turn(warm_model, renderer, tokenizer):
    prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7?"}])
    plain = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    (free,) = plain.generate([prompt], GREEDY)
    extra = next(t for t in free.token_ids[2:] if t != renderer.end_of_turn_id)  # a token greedy decoding reaches
    cut = free.token_ids.index(extra) + 1
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id,
                      stop_ids=[extra])
    (turn,) = policy.generate([prompt], GREEDY)
    assert turn.token_ids == free.token_ids[:cut] and turn.finish_reason == "stop"
    assert policy.stop_ids == {renderer.end_of_turn_id, extra}


def test_stop_ids_come_from_the_tokenizer_and_the_generation_config(tokenizer):
    class GenerationConfig:  # Qwen3's generation config lists <|im_end|> and <|endoftext|>
        eos_token_id = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.pad_token_id]

    assert stop_ids_of(tokenizer, GenerationConfig()) == sorted({tokenizer.eos_token_id, tokenizer.pad_token_id})
    assert stop_ids_of(tokenizer, None) == [tokenizer.eos_token_id]


def test_from_pretrained_stops_at_every_end_token(tiny_path):
    policy = HFPolicy.from_pretrained(tiny_path)
    assert policy.end_of_turn_id in policy.stop_ids and policy.version == 0


def test_turns_carry_the_version_of_the_weights_that_sampled_them(warm_model, renderer, tokenizer):
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    prompt = renderer.prompt_ids([{"role": "user", "content": "1 + 1?"}])
    assert policy.generate([prompt], GREEDY)[0].policy_version == 0
    policy.version = 3
    assert policy.generate([prompt], GREEDY)[0].policy_version == 3
    assert torch.is_grad_enabled()
