"""Precision for real sizes: fp32 master weights keep the updates pure-bf16 AdamW rounds away, the learner never
builds an fp32 ``[B, T, V]`` tensor under bf16 settings, and activation checkpointing is a setting that changes
memory, not the update."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from agentgspo.objective.batching import collate, forward, logprobs_from_logits
from agentgspo.learning.learner import GSPOLearner, LearnerConfig
from agentgspo.objective.logprobs import DEFAULT_CHUNK_SIZE
from agentgspo.learning.memory import measure_saved_activation_bytes
from agentgspo.core.trajectory import Trajectory


class Float32VocabRows(TorchDispatchMode):
    """Records the largest fp32 tensor whose last dimension is the vocabulary, in rows (numel / V), that any op
    produces (forward and backward alike): an fp32 ``[B, T, V]`` copy of the logits shows up as B x T rows."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab, self.rows = vocab, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if (
                isinstance(tensor, torch.Tensor)
                and tensor.dtype == torch.float32
                and tensor.dim() >= 2
                and tensor.shape[-1] == self.vocab
            ):
                self.rows = max(self.rows, tensor.numel() // self.vocab)
        return out


def long_trajectories(count: int = 12, seed: int = 0) -> list[Trajectory]:
    """``count`` trajectories of 100-120 tokens (mixed rewards, groups of 4): one micro-batch holds > 512 tokens,
    more than a log-prob chunk, so a full ``[B, T, V]`` tensor is told apart from the chunked scratch."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        t = Trajectory(group_id=i // 4, sample_id=i % 4)
        t.append_forced([rng.randrange(3, 100) for _ in range(60)])
        sampled = [rng.randrange(3, 100) for _ in range(rng.randrange(40, 60))]
        t.append_sampled(sampled, [-4.0] * len(sampled))
        t.reward = float(i % 2)
        out.append(t)
    return out


def _policy():
    from transformers import AutoModelForCausalLM

    from agentgspo.models.tiny import tiny_policy_path

    return AutoModelForCausalLM.from_pretrained(tiny_policy_path())


def _learner(model, *, mixed_precision: str = "no", lr: float = 1e-3, optimizer=None, **config):
    AcceleratorState._reset_state(True)  # each test picks its own mixed precision
    accelerator = Accelerator(cpu=True, mixed_precision=mixed_precision)
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=lr)
    model, optimizer = accelerator.prepare(model, optimizer)
    config = {"memory_estimate": False, "volatility_rows": 0, **config}
    return GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=LearnerConfig(**config)), model


@pytest.fixture(autouse=True)
def _fresh_accelerator_state():
    yield
    AcceleratorState._reset_state(True)


def test_pure_bf16_adamw_rounds_away_a_1e6_update_that_fp32_master_weights_keep():
    """AdamW's first step moves every weight by lr (m / sqrt(v) = sign(g)). At lr 1e-6 a bf16 weight of 1.0 (spacing
    2^-7 above 1, 2^-8 below) does not move at all; the fp32 copy moves by 1e-6."""
    master = torch.ones(1000)
    pure = torch.ones(1000, dtype=torch.bfloat16)
    for weight in (master, pure):
        weight.requires_grad_(True)
        weight.grad = torch.linspace(-1, 1, 1000).to(weight.dtype)
        torch.optim.AdamW([weight], lr=1e-6, weight_decay=0.0).step()
    assert torch.equal(pure.detach(), torch.ones(1000, dtype=torch.bfloat16))  # every update lost
    moved = (master.detach() - 1).abs()
    assert moved.min() > 0.9e-6 and moved.max() < 1.1e-6  # every update kept


def test_learner_keeps_1e6_updates_with_fp32_masters_and_refuses_bf16_parameters():
    """The learner under bf16 mixed precision (fp32 weights, bf16 autocast) moves the RMSNorm weights (all 1.0) by
    lr = 1e-6; the same step on bf16 weights leaves them exactly at 1.0, so the learner refuses bf16 parameters
    unless told otherwise (naming the fix)."""
    trajectories = long_trajectories()
    model = _policy()
    norms = [name for name, p in model.named_parameters() if "norm" in name]
    before = {name: p.detach().clone() for name, p in model.named_parameters() if name in norms}
    learner, _ = _learner(model, mixed_precision="bf16", lr=1e-6, minibatches=1, max_grad_norm=None)
    learner.step(trajectories)
    after = dict(model.named_parameters())
    assert all(after[name].dtype == torch.float32 for name in norms)
    changes = torch.cat([(after[name].detach() - before[name]).abs().flatten() for name in norms])
    assert (changes > 0.5e-6).float().mean() > 0.9 and changes.max() < 1.1e-6

    pure = _policy().to(torch.bfloat16)
    with pytest.raises(ValueError, match="bfloat16.*mixed_precision='bf16'"):
        _learner(pure, lr=1e-6)
    pure = _policy().to(torch.bfloat16)
    learner, _ = _learner(pure, lr=1e-6, minibatches=1, max_grad_norm=None, allow_low_precision_params=True)
    learner.step(trajectories)
    for name, p in pure.named_parameters():
        if name in norms:
            assert torch.equal(p.detach(), torch.ones_like(p)), name  # the 1e-6 update was rounded away


@pytest.mark.parametrize("setting", ["accelerate_bf16_autocast", "bf16_weights"])
def test_learner_never_materialises_an_fp32_logits_tensor(setting):
    """Forward, GSPO loss, backward and metrics of a micro-batch of > 512 tokens: no op makes an fp32 tensor with
    more than one log-prob chunk of vocabulary rows. accelerate's mixed precision wraps the forward in
    convert_outputs_to_fp32, which alone would copy the logits to fp32 ([B, T, V]); the learner removes that cast.
    (FSDP2's bf16 MixedPrecisionPolicy is checked on 2 ranks in tests/learning/test_fsdp.py.)"""
    trajectories = long_trajectories()
    model = _policy()
    if setting == "bf16_weights":
        model = model.to(torch.bfloat16)
        learner, _ = _learner(model, minibatches=1, micro_batch_tokens=4096, allow_low_precision_params=True)
    else:
        learner, _ = _learner(model, mixed_precision="bf16", minibatches=1, micro_batch_tokens=4096)
    batch_rows = sum(len(t.token_ids) - 1 for t in trajectories)
    assert batch_rows > 2 * DEFAULT_CHUNK_SIZE  # a [B, T, V] tensor is told apart from one chunk
    vocab = model.config.vocab_size
    with Float32VocabRows(vocab) as recorder:
        metrics = learner.step(trajectories)
    assert metrics["optimizer_steps"] == 1 and metrics["trained_tokens"] > 0
    assert recorder.rows <= DEFAULT_CHUNK_SIZE, recorder.rows

    # The recorder does see an fp32 [B, T, V] tensor when one is made: accelerate's own wrapped forward makes it.
    AcceleratorState._reset_state(True)
    accelerator = Accelerator(cpu=True, mixed_precision="bf16")
    wrapped = accelerator.prepare(_policy())
    batch = collate(trajectories, 0)
    with Float32VocabRows(vocab) as recorder:
        logits = forward(wrapped, batch).logits
    assert logits.dtype == torch.float32 and recorder.rows == batch.input_ids.numel()


def test_activation_checkpointing_saves_memory_and_makes_the_same_update():
    """``activation_checkpointing=True`` keeps only each layer's input for the backward (less than half of what the
    plain forward saves here) and recomputes the rest: the SGD update is the same to fp32 round-off."""
    trajectories = long_trajectories()
    results = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = _policy()
        initial = copy.deepcopy(model)
        learner, prepared = _learner(
            model,
            optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
            minibatches=1,
            micro_batch_tokens=4096,
            activation_checkpointing=checkpointing,
        )
        batch = collate(trajectories, 0)
        saved = measure_saved_activation_bytes(
            model, lambda: logprobs_from_logits(forward(prepared, batch).logits, batch.input_ids).sum()
        )
        learner.step(trajectories)
        moved = [(p0 - p).detach() for p0, p in zip(initial.parameters(), model.parameters())]
        results.append((saved, moved))
    (plain_bytes, plain), (checkpointed_bytes, checkpointed) = results
    assert checkpointed_bytes < 0.5 * plain_bytes, (checkpointed_bytes, plain_bytes)
    scale = max(m.abs().max().item() for m in plain)
    assert scale > 0
    for a, b in zip(plain, checkpointed):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5 * scale)
