"""Tests for agentgspo.objective.logprobs: fp32 log-probs from any-dtype logits, chunking, memory and the bf16 clip
case."""

import math

import pytest
import torch

from agentgspo.objective.logprobs import fused_token_logprobs, token_entropy, token_logprobs
from agentgspo.objective import OBJECTIVES


def random_logits(dtype=torch.float32, shape=(2, 5, 11), seed=0):
    gen = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(*shape, generator=gen)).to(dtype)  # [B, T, V]
    targets = torch.randint(0, shape[-1], shape[:2], generator=gen)  # [B, T]
    return logits, targets


def reference_logprobs(logits, targets, temperature=1.0):
    """float64 log-softmax of the logits' exact values."""
    log_probs = torch.log_softmax(logits.double() / temperature, dim=-1)  # [B, T, V]
    return log_probs.gather(-1, targets[..., None]).squeeze(-1)  # [B, T]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_matches_float64_reference(temperature):
    logits, targets = random_logits()
    out = token_logprobs(logits, targets, temperature=temperature)
    assert out.dtype == torch.float32 and out.shape == targets.shape
    torch.testing.assert_close(out.double(), reference_logprobs(logits, targets, temperature), rtol=0, atol=2e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_fused_form_computes_the_same_function_in_fp32(temperature):
    """``fused_token_logprobs`` (the region ``LearnerConfig(compile=True)`` compiles) equals ``token_logprobs``."""
    logits, targets = random_logits(torch.bfloat16, shape=(2, 6, 1000))
    logits.requires_grad_()
    fused = fused_token_logprobs(logits, targets, temperature=temperature)
    assert fused.dtype == torch.float32
    torch.testing.assert_close(
        fused.double(), reference_logprobs(logits.detach(), targets, temperature), rtol=0, atol=1e-5
    )
    (fused_grad,) = torch.autograd.grad(fused.sum(), logits)
    (chunked_grad,) = torch.autograd.grad(token_logprobs(logits, targets, temperature=temperature).sum(), logits)
    torch.testing.assert_close(fused_grad, chunked_grad, rtol=0, atol=1e-2)  # bf16 gradients: 1e-2 is ~1 ulp at 1


def test_bf16_logits_give_fp32_logprobs_from_an_fp32_log_softmax():
    logits, targets = random_logits(torch.bfloat16, shape=(2, 6, 1000))
    out = token_logprobs(logits, targets)
    assert out.dtype == torch.float32
    reference = reference_logprobs(logits, targets)  # [B, T] float64
    torch.testing.assert_close(out.double(), reference, rtol=0, atol=1e-5)
    bf16_path = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)  # what not to do
    assert (bf16_path.double() - reference).abs().max() > 1e-3  # so the check above can tell the two apart
    logits.requires_grad_()
    token_logprobs(logits, targets).sum().backward()
    assert logits.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("sign", [+1, -1])
def test_bf16_model_ratio_of_exp_5e_4_is_clipped(sign):
    """Two bf16 'policies' whose fp32 log-prob gap is ~5e-4: GSPO must see s = exp(+-5e-4) and clip it.

    Vocab of 2, logits [x, 0]: logp(token 0) = -softplus(-x) changes by ~x/2 near x = 0. In bf16 log-prob space
    log(0.5) +- 5e-4 rounds back to log(0.5), so the ratio would be exactly 1 and nothing would clip.
    """
    step = torch.tensor(sign * 1e-3, dtype=torch.bfloat16)  # bf16 holds +-9.995e-4
    old_logits = torch.zeros(1, 1, 2, dtype=torch.bfloat16)  # [1, 1, 2]
    new_logits = torch.stack([step, torch.tensor(0.0, dtype=torch.bfloat16)]).view(1, 1, 2)  # [1, 1, 2]
    targets = torch.zeros(1, 1, dtype=torch.long)
    logp = token_logprobs(new_logits, targets)  # [1, 1] fp32
    old_logp = token_logprobs(old_logits, targets)  # [1, 1] fp32
    assert math.isclose((logp - old_logp).item(), sign * 5e-4, rel_tol=2e-3)
    bf16_gap = torch.log_softmax(new_logits, -1)[..., 0] - torch.log_softmax(old_logits, -1)[..., 0]
    assert bf16_gap.item() == 0.0  # the failure mode this guards against
    _, diag = OBJECTIVES["gspo"](logp, old_logp, torch.tensor([float(sign)]), torch.ones(1, 1))
    assert diag["clip_frac_high" if sign > 0 else "clip_frac_low"].item() == 1.0


def test_chunked_equals_unchunked_in_value_and_gradient():
    logits, targets = random_logits(shape=(3, 7, 13))
    results = []
    for chunk_size in (1, 4, 1000):
        leaf = logits.clone().requires_grad_()
        out = token_logprobs(leaf, targets, temperature=0.9, chunk_size=chunk_size)
        (out * torch.arange(out.numel()).view_as(out)).sum().backward()
        results.append((out.detach(), leaf.grad))
    for out, grad in results[1:]:
        torch.testing.assert_close(out, results[0][0], rtol=0, atol=1e-6)
        torch.testing.assert_close(grad, results[0][1], rtol=0, atol=1e-6)


def test_gradient_is_exact_gradcheck():
    logits, targets = random_logits(torch.float64, shape=(2, 3, 5))
    logits.requires_grad_()
    assert torch.autograd.gradcheck(lambda x: token_logprobs(x, targets, temperature=0.7, chunk_size=4), (logits,))


def test_no_fp32_copy_of_the_logits_is_kept_for_backward():
    logits, targets = random_logits(torch.bfloat16, shape=(2, 8, 64))
    logits.requires_grad_()
    saved = []

    def pack(tensor):
        saved.append((tensor.dtype, tensor.numel()))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = token_logprobs(logits, targets, chunk_size=4)
    assert (torch.float32, logits.numel()) not in saved
    assert sum(numel for dtype, numel in saved if dtype == torch.float32) <= out.numel()  # only the [B*T] logsumexp
    # the naive path (fp32 log_softmax under autograd) does keep one, which is what this test detects
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        torch.log_softmax(logits.float(), dim=-1)
    assert (torch.float32, logits.numel()) in saved


def test_out_of_range_targets_fail_loudly():
    logits, targets = random_logits()
    targets[0, 0] = -100
    with pytest.raises(ValueError, match=r"replace ignore-index labels"):
        token_logprobs(logits, targets)
    with pytest.raises(ValueError, match=r"expected logits \[B, T, V\]"):
        token_logprobs(logits[0], targets[0])


def test_entropy_values_masking_and_chunking():
    uniform = torch.zeros(2, 3, 8, dtype=torch.bfloat16)  # [B, T, V]
    torch.testing.assert_close(token_entropy(uniform), torch.tensor(math.log(8)), rtol=0, atol=1e-6)
    logits, _ = random_logits(shape=(2, 5, 11))
    logits[0, 0] = float("nan")  # masked out below: must not leak
    logits[1, 1, :5] = float("-inf")  # banned tokens: p = 0 contributes 0, not NaN
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[0, 0] = False
    probs = torch.softmax(logits.double() / 0.8, dim=-1)  # [B, T, V]
    per_token = torch.special.entr(probs).sum(dim=-1)  # [B, T]
    expected = per_token[mask].mean().float()
    for chunk_size in (1, 3, 1000):
        result = token_entropy(logits, temperature=0.8, loss_mask=mask, chunk_size=chunk_size)
        assert result.dtype == torch.float32 and not result.requires_grad
        torch.testing.assert_close(result, expected, rtol=0, atol=1e-6)
