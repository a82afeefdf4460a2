"""Routing replay on real tiny HF MoE models: the sampler records, the learner's forward routes exactly as recorded."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from accelerate import Accelerator

from agentgspo.batching import collate, forward, logprobs_from_logits
from agentgspo.learner import GSPOLearner, LearnerConfig
from agentgspo.policy.base import SamplingParams
from agentgspo.policy.hf import HFPolicy
from agentgspo.routing_replay import (batch_replay, decode_routing, encode_routing, find_routers, merge_routing,
                                      replay_routing)
from agentgspo.trajectory import Trajectory, read_jsonl, write_jsonl

from tiny_models import MOE_FAMILIES, build_tiny  # tests/tiny_models.py

MORE_MOE = dict(num_hidden_layers=4)  # more layers than the default tiny: routing has room to move


def _experts_inputs(model):
    """Collect the expert ids every experts module is called with (the routing the forward really used)."""
    calls = []
    modules = [m for m in model.modules() if type(m).__name__.endswith("Experts")]
    handles = [m.register_forward_pre_hook(lambda mod, args: calls.append(args[1].detach().clone())) for m in modules]
    return calls, handles


def _sampled_trajectories(model, *, count=4, seed=0):
    """Episodes sampled by HFPolicy(record_routing=True): a prompt, one sampled turn, the routing recorded."""
    policy = HFPolicy(model, end_of_turn_id=2, pad_token_id=0, record_routing=True)
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, 100) for _ in range(6 + 3 * i)] for i in range(count)]
    turns = policy.generate(prompts, SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=10),
                            seeds=list(range(count)))
    out = []
    for i, (prompt, turn) in enumerate(zip(prompts, turns)):
        t = Trajectory(group_id=i // 2, sample_id=i % 2)
        t.append_forced(prompt)
        t.append_sampled(turn.token_ids, turn.logprobs)
        t.routed_experts = merge_routing(None, turn.routed_experts)
        t.reward = float(i % 2)
        out.append(t)
    return out


def _perturb_routers(model, scale=0.5, seed=1):
    """An update that moves the routers (what RL does between sampling and training)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for router in find_routers(model):
            router.weight.add_(torch.randn(router.weight.shape, generator=generator) * scale)


@pytest.mark.parametrize("name", MOE_FAMILIES)
def test_replayed_forward_routes_every_token_as_the_sampler_recorded(name):
    model = build_tiny(name, **MORE_MOE)
    trajectories = _sampled_trajectories(model)
    routings = [decode_routing(t.routed_experts) for t in trajectories]  # [T, L, k] each
    layers, k = routings[0].shape[1:]
    batch = collate(trajectories, 0)
    width = batch.input_ids.shape[1]

    # The sampler's recording is what a full forward of the same weights routes (the last sampled id, never fed, -1).
    calls, handles = _experts_inputs(model)
    with torch.no_grad():
        forward(model, batch)
    for h in handles:
        h.remove()
    live_before = torch.stack(calls).view(layers, len(trajectories), width, k)
    for row, ids in enumerate(routings):
        fed = int((ids >= 0).all(-1).all(-1).sum())  # every id the sampler fed; a last id that ended the turn is not
        assert fed >= ids.shape[0] - 1 and bool((ids[fed:] == -1).all())
        recorded = ids[:fed].permute(1, 0, 2)  # [L, fed, k]
        assert torch.equal(recorded.sort(-1).values, live_before[:, row, :fed].sort(-1).values)

    _perturb_routers(model)
    calls, handles = _experts_inputs(model)
    with torch.no_grad():
        forward(model, batch)  # live routing after the update: some choices moved
        live_calls = len(calls)
        with replay_routing(model, batch_replay(routings, width)):
            forward(model, batch)
    for h in handles:
        h.remove()
    live_after = torch.stack(calls[:live_calls]).view(layers, len(trajectories), width, k)
    replayed = torch.stack(calls[live_calls:]).view(layers, len(trajectories), width, k)
    moved = 0
    for row, ids in enumerate(routings):
        n = int((ids >= 0).all(-1).all(-1).sum())
        recorded = ids[:n].permute(1, 0, 2)  # [L, n, k], layer by layer
        assert torch.equal(replayed[:, row, :n], recorded), f"row {row}: the replayed forward left the recording"
        moved += int((live_after[:, row, :n].sort(-1).values != recorded.sort(-1).values).any(-1).sum())
    assert moved > 0  # without replay the update would have moved some choices: the check can fail


@pytest.mark.parametrize("name", MOE_FAMILIES)
def test_router_still_gets_gradients_through_the_replayed_weights(name):
    model = build_tiny(name, **MORE_MOE)
    trajectories = _sampled_trajectories(model)
    batch = collate(trajectories, 0)
    replay = batch_replay([decode_routing(t.routed_experts) for t in trajectories], batch.input_ids.shape[1])
    with replay_routing(model, replay):
        logp = logprobs_from_logits(forward(model, batch).logits, batch.input_ids)
    (-(logp * batch.loss_mask).sum()).backward()
    for layer, router in enumerate(find_routers(model)):
        assert router.weight.grad is not None and router.weight.grad.abs().sum() > 0, f"layer {layer}: no gradient"


