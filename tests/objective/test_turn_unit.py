"""The `turn` unit of GSPO (`gspo_turn_loss`): each assistant turn its own ratio and clip, checked by hand."""

import math

import pytest
import torch

from agentgspo.objective import OBJECTIVES

gspo_loss, gspo_turn_loss = OBJECTIVES["gspo"], OBJECTIVES["gspo_turn"]

NAN = float("nan")


def two_turn_batch():
    """Two trajectories of 6 positions: prompt, turn 0 (2 tokens), tool output, turn 1 (1 token), padding.

    Trajectory 0 (A = +1): turn 0's log-ratios 0.001 and 0.003 (s = e^0.002, above 1 + 4e-4: clipped), turn 1's
    -0.0001 (s = e^-0.0001: unclipped). Trajectory 1 (A = -1): turn 0's -0.002 and -0.002 (s = e^-0.002, below
    1 - 3e-4: clipped), turn 1's +0.0002 (unclipped). Masked positions hold NaN/inf, which must not matter.
    """
    old = torch.zeros(2, 6, dtype=torch.float64)
    delta = torch.tensor(
        [[NAN, 0.001, 0.003, math.inf, -0.0001, NAN], [-math.inf, -0.002, -0.002, NAN, 0.0002, 0.0]],
        dtype=torch.float64,
    )
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 1, 1, 0, 1, 0]])
    turns = torch.tensor([[-1, 0, 0, -1, 1, -1], [-1, 0, 0, -1, 1, -1]])
    return (old + delta).requires_grad_(), old, torch.tensor([1.0, -1.0], dtype=torch.float64), mask, turns


def test_turn_ratios_clipping_and_gradient_match_the_hand_derivation():
    logp, old, adv, mask, turns = two_turn_batch()
    loss, diag = gspo_turn_loss(logp, old, adv, mask, turns)
    # J = (1/N) sum_i (1/K_i) sum_k term_ik, N = 2, K_i = 2
    s01, s11 = math.exp(-0.0001), math.exp(0.0002)
    terms = [(1 + 4e-4) * 1.0, s01 * 1.0, (1 - 3e-4) * -1.0, s11 * -1.0]  # clipped, live, clipped, live
    expected = -(0.5 * (terms[0] + terms[1]) + 0.5 * (terms[2] + terms[3])) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    loss.backward()
    grad = torch.nan_to_num(logp.grad, nan=99.0)
    # clipped turns: zero gradient; live turn k of trajectory i: -s_ik A_ik / (N K_i |y_ik|)
    want = torch.zeros(2, 6, dtype=torch.float64)
    want[0, 4] = -s01 * 1.0 / (2 * 2 * 1)
    want[1, 4] = -s11 * -1.0 / (2 * 2 * 1)
    torch.testing.assert_close(grad, want, rtol=0, atol=1e-12)
    assert diag["clip_frac_turn"].item() == pytest.approx(0.5)
    assert diag["clip_frac_seq"].item() == pytest.approx(1.0)
    assert diag["clip_frac_token"].item() == pytest.approx(4 / 6)
    assert diag["clip_frac_low"].item() == pytest.approx(0.25)
    assert diag["clip_frac_high"].item() == pytest.approx(0.25)
    assert diag["num_turns"].item() == 4


def test_the_trajectory_unit_clips_the_same_batch_as_a_whole():
    """Contrast: one ratio over all three tokens (mean log-ratio 0.0013 > 4e-4) clips trajectory 0 entirely."""
    logp, old, adv, mask, _ = two_turn_batch()
    loss, diag = gspo_loss(logp, old, adv, mask)
    loss.backward()
    assert torch.nan_to_num(logp.grad[0], nan=99.0).abs().max().item() == 0.0
    assert diag["clip_frac_seq"].item() == 1.0


def test_one_turn_per_trajectory_equals_gspo_loss():
    torch.manual_seed(0)
    old = torch.randn(4, 7, dtype=torch.float64)
    logp = (old + 1e-3 * torch.randn(4, 7, dtype=torch.float64)).requires_grad_()
    mask = (torch.rand(4, 7) > 0.3).long()
    adv = torch.tensor([1.0, -0.5, 0.25, -2.0], dtype=torch.float64)
    turns = torch.where(mask.bool(), 0, -1)
    loss_turn, _ = gspo_turn_loss(logp, old, adv, mask, turns)
    (grad_turn,) = torch.autograd.grad(loss_turn, logp)
    loss_seq, _ = gspo_loss(logp, old, adv, mask)
    (grad_seq,) = torch.autograd.grad(loss_seq, logp)
    torch.testing.assert_close(loss_turn, loss_seq, rtol=0, atol=1e-12)
    torch.testing.assert_close(grad_turn, grad_seq, rtol=0, atol=1e-12)


def test_per_turn_advantages_and_padding_turns():
    logp, old, _, mask, turns = two_turn_batch()
    adv = torch.tensor([[0.0, 1.0, NAN], [0.0, -1.0, NAN]], dtype=torch.float64)  # a third turn that does not exist
    loss, _ = gspo_turn_loss(logp, old, adv, mask, turns)
    loss.backward()
    assert torch.nan_to_num(logp.grad[:, 1:3], nan=99.0).abs().max().item() == 0.0  # A = 0 on turn 0
    assert logp.grad[0, 4].item() == pytest.approx(-math.exp(-0.0001) / 4, abs=1e-12)


def test_bad_inputs_name_the_problem():
    logp, old, adv, mask, turns = two_turn_batch()
    with pytest.raises(ValueError, match="turn index"):
        gspo_turn_loss(logp, old, adv, mask, torch.full_like(turns, -1))
    with pytest.raises(ValueError, match="integer turn_ids"):
        gspo_turn_loss(logp, old, adv, mask, turns.double())
    with pytest.raises(ValueError, match="NaN or inf advantage"):
        gspo_turn_loss(logp, old, torch.tensor([[NAN, 1.0], [0.0, 0.0]], dtype=torch.float64), mask, turns)
    with pytest.raises(ValueError, match=r"\[B, K\]"):
        gspo_turn_loss(logp, old, torch.ones(3, dtype=torch.float64), mask, turns)
