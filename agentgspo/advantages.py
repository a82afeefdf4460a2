"""Group-relative advantages (GSPO paper arXiv 2507.18071, Eq. 6; the same estimator as GRPO)."""

from __future__ import annotations

import torch

__all__ = ["group_advantages"]


def group_advantages(
    rewards: torch.Tensor, groups: int | torch.Tensor, *, eps: float = 1e-6
) -> tuple[torch.Tensor, dict[str, float]]:
    """Z-score each trajectory's reward within its group (the G samples of one query), paper Eq. 6.

        A_i = (r_i - mean_g(r)) / (std_g(r) + eps),   std_g unbiased: sqrt( sum_{j in g} (r_j - mean_g)^2 / (n_g - 1) )

    The paper does not name the std convention; this follows verl and TRL (unbiased std plus eps). A group whose
    rewards are all equal (including a group of one) gets advantages of exactly 0, so it contributes no gradient,
    and is counted in the stats: a high ``zero_variance_frac`` means most rollouts are wasted (all solved or all
    failed).

    Args:
        rewards: ``[N]`` one scalar reward per trajectory; must be finite (a NaN reward is a broken verifier).
        groups: either ``group_size`` (int; rewards come in consecutive groups of that size, N divisible by it) or
            ``group_ids`` (``[N]`` integer tensor; trajectories with the same id form a group, any order, uneven
            sizes allowed).
        eps: added to the std.

    Returns:
        ``(advantages [N] in promote(rewards.dtype, float32), stats)`` where stats holds ``num_groups``,
        ``zero_variance_groups`` (int) and ``zero_variance_frac`` (float).

    >>> adv, stats = group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0]), 3)
    >>> [round(a, 4) for a in adv.tolist()]
    [1.1547, -0.5773, -0.5773, 0.0, 0.0, 0.0]
    >>> stats
    {'num_groups': 2, 'zero_variance_groups': 1, 'zero_variance_frac': 0.5}
    >>> adv, stats = group_advantages(torch.tensor([2.0, 5.0, 0.0, 1.0]), torch.tensor([7, 3, 7, 7]))
    >>> [round(a, 4) for a in adv.tolist()], stats["zero_variance_groups"]
    ([1.0, 0.0, -1.0, 0.0], 1)
    """
    if rewards.dim() != 1:
        raise ValueError(f"expected rewards of shape [N], got {tuple(rewards.shape)}")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or inf; a reward function failed silently, fix it rather than train")
    group_index = _group_index(groups, rewards.shape[0], rewards.device)  # [N], ids 0..num_groups-1
    num_groups = int(group_index.max()) + 1 if rewards.numel() else 0

    dtype = torch.promote_types(rewards.dtype, torch.float32)
    r = rewards.to(dtype)  # [N]
    count = torch.zeros(num_groups, dtype=dtype, device=r.device).index_add_(0, group_index, torch.ones_like(r))  # [G]
    mean = torch.zeros_like(count).index_add_(0, group_index, r) / count  # [G]
    centered = r - mean[group_index]  # [N]
    sq_sum = torch.zeros_like(count).index_add_(0, group_index, centered**2)  # [G]
    std = (sq_sum / (count - 1).clamp(min=1)).sqrt()  # [G], unbiased
    r_max = torch.full_like(count, -torch.inf).scatter_reduce_(0, group_index, r, "amax")  # [G]
    r_min = torch.full_like(count, torch.inf).scatter_reduce_(0, group_index, r, "amin")  # [G]
    zero_variance = r_max == r_min  # [G], exact test: `centered` may be 1 ulp off 0 for equal rewards

    advantages = torch.where(zero_variance[group_index], 0.0, centered / (std[group_index] + eps))  # [N]
    num_zero = int(zero_variance.sum())
    stats = {
        "num_groups": num_groups,
        "zero_variance_groups": num_zero,
        "zero_variance_frac": num_zero / num_groups if num_groups else 0.0,
    }
    return advantages, stats


def _group_index(groups: int | torch.Tensor, n: int, device: torch.device) -> torch.Tensor:
    """Map ``group_size`` or arbitrary ``group_ids`` to contiguous group indices ``[N]`` in 0..num_groups-1."""
    if isinstance(groups, torch.Tensor):
        if groups.shape != (n,) or groups.is_floating_point():
            raise ValueError(f"expected integer group_ids of shape [{n}], got {groups.dtype} {tuple(groups.shape)}")
        return torch.unique(groups.to(device), return_inverse=True)[1]  # [N]
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or n % groups:
        raise ValueError(
            f"expected group_size, a positive int dividing the number of rewards {n}, got {groups!r}; "
            "for uneven groups pass a group_ids tensor instead"
        )
    return torch.arange(n, device=device) // groups  # [N]