def _learner(model, lr=3e-2, **config):
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model, optimizer = accelerator.prepare(model, optimizer)
    return GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=LearnerConfig(
        memory_estimate=False, volatility_rows=0, minibatches=2, router_aux_loss_coef=0.0, **config))


def _gap(model, trajectories, replay):
    """Mean |logp_trainer - logp_sampler| over the sampled tokens, with or without the sampler's routing."""
    batch = collate(trajectories, 0)
    context = replay_routing(model, batch_replay([decode_routing(t.routed_experts) for t in trajectories],
                                                 batch.input_ids.shape[1])) if replay else torch.no_grad()
    with torch.no_grad(), context:
        logp = logprobs_from_logits(forward(model, batch).logits, batch.input_ids)
    gap = (logp - batch.sampler_logprobs).abs()
    return float(gap[batch.loss_mask].mean())


def test_learner_replays_the_rollout_routing_and_the_sampler_gap_shrinks():
    """R3 in the learner: every training forward routes as the sampler did; after the update the trainer's
    log-probs of the sampled tokens stay closer to the sampler's with the replayed routing than without."""
    model = build_tiny("qwen3_moe", **MORE_MOE)
    trajectories = _sampled_trajectories(model, count=8)
    _perturb_routers(model, scale=0.2)  # the sampler's weights are one update behind (async rollouts)
    stale_live, stale_replayed = _gap(model, trajectories, replay=False), _gap(model, trajectories, replay=True)
    learner = _learner(model, routing_replay="rollout", objective="grpo", lr=1e-5)
    metrics = learner.step(trajectories)
    assert metrics["optimizer_steps"] == 2
    # The learner's recompute replayed the sampler's routing: its gap is the replayed one, not the live one.
    assert metrics["sampler_logprob_gap"] == pytest.approx(stale_replayed, rel=1e-4)
    assert stale_replayed < stale_live
    after_live, after_replayed = _gap(model, trajectories, replay=False), _gap(model, trajectories, replay=True)
    print(f"sampler/trainer gap: before update live {stale_live:.4f} replayed {stale_replayed:.4f}; "
          f"after update live {after_live:.4f} replayed {after_replayed:.4f}")
    assert after_replayed < after_live


def test_old_policy_replay_routes_training_forwards_as_the_recompute():
    model = build_tiny("qwen3_moe", **MORE_MOE)
    trajectories = _sampled_trajectories(model, count=2)
    for t in trajectories:
        t.routed_experts = None  # R2 needs no sampler recording
    learner = _learner(model, routing_replay="old_policy")
    layers = len(find_routers(model))
    calls, handles = _experts_inputs(model)
    learner.step(trajectories)
    for h in handles:
        h.remove()
    # Pass 0 is the recompute (both rows, one micro-batch); then one training forward per minibatch (one row each).
    widths = [len(t.token_ids) for t in sorted(trajectories, key=lambda t: len(t.token_ids))]
    recompute = torch.stack(calls[:layers]).view(layers, 2, max(widths), -1)
    trained = calls[layers:]
    assert len(trained) == 2 * layers
    for m in range(2):
        ids = torch.stack(trained[m * layers:(m + 1) * layers])  # [L, T_row, k]
        row = widths.index(ids.shape[1])
        assert torch.equal(ids, recompute[:, row, : ids.shape[1]])


def test_rollout_replay_without_a_recorded_routing_is_a_clear_error():
    model = build_tiny("qwen3_moe")
    trajectories = _sampled_trajectories(model)
    trajectories[1].routed_experts = None
    with pytest.raises(ValueError, match="no recorded routing.*record_routing=True"):
        _learner(model, routing_replay="rollout").step(trajectories)


def test_replay_on_a_dense_model_is_refused_clearly():
    with pytest.raises(ValueError, match="no supported MoE router"):
        _learner(build_tiny("dense_qwen3"), routing_replay="rollout")
    with pytest.raises(ValueError, match="no supported MoE router"):
        HFPolicy(build_tiny("dense_qwen3"), end_of_turn_id=2, pad_token_id=0, record_routing=True)


def test_routing_record_is_compact_and_round_trips(tmp_path):
    ids = torch.tensor([[[0, 7], [3, 1]], [[-1, -1], [-1, -1]]])  # [T=2, L=2, k=2]
    record = encode_routing(ids)
    assert record["dtype"] == "uint8" and record["shape"] == [2, 2, 2]
    assert torch.equal(decode_routing(record), ids)
    wide = encode_routing(torch.tensor([[[300, 2]]]))
    assert wide["dtype"] == "int16" and torch.equal(decode_routing(wide), torch.tensor([[[300, 2]]]))
    trajectories = _sampled_trajectories(build_tiny("olmoe"), count=2)
    write_jsonl(trajectories, tmp_path / "t.jsonl")
    back = read_jsonl(tmp_path / "t.jsonl")
    assert [decode_routing(t.routed_experts).tolist() for t in back] == \
        [decode_routing(t.routed_experts).tolist() for t in trajectories]
    # merge keeps what an earlier turn recorded and fills rows it had not
    merged = decode_routing(merge_routing(encode_routing(ids), torch.full((3, 2, 2), 5)))
    assert merged[0].tolist() == [[0, 7], [3, 1]] and merged[1:].eq(5).all()
