"""Group-relative advantages (GSPO paper arXiv 2507.18071, Eq. 6; the same estimator as GRPO), per trajectory or
per assistant turn (multi-turn credit for GSPO-token, Eq. 13-14)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["group_advantages", "turn_advantages", "token_advantages"]


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


def turn_advantages(
    turn_rewards: Sequence[Sequence[float]],
    groups: int | torch.Tensor,
    *,
    eps: float = 1e-6,
    baseline: str = "episode",
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-turn advantages from the rewards each ``step`` returned, against the group's episode returns
    (``baseline="episode"``, default) or against the group's returns-to-go at the same turn (``"turn"``).

    For trajectory i with step rewards r_i1..r_iK (r_ik: the reward of the ``step`` that consumed assistant turn k;
    the episode's final reward arrives with its last turn), the return of turn k is the undiscounted return-to-go,
    and the advantage compares it with the group's episode returns R_j = G_j1 (Eq. 6's statistics):

        G_ik = sum_{k' >= k} r_ik'
        A_ik = (G_ik - mean_g(R)) / (std_g(R) + eps)      (std unbiased, as ``group_advantages``)

    A group whose episode returns are all equal gets 0 for every turn (no outcome signal, as in Eq. 6). When only
    the last step is rewarded, G_ik = R_i for every k and A_ik equals ``group_advantages``' A_i exactly, so
    GSPO-token with these advantages reduces to GSPO (why it is the default); intermediate rewards (a passing test
    run, a found document) raise the credit of the turns before them above the turns after. Its blind spot: a turn
    that earned the +1 gets 0 when every episode of its group ended with the same return.

    ``baseline="turn"`` compares each turn with its peers at the same turn index, over the group's episodes that
    reached turn k (a per-position baseline, like a value baseline estimated from the group):

        A_ik = (G_ik - mean_{j in g, K_j > k}(G_jk)) / (std_{j in g, K_j > k}(G_jk) + eps)

    and 0 where those returns-to-go are all equal (a single episode reaching turn k included).

    Args:
        turn_rewards: N lists, one reward per assistant turn (trajectories may have different numbers of turns;
            a trajectory with no turn is an empty list). Must be finite.
        groups: ``group_size`` or ``group_ids``, as in ``group_advantages``.

    Returns:
        ``(advantages [N, K_max], stats)``: entries past a trajectory's last turn are NaN (never trained: the loss
        ignores turns without tokens); stats as in ``group_advantages``.

    >>> adv, _ = turn_advantages([[0.0, 1.0], [0.5, 0.0], [0.0, 0.0]], 3)
    >>> [[round(a, 4) for a in row] for row in adv.tolist()]
    [[1.0, 1.0], [0.0, -1.0], [-1.0, -1.0]]
    >>> adv, _ = turn_advantages([[0.0, 1.0], [1.0, 0.0]], 2, baseline="turn")  # both episodes return 1
    >>> [[round(a, 4) for a in row] for row in adv.tolist()]
    [[0.0, 0.7071], [0.0, -0.7071]]
    """
    if baseline not in ("episode", "turn"):
        raise ValueError(f"baseline: expected 'episode' or 'turn', got {baseline!r}")
    n = len(turn_rewards)
    k_max = max((len(r) for r in turn_rewards), default=0)
    rewards = torch.zeros((n, max(k_max, 1)), dtype=torch.float64)  # [N, K]
    present = torch.zeros_like(rewards, dtype=torch.bool)  # [N, K], turns that exist
    for i, row in enumerate(turn_rewards):
        rewards[i, : len(row)] = torch.tensor([float(x) for x in row], dtype=torch.float64)
        present[i, : len(row)] = True
    if not torch.isfinite(rewards[present]).all():
        raise ValueError("turn rewards contain NaN or inf; a reward function failed silently, fix it rather than train")
    zeroed = torch.where(present, rewards, 0.0)  # [N, K]
    to_go = zeroed.flip(-1).cumsum(-1).flip(-1)  # [N, K], G_ik
    episode_return = to_go[:, 0]  # [N], R_i (0 for a trajectory without turns)
    group_index = _group_index(groups, n, episode_return.device)  # [N]
    num_groups = int(group_index.max()) + 1 if n else 0
    ones = torch.ones(n, dtype=torch.float64)
    count = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group_index, ones)  # [G]
    mean = torch.zeros_like(count).index_add_(0, group_index, episode_return) / count  # [G]
    centered = episode_return - mean[group_index]  # [N]
    std = (torch.zeros_like(count).index_add_(0, group_index, centered**2) / (count - 1).clamp(min=1)).sqrt()  # [G]
    r_max = torch.full_like(count, -torch.inf).scatter_reduce_(0, group_index, episode_return, "amax")  # [G]
    r_min = torch.full_like(count, torch.inf).scatter_reduce_(0, group_index, episode_return, "amin")  # [G]
    zero_variance = r_max == r_min  # [G]
    scale = torch.where(zero_variance, 0.0, 1.0 / (std + eps))[group_index]  # [N]
    num_zero = int(zero_variance.sum())
    stats = {
        "num_groups": num_groups,
        "zero_variance_groups": num_zero,
        "zero_variance_frac": num_zero / num_groups if num_groups else 0.0,
    }
    advantages = (to_go - mean[group_index][:, None]) * scale[:, None]  # [N, K], A_ik
    if baseline == "turn":
        advantages = _per_turn_baseline(to_go, present, group_index, num_groups, eps)  # [N, K]
    advantages = torch.where(present, advantages, float("nan")).to(torch.float32)  # [N, K]
    return advantages, stats


