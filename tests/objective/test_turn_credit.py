"""Per-turn credit: return-to-go advantages per assistant turn feeding GSPO-token, checked by hand."""

import math

import pytest
import torch

from agentgspo.objective.advantages import group_advantages, token_advantages, turn_advantages
from agentgspo.objective import OBJECTIVES

SQRT_HALF = math.sqrt(0.5)


def test_return_to_go_advantages_by_hand():
    # Group of 2, two turns each: step rewards [0.5, 0.5] and [0, 0]. Episode returns R = [1, 0]: mean 0.5, unbiased
    # std sqrt(0.5). Returns-to-go: [1, 0.5] and [0, 0] -> A = [0.5, 0] / std and [-0.5, -0.5] / std.
    adv, stats = turn_advantages([[0.5, 0.5], [0.0, 0.0]], 2, eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([[SQRT_HALF, 0.0], [-SQRT_HALF, -SQRT_HALF]]))
    assert stats["zero_variance_groups"] == 0


def test_terminal_rewards_only_reduce_to_group_advantages():
    rewards = [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 1.0], [0.0]]
    adv, _ = turn_advantages(rewards, 2)
    episode, _ = group_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), 2)
    for i, row in enumerate(rewards):
        torch.testing.assert_close(adv[i, : len(row)], episode[i].expand(len(row)))
        assert torch.isnan(adv[i, len(row) :]).all()


def test_flat_groups_get_zero_and_bad_rewards_raise():
    adv, stats = turn_advantages([[0.5, 0.5], [0.0, 1.0]], 2)  # equal episode returns: no outcome signal
    assert adv.abs().max().item() == 0.0 and stats["zero_variance_groups"] == 1
    with pytest.raises(ValueError, match="NaN or inf"):
        turn_advantages([[float("nan")], [0.0]], 2)


def test_gspo_token_with_turn_credit_differs_from_gspo_exactly_where_turn_advantages_differ():
    """Two trajectories x (turn 0: 2 tokens, tool output, turn 1: 1 token), s = 1 (logp = old).

    Per-turn A = [[a, 0], [-a, -a]] with a = sqrt(1/2); per-trajectory A = [a, -a]. Unclipped gradients:
    GSPO gives -(1/N) A_i / |y_i| to every token; GSPO-token gives -(1/N) A_it / |y_i|. They differ only on
    trajectory 0's turn 1 (0 vs -(1/2) a / 3).
    """
    logp = torch.zeros(2, 5, dtype=torch.float64, requires_grad=True)
    old = torch.zeros(2, 5, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 1, 0, 1, 0]])
    turn_ids = torch.tensor([[0, 0, -1, 1, -1], [0, 0, -1, 1, -1]])
    per_turn, _ = turn_advantages([[0.5, 0.5], [0.0, 0.0]], 2, eps=0.0)
    per_traj, _ = group_advantages(torch.tensor([1.0, 0.0]), 2, eps=0.0)
    a = SQRT_HALF

    loss_tok, _ = OBJECTIVES["gspo_token"](logp, old, token_advantages(per_turn.double(), turn_ids), mask)
    (g_tok,) = torch.autograd.grad(loss_tok, logp)
    loss_seq, _ = OBJECTIVES["gspo"](logp, old, per_traj.double(), mask)
    (g_seq,) = torch.autograd.grad(loss_seq, logp)

    want_seq = torch.tensor([[-a / 6, -a / 6, 0, -a / 6, 0], [a / 6, a / 6, 0, a / 6, 0]], dtype=torch.float64)
    want_tok = want_seq.clone()
    want_tok[0, 3] = 0.0
    torch.testing.assert_close(g_seq, want_seq, rtol=0, atol=1e-6)
    torch.testing.assert_close(g_tok, want_tok, rtol=0, atol=1e-6)
    differs = (g_tok - g_seq).abs() > 1e-9
    assert differs.nonzero().tolist() == [[0, 3]]
    # values: J_seq = (1/2)(a - (-a)) ... loss = -(1/2)(a * 1 + (-a) * 1) = 0; J_tok adds the missing third of a
    assert loss_seq.item() == pytest.approx(0.0, abs=1e-9)
    assert loss_tok.item() == pytest.approx(-(0.5) * (a * 2 / 3 - a), abs=1e-6)


def test_token_advantages_checks_shapes():
    with pytest.raises(ValueError, match="only 1 turn advantages"):
        token_advantages(torch.zeros(1, 1), torch.tensor([[0, 1]]))
