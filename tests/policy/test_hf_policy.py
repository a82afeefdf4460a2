"""The transformers backend: the prefill keeps only the last position's logits, any of several stop ids ends a turn
(real tokenizers have more than one end token), and a weight update during a batch applies from the next one."""

from __future__ import annotations

import asyncio
import copy
import threading

import pytest
import torch

from agentgspo.core.sampling import SampleRequest, SamplingParams
from agentgspo.policy.base import EventLoopConflict
from agentgspo.policy.hf import HFPolicy, stop_ids_of

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)


@pytest.mark.slow
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
    policy = HFPolicy(
        warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id, stop_ids=[extra]
    )
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


def full_logprobs(model, prompt: list[int], ids: list[int], temperature: float) -> torch.Tensor:
    """log_softmax(logits / T) over the whole vocabulary of each of ``ids`` after ``prompt`` (one fp32 forward)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float() / temperature  # [n, V]
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)  # [n]


def test_logprobs_are_the_full_vocabularys_whatever_top_k_and_top_p_cut(warm_model, renderer, tokenizer):
    # logprob_semantics "full": what the learner computes, even when the draw came from a truncated distribution
    # (the vLLM backends' are "truncated": tests/policy/test_vllm_engine.py).
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    assert policy.logprob_semantics == "full"
    prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7 + 3?"}])
    for params in (SamplingParams(0.7, 0.9, 32), SamplingParams(1.0, 1.0, 32, top_k=3)):
        for turn in policy.generate([prompt] * 4, params, seeds=[1, 2, 3, 4]):
            expected = full_logprobs(warm_model, prompt, turn.token_ids, params.temperature)
            assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= 1e-4


def test_top_k_one_at_temperature_one_samples_the_argmax(warm_model, renderer, tokenizer):
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7 + 3?"}])
    (greedy,) = policy.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=24))
    turns = policy.generate([prompt] * 4, SamplingParams(1.0, 1.0, 24, top_k=1), seeds=[1, 2, 3, 4])
    assert all(turn.token_ids == greedy.token_ids for turn in turns)
    # still the full vocabulary's log-probs (greedy's are at T = 1), not 0.0 as over the one id kept
    assert turns[0].logprobs == pytest.approx(greedy.logprobs, abs=1e-5) and min(greedy.logprobs) < -1e-3


def test_an_update_during_a_batch_applies_from_the_next_batch_without_waiting_for_it(warm_model, renderer, tokenizer):
    # Asynchronous training: the learner updates a sampler that holds its own copy while a batch is mid-forward.
    # The update returns at once (it does not wait for the batch), the batch finishes on the old weights and
    # records their version, and the next batch samples with the new weights.
    sampler, learner = copy.deepcopy(warm_model), copy.deepcopy(warm_model)
    with torch.no_grad():
        for parameter in learner.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=torch.Generator().manual_seed(0)) * 0.01)
    policy = HFPolicy(sampler, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7 + 3?"}])
    params = SamplingParams(1.0, 1.0, 16)
    in_forward, release = threading.Event(), threading.Event()

    def hold(module, args, output):  # the batch waits inside its first forward until the update is done
        in_forward.set()
        assert release.wait(timeout=120)

    hook = sampler.register_forward_hook(hold)
    batch: list = []
    versions: list[int] = []
    sampling = threading.Thread(target=lambda: batch.extend(policy.generate([prompt] * 2, params, seeds=[1, 2])))
    updating = threading.Thread(target=lambda: versions.append(policy.update_weights(learner)))
    try:
        sampling.start()
        assert in_forward.wait(timeout=120)
        updating.start()
        updating.join(timeout=120)
        assert versions == [1] and policy.version == 1  # returned while the batch holds the model
    finally:
        release.set()
        sampling.join(timeout=120)
        hook.remove()
    assert [turn.policy_version for turn in batch] == [0, 0]
    for turn in batch:  # the whole batch on the old weights
        expected = full_logprobs(warm_model, prompt, turn.token_ids, 1.0)
        assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= 1e-4
    (turn,) = policy.generate([prompt], params, seeds=[1])
    assert turn.policy_version == 1 and policy._staged is None
    expected = full_logprobs(learner, prompt, turn.token_ids, 1.0)
    assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= 1e-4
    assert (
        float((torch.tensor(turn.logprobs) - full_logprobs(warm_model, prompt, turn.token_ids, 1.0)).abs().max()) > 1e-2
    )


def _loop_in_thread():
    """A running event loop on a thread of its own: the rollout producer's arrangement under asynchronous
    training. Returns the loop and a function that stops it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def stop():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
        loop.close()

    return loop, stop


def test_a_second_event_loop_is_refused_while_the_first_has_a_turn_in_flight(warm_model, renderer, tokenizer):
    # An evaluation sampling from a loop of its own while the producer's loop has a turn in flight: the request
    # joined the other loop's batch queue and its future, set from that loop, never woke it (it stalled until
    # sampler_timeout_s). Now it is refused at once with an error naming the fix; the first loop's turn is unharmed.
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    prompt = renderer.prompt_ids([{"role": "user", "content": "1 + 1?"}])
    params = SamplingParams(1.0, 1.0, 8)
    in_forward, release = threading.Event(), threading.Event()

    def hold(module, args, output):  # the first loop's batch waits inside its forward: its turn is in flight
        in_forward.set()
        assert release.wait(timeout=120)

    producer, stop = _loop_in_thread()
    hook = warm_model.register_forward_hook(hold)
    try:
        first = asyncio.run_coroutine_threadsafe(policy.sample(SampleRequest(prompt, [], params, seed=1)), producer)
        assert in_forward.wait(timeout=120)

        async def second():
            return await asyncio.wait_for(policy.sample(SampleRequest(prompt, [], params, seed=2)), timeout=5)

        with pytest.raises(EventLoopConflict, match=r"hf backend: .*another event loop .* has 1 requests in flight"):
            asyncio.run(second())
    finally:
        release.set()
        hook.remove()
    try:
        assert first.result(timeout=120).token_ids
    finally:
        stop()


def test_a_new_event_loop_takes_the_backend_over_once_the_first_is_done(warm_model, renderer, tokenizer):
    # Rebinding stays allowed (asyncio.run per rollout makes a new loop each time; tests share one backend): the
    # first loop, still running, has no turn in flight, so a second loop samples at once with a queue of its own.
    policy = HFPolicy(warm_model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id)
    prompt = renderer.prompt_ids([{"role": "user", "content": "1 + 1?"}])
    request = SampleRequest(prompt, [], SamplingParams(1.0, 1.0, 8), seed=1)

    async def again():
        return await asyncio.wait_for(policy.sample(request), timeout=60)

    producer, stop = _loop_in_thread()
    try:
        first = asyncio.run_coroutine_threadsafe(policy.sample(request), producer).result(timeout=120)
        assert asyncio.run(again()).token_ids == first.token_ids  # the first loop runs on, idle; same seed, same ids
    finally:
        stop()
    assert asyncio.run(again()).token_ids == first.token_ids  # and a third loop after it
