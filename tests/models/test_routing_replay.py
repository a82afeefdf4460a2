"""Routing replay on real tiny HF MoE models: the sampler records, the learner's forward routes exactly as recorded."""

from __future__ import annotations

import contextlib
import random

import pytest
import torch
from accelerate import Accelerator

from agentgspo.objective.batching import collate, forward, logprobs_from_logits
from agentgspo.learning.learner import GSPOLearner, LearnerConfig
from agentgspo.core.sampling import SamplingParams
from agentgspo.policy.hf import HFPolicy
from agentgspo.models.routing_replay import (
    batch_replay,
    decode_routing,
    encode_routing,
    find_routers,
    merge_routing,
    record_routing,
    replay_routing,
)
from agentgspo.core.trajectory import Trajectory, read_jsonl, write_jsonl

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
    turns = policy.generate(
        prompts, SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=10), seeds=list(range(count))
    )
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


def _peak_routers(model, scale=60.0):
    """Scale every router up so its softmax is far from uniform (random init gives nearly uniform routers, where
    a flattened softmax and the right one look alike)."""
    with torch.no_grad():
        for router in find_routers(model):
            router.weight.mul_(scale)


def _routed_forward(model, input_ids, replay=None):
    """One forward with ``output_router_logits``: ``(outputs, [(ids, weights)] the experts modules received)``,
    under ``replay_routing(replay)`` when given."""
    received = []
    modules = [m for m in model.modules() if type(m).__name__.endswith("Experts")]
    handles = [
        m.register_forward_pre_hook(lambda mod, args: received.append((args[1].clone(), args[2].clone())))
        for m in modules
    ]
    context = replay_routing(model, replay) if replay is not None else contextlib.nullcontext()
    with torch.no_grad(), context:
        outputs = model(input_ids=input_ids, output_router_logits=True, use_cache=False)
    for h in handles:
        h.remove()
    return outputs, received


def _replay_of_the_live_routing(model, input_ids):
    """The live routing of a forward, recorded by ``record_routing``, as ``replay_routing``'s ``[L, N, k]``."""
    with torch.no_grad(), record_routing(model) as calls:
        model(input_ids=input_ids, use_cache=False)
    return torch.stack([layer[-1] for layer in calls]).long()


