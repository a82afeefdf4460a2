"""Each sample's weight in the per-trajectory mean and per-turn credit: the inputs of the learner's credit step.

- :func:`sample_weights`: 1 per whole episode; 1/K per sample of a K-turn ``split_turns`` episode (paper Eq. 5's
  1/N is per episode) or 1 each under ``split_turns_weight="turn"``;
- :func:`turn_credit`: ``credit="turn"``'s per-turn advantages (:func:`agentgspo.objective.advantages.turn_advantages`)
  for whole episodes whose step rewards were recorded and sum to the episode's reward, refused otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agentgspo.core.trajectory import Trajectory
from agentgspo.objective.advantages import turn_advantages

__all__ = ["sample_weights", "turn_credit"]


def sample_weights(trajectories: Sequence[Trajectory], split_turns_weight: str = "episode") -> torch.Tensor:
    """Each sample's weight in the per-trajectory mean (paper Eq. 5), ``[N]`` float64: 1 for whole episodes; for
    the K samples of one ``split_turns`` episode 1/K each under ``"episode"`` (every episode weighs 1/N, as in the
    paper), 1 under ``"turn"``.

    >>> from agentgspo.core.trajectory import Trajectory
    >>> turns = [Trajectory(metadata={"episode_turn": k, "episode_turns": 4}) for k in range(4)]
    >>> sample_weights([Trajectory(), *turns]).tolist()
    [1.0, 0.25, 0.25, 0.25, 0.25]
    """
    if split_turns_weight == "turn":
        return torch.ones(len(trajectories), dtype=torch.float64)
    return torch.tensor([1.0 / t.metadata.get("episode_turns", 1) for t in trajectories], dtype=torch.float64)


def turn_credit(
    trajectories: Sequence[Trajectory], included: list[int], *, baseline: str
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-turn advantages ``[N, K]`` (``credit="turn"``; rows not included are 0) from each episode's step rewards;
    a clear error where they are missing or disagree with the episode's reward."""
    seen = set()
    for i in included:
        t = trajectories[i]
        if len(t.turn_rewards) != t.num_turns:
            raise ValueError(
                f"credit='turn': trajectory (group {t.group_id}, sample {t.sample_id}) has "
                f"{len(t.turn_rewards)} turn rewards for {t.num_turns} turns; it was recorded without "
                "per-turn rewards (an older rollout): sample again or use credit='trajectory'"
            )
        if abs(sum(t.turn_rewards) - t.reward) > 1e-6 * max(1.0, abs(t.reward)):
            raise ValueError(
                f"credit='turn': trajectory (group {t.group_id}, sample {t.sample_id}) has reward "
                f"{t.reward} but its turn rewards sum to {sum(t.turn_rewards)} (a group reward "
                "function changed it?); per-turn credit would ignore that change: use "
                "credit='trajectory'"
            )
        if (t.group_id, t.sample_id) in seen:
            raise ValueError(
                "credit='turn' needs whole episodes; these are split_turns samples (one turn each): "
                "use credit='trajectory' with history='split_turns'"
            )
        seen.add((t.group_id, t.sample_id))
    per_turn, stats = turn_advantages(
        [trajectories[i].turn_rewards for i in included],
        torch.tensor([trajectories[i].group_id for i in included]),
        baseline=baseline,
    )  # [n, K]
    advantages = torch.zeros(len(trajectories), max(per_turn.shape[1], 1), dtype=torch.float64)  # [N, K]
    advantages[included, : per_turn.shape[1]] = per_turn.to(torch.float64)
    return advantages, stats
