"""Tests for agentgspo.objective.loss against the hand-checkable facts in shared/GSPO.md (float64 where values are
exact)."""

import math

import pytest
import torch

from agentgspo.objective import OBJECTIVES
from agentgspo.objective.kl import kl_k3
from agentgspo.objective.terms import SEQUENCE, TOKEN, TURN, clip_diagnostics

gspo_loss, gspo_turn_loss, gspo_token_loss, grpo_loss = (
    OBJECTIVES[name] for name in ("gspo", "gspo_turn", "gspo_token", "grpo")
)

DIAGNOSTIC_KEYS = {
    "clip_frac_seq",
    "clip_frac_token",
    "clip_frac_low",
    "clip_frac_high",
    "ratio_mean",
    "ratio_min",
    "ratio_max",
    "num_tokens",
    "num_sequences",
}
LOSSES = [gspo_loss, gspo_token_loss, grpo_loss]


def random_batch(seed=0, batch=5, length=7, scale=1e-3):
    """float64 log-probs whose per-token log-ratios are ~scale, ragged masks with one empty row, advantages [B]."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(batch, length, generator=gen, dtype=torch.float64) * 3  # [B, T]
    logp = old + scale * torch.randn(batch, length, generator=gen, dtype=torch.float64)  # [B, T]
    lengths = torch.tensor([length, 3, 1, 0, 5][:batch])
    mask = torch.arange(length)[None, :] < lengths[:, None]  # [B, T]
    adv = torch.randn(batch, generator=gen, dtype=torch.float64)  # [B]
    return logp.requires_grad_(), old, adv, mask


def loss_and_grad(loss_fn, logp, old, adv, mask, **kw):
    logp = logp.detach().clone().requires_grad_()
    loss, diag = loss_fn(logp, old, adv, mask, **kw)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad, diag


@pytest.mark.parametrize("loss_fn", LOSSES)
@pytest.mark.parametrize("junk", [float("nan"), float("inf"), float("-inf"), 123.0])
def test_masked_positions_change_neither_loss_nor_gradient(loss_fn, junk):
    logp, old, adv, mask = random_batch(scale=0.3)  # scale 0.3: some sequences/tokens clip
    ref_loss, ref_grad, ref_diag = loss_and_grad(loss_fn, logp, old, adv, mask, eps_low=0.1, eps_high=0.1)
    dirty_logp = torch.where(mask, logp.detach(), junk)  # [B, T]
    dirty_old = torch.where(mask, old, junk)  # [B, T]
    dirty_adv = torch.where(mask, adv[:, None], junk) if loss_fn is not gspo_loss else adv  # token-level: [B, T]
    loss, grad, diag = loss_and_grad(loss_fn, dirty_logp, dirty_old, dirty_adv, mask, eps_low=0.1, eps_high=0.1)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    assert torch.equal(loss, ref_loss)
    assert torch.equal(grad, ref_grad)
    assert (grad[~mask] == 0).all()
    for key in DIAGNOSTIC_KEYS:
        torch.testing.assert_close(diag[key], ref_diag[key], rtol=0, atol=0)


def test_kl_k3_value_and_masked_junk():
    logp = torch.log(torch.tensor([[0.5, 0.2, 0.9]], dtype=torch.float64)).requires_grad_()  # [1, 3]
    ref = torch.log(torch.tensor([[0.25, float("nan"), 0.9]], dtype=torch.float64))  # [1, 3], NaN masked out
    mask = torch.tensor([[1, 0, 1]])
    kl = kl_k3(logp, ref, mask)  # [1]
    expected = ((0.5 - math.log(0.5) - 1) + 0.0) / 2  # k3 = exp(d) - d - 1 with d = log(0.25/0.5), and 0
    torch.testing.assert_close(kl, torch.tensor([expected], dtype=torch.float64), rtol=0, atol=1e-15)
    (grad,) = torch.autograd.grad(kl.sum(), logp)
    # d k3 / d logp = -exp(d) + 1 = 0.5 for the first token, 0 for the masked one and for an equal pair
    torch.testing.assert_close(grad, torch.tensor([[0.25, 0.0, 0.0]], dtype=torch.float64), rtol=0, atol=1e-15)


def test_gspo_token_with_equal_advantages_equals_gspo():
    logp, old, adv, mask = random_batch(seed=3, scale=5e-4)  # ratios straddle the 3e-4/4e-4 band
    seq_loss, seq_grad, seq_diag = loss_and_grad(gspo_loss, logp, old, adv, mask)
    tok_adv = adv[:, None].expand_as(logp)  # [B, T]
    tok_loss, tok_grad, tok_diag = loss_and_grad(gspo_token_loss, logp, old, tok_adv, mask)
    assert 0 < seq_diag["clip_frac_seq"] < 1, "the batch should mix clipped and unclipped sequences"
    torch.testing.assert_close(tok_loss, seq_loss, rtol=0, atol=1e-12)
    torch.testing.assert_close(tok_grad, seq_grad, rtol=0, atol=1e-12)
    for key in ("clip_frac_seq", "clip_frac_token", "num_tokens", "num_sequences"):
        torch.testing.assert_close(tok_diag[key], seq_diag[key], rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "mean_log_ratio, advantage, clipped",
    [
        (5e-4, +1.0, True),  # A > 0, s > 1 + eps_high: clipped
        (-5e-4, -1.0, True),  # A < 0, s < 1 - eps_low: clipped
        (-5e-4, +1.0, False),  # A > 0, s below the band: keeps its gradient
        (5e-4, -1.0, False),  # A < 0, s above the band: keeps its gradient
        (3.5e-4, +1.0, False),  # inside [1 - 3e-4, 1 + 4e-4]: exp(3.5e-4) < 1.0004
        (-3.5e-4, -1.0, True),  # the band is asymmetric: exp(-3.5e-4) < 0.9997
    ],
)
def test_gspo_clipping_cases(mean_log_ratio, advantage, clipped):
    old = torch.tensor([[-1.0, -2.0, -0.5]], dtype=torch.float64)  # [1, 3]
    mask = torch.tensor([[1, 1, 0]])  # |y| = 2
    # token log-ratios 2m and 0 (mean m over |y| = 2); the masked third token's 7.0 must not count
    logp = old + torch.tensor([[2 * mean_log_ratio, 0.0, 7.0]], dtype=torch.float64)  # [1, 3]
    adv = torch.tensor([advantage], dtype=torch.float64)
    loss, grad, diag = loss_and_grad(gspo_loss, logp, old, adv, mask)
    s = math.exp(mean_log_ratio)
    assert diag["clip_frac_seq"].item() == float(clipped)
    assert diag["clip_frac_high"].item() == float(clipped and advantage > 0)
    assert diag["clip_frac_low"].item() == float(clipped and advantage < 0)
    torch.testing.assert_close(diag["ratio_mean"], torch.tensor(s, dtype=torch.float64), rtol=0, atol=1e-15)
    if clipped:
        assert (grad == 0).all()
        bound = 1 + 4e-4 if advantage > 0 else 1 - 3e-4
        torch.testing.assert_close(loss, torch.tensor(-bound * advantage, dtype=torch.float64), rtol=0, atol=1e-15)
    else:
        expected = torch.tensor([[-s * advantage / 2, -s * advantage / 2, 0.0]], dtype=torch.float64)  # Eq. 10
        torch.testing.assert_close(grad, expected, rtol=0, atol=1e-15)
        torch.testing.assert_close(loss, torch.tensor(-s * advantage, dtype=torch.float64), rtol=0, atol=1e-15)


def test_token_ratios_never_clip_gspo_but_clip_grpo():
    old = torch.zeros(2, 2, dtype=torch.float64)  # [2, 2]
    logp = torch.log(torch.tensor([[1.5, 1 / 1.5], [1.5, 1 / 1.5]], dtype=torch.float64))  # token ratios 1.5, 1/1.5
    mask = torch.ones(2, 2)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    _, grad, diag = loss_and_grad(gspo_loss, logp, old, adv, mask)
    assert diag["clip_frac_seq"].item() == 0.0 and diag["clip_frac_token"].item() == 0.0
    torch.testing.assert_close(diag["ratio_max"], torch.tensor(1.0, dtype=torch.float64), rtol=0, atol=1e-15)
    expected = torch.tensor([[-0.25, -0.25], [0.25, 0.25]], dtype=torch.float64)  # -(1/2) * A * s / |y|
    torch.testing.assert_close(grad, expected, rtol=0, atol=1e-15)
    _, _, grpo_diag = loss_and_grad(grpo_loss, logp, old, adv, mask)
    assert grpo_diag["clip_frac_token"].item() == 0.5  # 1.5 > 1.27 with A > 0, 1/1.5 < 0.8 with A < 0


def test_per_trajectory_weighting_lengths_1_and_3():
    logp = torch.full((2, 3), -1.0, dtype=torch.float64)  # [2, 3]
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    for loss_fn in LOSSES:
        loss, grad, _ = loss_and_grad(loss_fn, logp, logp.detach(), adv, mask)
        expected = torch.tensor([[-0.5, 0.0, 0.0], [1 / 6, 1 / 6, 1 / 6]], dtype=torch.float64)  # not -0.25 / +0.25
        torch.testing.assert_close(grad, expected, rtol=0, atol=1e-15, msg=loss_fn.name)
        assert loss.item() == 0.0  # -(1/2)(1 * 1 + 1 * (-1))


def test_single_token_sequences_gspo_ratio_is_token_ratio():
    gen = torch.Generator().manual_seed(1)
    old = -torch.rand(6, 1, generator=gen, dtype=torch.float64)  # [6, 1]
    logp = old + 0.3 * torch.randn(6, 1, generator=gen, dtype=torch.float64)  # [6, 1]
    adv = torch.randn(6, generator=gen, dtype=torch.float64)
    mask = torch.ones(6, 1)
    gspo_value, gspo_grad, gspo_diag = loss_and_grad(gspo_loss, logp, old, adv, mask, eps_low=0.2, eps_high=0.27)
    grpo_value, grpo_grad, grpo_diag = loss_and_grad(grpo_loss, logp, old, adv, mask, eps_low=0.2, eps_high=0.27)
    token_ratio = torch.exp(logp - old).squeeze(-1)  # [6]
    assert 0 < gspo_diag["clip_frac_seq"] < 1
    for stat, reduce in (("ratio_mean", torch.mean), ("ratio_min", torch.min), ("ratio_max", torch.max)):
        torch.testing.assert_close(gspo_diag[stat], reduce(token_ratio).detach(), rtol=0, atol=1e-15)
    torch.testing.assert_close(gspo_value, grpo_value, rtol=0, atol=1e-15)
    torch.testing.assert_close(gspo_grad, grpo_grad, rtol=0, atol=1e-15)
    torch.testing.assert_close(gspo_diag["clip_frac_seq"], grpo_diag["clip_frac_token"], rtol=0, atol=0)


@pytest.mark.parametrize("sign", [+1, -1])
def test_bf16_log_probs_still_get_fp32_ratio_math(sign):
    # exp(+-5e-4) is exactly 1.0 in bf16, so a ratio computed in bf16 would never clip.
    assert torch.tensor(math.exp(sign * 5e-4), dtype=torch.bfloat16).item() == 1.0
    old = torch.zeros(1, 1, dtype=torch.bfloat16)  # [1, 1]
    logp = torch.tensor([[sign * 5e-4]], dtype=torch.bfloat16).requires_grad_()  # [1, 1], bf16 holds 4.997e-4
    loss, diag = gspo_loss(logp, old, torch.tensor([float(sign)]), torch.ones(1, 1))
    assert loss.dtype == torch.float32 and diag["ratio_mean"].dtype == torch.float32
    assert diag["clip_frac_seq"].item() == 1.0
    assert diag["clip_frac_high" if sign > 0 else "clip_frac_low"].item() == 1.0
    loss.backward()
    assert logp.grad.dtype == torch.bfloat16 and logp.grad.item() == 0.0


def test_float64_stays_float64():
    logp, old, adv, mask = random_batch()
    for loss_fn in LOSSES:
        loss, diag = loss_fn(logp, old, adv, mask)
        assert loss.dtype == torch.float64 and diag["ratio_mean"].dtype == torch.float64


@pytest.mark.parametrize("loss_fn", LOSSES)
def test_micro_batch_accumulation_equals_full_batch(loss_fn):
    logp, old, adv, mask = random_batch(seed=5, scale=5e-4)
    kw = dict(eps_low=3e-4, eps_high=4e-4)
    full_loss, full_grad, full_diag = loss_and_grad(loss_fn, logp, old, adv, mask, **kw)
    total = int(mask.any(dim=-1).sum())  # non-empty trajectories in the minibatch
    assert full_diag["num_sequences"].item() == total == 4
    leaf = logp.detach().clone().requires_grad_()
    accumulated = 0.0
    for rows in (slice(0, 2), slice(2, 4), slice(4, 5)):
        micro_loss, _ = loss_fn(leaf[rows], old[rows], adv[rows], mask[rows], num_sequences=total, **kw)
        micro_loss.backward()
        accumulated = accumulated + micro_loss.detach()
    torch.testing.assert_close(accumulated, full_loss, rtol=0, atol=1e-15)
    torch.testing.assert_close(leaf.grad, full_grad, rtol=0, atol=1e-15)
    # Without the normalizer each micro-batch averages over its own sequences: a different (wrong) gradient.
    naive = sum(loss_fn(logp[r], old[r], adv[r], mask[r], **kw)[0] for r in (slice(0, 2), slice(2, 4), slice(4, 5)))
    assert not torch.allclose(naive / 3, full_loss)


@pytest.mark.parametrize("loss_fn", LOSSES)
def test_sequences_without_trained_tokens_contribute_nothing(loss_fn):
    logp, old, adv, mask = random_batch(seed=2)
    keep = mask.any(dim=-1)  # row 3 is empty
    loss, grad, diag = loss_and_grad(loss_fn, logp, old, adv, mask)
    kept_loss, kept_grad, _ = loss_and_grad(loss_fn, logp[keep], old[keep], adv[keep], mask[keep])
    torch.testing.assert_close(loss, kept_loss, rtol=0, atol=1e-15)
    torch.testing.assert_close(grad[keep], kept_grad, rtol=0, atol=1e-15)
    assert (grad[~keep] == 0).all()
    assert diag["num_tokens"].item() == mask.sum().item() and diag["num_sequences"].item() == 4
    empty_loss, empty_grad, empty_diag = loss_and_grad(loss_fn, logp, old, adv, torch.zeros_like(mask))
    assert empty_loss.item() == 0.0 and (empty_grad == 0).all()
    assert empty_diag["clip_frac_seq"].item() == 0.0 and math.isnan(empty_diag["ratio_mean"].item())


@pytest.mark.parametrize(
    "ratio, advantage, clipped",
    [(1.3, +1.0, True), (1.25, +1.0, False), (0.75, -1.0, True), (0.85, -1.0, False), (0.5, +1.0, False)],
)
def test_grpo_clipping_cases(ratio, advantage, clipped):
    old = torch.tensor([[-1.0, -2.0]], dtype=torch.float64)  # [1, 2]
    logp = old + torch.tensor([[math.log(ratio), 0.0]], dtype=torch.float64)  # second token: ratio 1, unclipped
    adv = torch.tensor([advantage], dtype=torch.float64)
    loss, grad, diag = loss_and_grad(grpo_loss, logp, old, adv, torch.ones(1, 2))  # eps 0.2 / 0.27
    assert diag["clip_frac_token"].item() == (0.5 if clipped else 0.0)
    assert diag["clip_frac_seq"].item() == float(clipped)
    assert diag["clip_frac_high"].item() + diag["clip_frac_low"].item() == diag["clip_frac_token"].item()
    first = 0.0 if clipped else -ratio * advantage / 2  # d(-J)/d logp = -(1/1)(1/2) w A
    expected = torch.tensor([[first, -advantage / 2]], dtype=torch.float64)
    torch.testing.assert_close(grad, expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("loss_fn", LOSSES)
def test_overflowed_clipped_ratio_gives_zero_not_nan_gradient(loss_fn):
    old = torch.tensor([[-100.0, -100.0]])  # [1, 2], fp32: exp(200) overflows to inf
    logp = torch.tensor([[100.0, 100.0]])
    _, grad, diag = loss_and_grad(loss_fn, logp, old, torch.tensor([1.0]), torch.ones(1, 2))
    assert diag["clip_frac_token"].item() == 1.0
    assert torch.equal(grad, torch.zeros(1, 2))


def test_diagnostics_are_detached_and_named():
    logp, old, adv, mask = random_batch()
    for loss_fn in LOSSES:
        _, diag = loss_fn(logp, old, adv, mask)
        assert set(diag) == DIAGNOSTIC_KEYS
        assert all(not value.requires_grad and value.dim() == 0 for value in diag.values())


def test_shape_errors_say_what_was_expected():
    logp, old, adv, mask = random_batch()
    with pytest.raises(ValueError, match="one advantage per sequence"):
        gspo_loss(logp, old, adv[:, None].expand_as(logp), mask)
    with pytest.raises(ValueError, match=r"same shape \[B, T\]"):
        grpo_loss(logp, old[:, :-1], adv, mask)
    with pytest.raises(ValueError, match="num_sequences must be > 0"):
        gspo_loss(logp, old, adv, mask, num_sequences=0)


@pytest.mark.parametrize(
    "loss_fn, unit",
    [(gspo_loss, SEQUENCE), (gspo_turn_loss, TURN), (gspo_token_loss, TOKEN), (grpo_loss, TOKEN)],
    ids=["gspo", "gspo_turn", "gspo_token", "grpo"],
)
def test_each_loss_declares_the_unit_its_clip_split_and_ratios_are_over(loss_fn, unit):
    """An objective's declared diagnostics say what a trainer weighs clip_frac_low/high and ratio_mean by: the count
    of the unit it really clips. low + high is the declared unit's clipped share, and the batch tells the units apart
    (its sequence, turn and token shares differ), so a wrong declaration fails here."""
    logp, old, adv, mask = random_batch(seed=3, scale=0.05)  # large log-ratios: many units clip
    turn_ids = torch.where(mask, (torch.arange(mask.shape[1])[None] >= 2).long(), -1)  # [B, T], two turns per row
    turns = (turn_ids,) if loss_fn is gspo_turn_loss else ()
    band = {"eps_low": 0.02, "eps_high": 0.02} if loss_fn is grpo_loss else {}
    _, diag = loss_fn(logp, old, adv, mask, *turns, **band)
    declared = dict(loss_fn.diagnostics)
    assert loss_fn.unit is unit and declared[unit.fraction] == unit.count
    assert declared["clip_frac_low"] == declared["clip_frac_high"] == declared["ratio_mean"] == unit.count
    split = (diag["clip_frac_low"] + diag["clip_frac_high"]).item()
    assert split == pytest.approx(diag[unit.fraction].item(), abs=1e-12)
    others = [u for u in (SEQUENCE, TURN, TOKEN) if u.fraction in declared and u is not unit]
    assert all(diag[u.fraction].item() != pytest.approx(split) for u in others), "the batch must tell units apart"
    for name, how in loss_fn.diagnostics:  # every declared diagnostic is returned, with the count weighing it
        assert name in diag and (how in ("min", "max") or how in diag)
    assert diag["num_sequences"].item() == 4 and diag["num_tokens"].item() == 16


def test_a_clip_unit_must_be_among_the_reported_fractions():
    with pytest.raises(ValueError, match="clip unit 'turn' must be among the reported"):
        clip_diagnostics(TURN, (SEQUENCE, TOKEN))
    assert clip_diagnostics(TOKEN, ()) == ()  # an objective that does not clip reports no clip diagnostics