def _assert_replay_reproduces_the_live_forward(model, input_ids):
    live, live_received = _routed_forward(model, input_ids)
    top_weight = torch.stack([weights.float().max(-1).values.mean() for _, weights in live_received]).min()
    assert top_weight > 0.7, "routers not peaked: a flattened softmax would give about the same weights"
    replayed, replayed_received = _routed_forward(model, input_ids, _replay_of_the_live_routing(model, input_ids))
    assert len(replayed_received) == len(live_received) == len(find_routers(model))
    for layer, ((live_ids, live_weights), (ids, weights)) in enumerate(zip(live_received, replayed_received)):
        assert torch.equal(ids, live_ids), f"layer {layer}: replay changed the experts"
        assert weights.dtype == live_weights.dtype, f"layer {layer}: {weights.dtype} weights, live {live_weights.dtype}"
        difference = (weights.float() - live_weights.float()).abs().max().item()
        assert difference <= 1e-6, f"layer {layer}: replayed weights differ from the live ones by {difference:.3g}"
    for live_first, first in zip(live.router_logits, replayed.router_logits):
        assert torch.equal(first, live_first)  # output_router_logits sees what it sees without replay
    torch.testing.assert_close(replayed.logits, live.logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(replayed.aux_loss, live.aux_loss, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", MOE_FAMILIES)
def test_replaying_the_live_routing_reproduces_the_forward_exactly(name, dtype):
    """Replaying a forward's own routing changes nothing: same experts, same weights in the same dtype (Mixtral's
    are fp32 even in a bf16 model; the old replay cast them to the logits' bf16), same logits, same aux loss."""
    model = build_tiny(name, dtype=dtype, **MORE_MOE)
    _peak_routers(model)
    input_ids = torch.randint(3, 128, (2, 12), generator=torch.Generator().manual_seed(0))
    _assert_replay_reproduces_the_live_forward(model, input_ids)


def _returning_probabilities(router):
    """Make ``router`` return ``softmax(logits)`` as its first output, as Mixtral's and Qwen2-MoE's TopKRouters did
    in transformers 5.0 to 5.5 (``router_logits = softmax(router_logits.float())`` before the top-k; transformers
    issue 45120, fixed by PR 45131); the weights and ids it returns are unchanged."""
    forward_with_logits = router.forward

    def forward(hidden_states):
        logits, weights, ids = forward_with_logits(hidden_states)
        return torch.softmax(logits.float(), dim=-1), weights, ids

    router.forward = forward


@pytest.mark.parametrize(
    "name,overrides",
    [("mixtral", {}), ("qwen2_moe_shared_expert", {}), ("qwen2_moe_shared_expert", {"norm_topk_prob": True})],
    ids=["mixtral", "qwen2_moe", "qwen2_moe_norm_topk"],
)
def test_replay_weights_are_right_when_the_router_returns_probabilities(name, overrides):
    """Issue 19: the replayed weights were ``softmax(first output)``; where a router's first output is already a
    probability (transformers 5.0-5.5), that softmax is nearly uniform. Replay must still reproduce the live
    forward's weights, logits and aux loss."""
    model = build_tiny(name, **MORE_MOE, **overrides)
    _peak_routers(model)
    input_ids = torch.randint(3, 128, (2, 12), generator=torch.Generator().manual_seed(0))
    for router in find_routers(model):
        _returning_probabilities(router)
    live, _ = _routed_forward(model, input_ids)
    assert torch.allclose(torch.stack(live.router_logits).sum(-1), torch.ones(()))  # the old behaviour is on
    _assert_replay_reproduces_the_live_forward(model, input_ids)


def _learner(model, lr=3e-2, **config):
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model, optimizer = accelerator.prepare(model, optimizer)
    return GSPOLearner(
        model,
        optimizer,
        accelerator,
        pad_token_id=0,
        config=LearnerConfig(
            memory_estimate=False, volatility_rows=0, minibatches=2, router_aux_loss_coef=0.0, **config
        ),
    )


def _gap(model, trajectories, replay):
    """Mean |logp_trainer - logp_sampler| over the sampled tokens, with or without the sampler's routing."""
    batch = collate(trajectories, 0)
    context = (
        replay_routing(
            model, batch_replay([decode_routing(t.routed_experts) for t in trajectories], batch.input_ids.shape[1])
        )
        if replay
        else torch.no_grad()
    )
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
    print(
        f"sampler/trainer gap: before update live {stale_live:.4f} replayed {stale_replayed:.4f}; "
        f"after update live {after_live:.4f} replayed {after_replayed:.4f}"
    )
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
    # The recompute's forwards come first (however the learner groups rows into them), then one training forward per
    # minibatch (one row each): each training forward routes as the recompute routed that row, a row being a
    # contiguous run of positions of a recompute forward (right padding comes after it).
    assert len(calls) % layers == 0 and len(calls) > 2 * layers
    forwards = [torch.stack(calls[f * layers : (f + 1) * layers]) for f in range(len(calls) // layers)]  # [L, N, k]
    recompute, trained = forwards[:-2], forwards[-2:]
    for ids in trained:  # [L, T_row, k]
        rows = ids.shape[1]
        assert any(
            torch.equal(ids, scored[:, start : start + rows])
            for scored in recompute
            for start in range(scored.shape[1] - rows + 1)
        ), "a training forward left the recompute's routing"


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
    with pytest.raises(ValueError, match="expert ids are >= 0, or -1 for not recorded; got -2"):
        encode_routing(torch.tensor([[[-2, 0]]]))  # once stored as 254, a real expert id
    trajectories = _sampled_trajectories(build_tiny("olmoe"), count=2)
    write_jsonl(trajectories, tmp_path / "t.jsonl")
    back = read_jsonl(tmp_path / "t.jsonl")
    assert [decode_routing(t.routed_experts).tolist() for t in back] == [
        decode_routing(t.routed_experts).tolist() for t in trajectories
    ]
    # merge keeps what an earlier turn recorded and fills rows it had not
    merged = decode_routing(merge_routing(encode_routing(ids), torch.full((3, 2, 2), 5)))
    assert merged[0].tolist() == [[0, 7], [3, 1]] and merged[1:].eq(5).all()
