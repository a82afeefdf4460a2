"""Tests for agentgspo.objective.advantages.group_advantages (GSPO paper Eq. 6, unbiased std as in verl/TRL)."""

import math

import pytest
import torch

from agentgspo.objective.advantages import group_advantages


def test_uses_unbiased_std():
    rewards = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    adv, _ = group_advantages(rewards, 4, eps=0.0)
    unbiased_std = math.sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3)  # 1.2910; the biased std would be 1.1180
    expected = (rewards - 1.5) / unbiased_std
    torch.testing.assert_close(adv, expected, rtol=0, atol=1e-15)
    assert adv.dtype == torch.float64


def test_eps_is_added_to_the_std():
    adv, _ = group_advantages(torch.tensor([0.0, 1.0], dtype=torch.float64), 2, eps=0.5)
    half_range_std = math.sqrt(0.5)  # unbiased std of {0, 1}
    torch.testing.assert_close(adv, torch.tensor([-0.5, 0.5], dtype=torch.float64) / (half_range_std + 0.5))


def test_zero_variance_group_gets_exactly_zero_and_is_counted():
    # (0.1 + 0.1 + 0.1) / 3 != 0.1 in float64, so (r - mean) / (std + eps) alone would give ~1e-11, not 0.
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.0, 1.0, 1.0], dtype=torch.float64)
    adv, stats = group_advantages(rewards, 3)
    assert torch.equal(adv[:3], torch.zeros(3, dtype=torch.float64))
    assert (adv[3:] != 0).all()
    assert stats == {"num_groups": 2, "zero_variance_groups": 1, "zero_variance_frac": 0.5}


def test_uneven_groups_by_id_in_any_order():
    rewards = torch.tensor([3.0, 1.0, 0.0, 5.0, 2.0, 4.0, 7.0])
    group_ids = torch.tensor([10, 20, 10, 30, 20, 10, 40])  # sizes 3, 2, 1, 1; ids need not be contiguous
    adv, stats = group_advantages(rewards, group_ids)
    for gid in group_ids.unique():
        members = group_ids == gid
        group = rewards[members].double()
        if members.sum() == 1:
            expected = torch.zeros(1, dtype=torch.float64)
        else:
            expected = (group - group.mean()) / (group.std(unbiased=True) + 1e-6)
        torch.testing.assert_close(adv[members].double(), expected, rtol=1e-6, atol=1e-6)
    assert stats == {"num_groups": 4, "zero_variance_groups": 2, "zero_variance_frac": 0.5}  # the two singletons
    assert adv.dtype == torch.float32


def test_group_size_and_equivalent_group_ids_agree():
    rewards = torch.randn(12, generator=torch.Generator().manual_seed(0))
    by_size, _ = group_advantages(rewards, 4)
    by_ids, _ = group_advantages(rewards, torch.arange(12) // 4)
    assert torch.equal(by_size, by_ids)
    per_group = by_size.view(3, 4)
    torch.testing.assert_close(per_group.mean(dim=-1), torch.zeros(3), rtol=0, atol=1e-6)
    torch.testing.assert_close(per_group.std(dim=-1), torch.ones(3), rtol=0, atol=1e-5)


def test_integer_rewards_are_promoted():
    adv, _ = group_advantages(torch.tensor([1, 0]), 2)
    assert adv.dtype == torch.float32 and adv[0] > 0 > adv[1]


def test_bad_inputs_fail_loudly():
    with pytest.raises(ValueError, match="NaN or inf"):
        group_advantages(torch.tensor([1.0, float("nan")]), 2)
    with pytest.raises(ValueError, match="dividing the number of rewards 5"):
        group_advantages(torch.ones(5), 2)
    with pytest.raises(ValueError, match="integer group_ids"):
        group_advantages(torch.ones(4), torch.zeros(4))
    with pytest.raises(ValueError, match=r"shape \[N\]"):
        group_advantages(torch.ones(2, 2), 2)