def _per_turn_baseline(
    to_go: torch.Tensor, present: torch.Tensor, group_index: torch.Tensor, num_groups: int, eps: float
) -> torch.Tensor:
    """``(G_ik - mean_gk) / (std_gk + eps)`` over the episodes of group g that reached turn k (0 where those are all
    equal); ``to_go`` and ``present`` are ``[N, K]``."""
    k = to_go.shape[1]
    reached = present.to(torch.float64)  # [N, K]
    index = group_index[:, None].expand(-1, k)  # [N, K]
    count = torch.zeros(num_groups, k, dtype=torch.float64).index_add_(0, group_index, reached)  # [G, K]
    mean = torch.zeros_like(count).index_add_(0, group_index, to_go * reached) / count.clamp(min=1)  # [G, K]
    centered = (to_go - mean[group_index]) * reached  # [N, K]
    std = (torch.zeros_like(count).index_add_(0, group_index, centered**2) / (count - 1).clamp(min=1)).sqrt()
    high = torch.full_like(count, -torch.inf).scatter_reduce_(
        0, index, torch.where(present, to_go, -torch.inf), "amax"
    )  # [G, K]
    low = torch.full_like(count, torch.inf).scatter_reduce_(
        0, index, torch.where(present, to_go, torch.inf), "amin"
    )  # [G, K]
    scale = torch.where((high == low) | (count == 0), 0.0, 1.0 / (std + eps))  # [G, K]
    return centered * scale[group_index]  # [N, K]


def token_advantages(turn_adv: torch.Tensor, turn_ids: torch.Tensor) -> torch.Tensor:
    """Spread per-turn advantages ``[B, K]`` over tokens: ``A_it = A_{i, turn_ids[i, t]}``; 0 where ``turn_ids`` < 0.

    ``turn_ids`` is ``[B, T]`` with the assistant-turn index of each token (-1 for prompt, tool output and padding).
    The result feeds the ``gspo_token`` (or ``grpo``) objective as ``[B, T]`` advantages.
    """
    if turn_adv.dim() != 2 or turn_ids.dim() != 2 or turn_adv.shape[0] != turn_ids.shape[0]:
        raise ValueError(
            f"expected turn advantages [B, K] and turn_ids [B, T], got {tuple(turn_adv.shape)} and "
            f"{tuple(turn_ids.shape)}"
        )
    if bool((turn_ids >= turn_adv.shape[1]).any()):
        raise ValueError(f"turn_ids reach {int(turn_ids.max())} but only {turn_adv.shape[1]} turn advantages exist")
    index = turn_ids.clamp(min=0).long()  # [B, T]
    values = torch.gather(turn_adv, 1, index)  # [B, T]
    return torch.where(turn_ids >= 0, values, 0.0)  # [B, T]
