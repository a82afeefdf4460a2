"""Split-turns samples (``RolloutConfig(history="split_turns")``): one training sample per assistant turn, and the
group advantages of their episodes.

Why: a chat template that rewrites earlier turns (Qwen3 drops every earlier ``<think>`` block) has no single
growing token sequence that is what the model sees at each turn. Training the whole episode as sampled then
conditions later turns on reasoning the deployed model never sees again. Split turns: turn k is sampled after
``ChatRenderer.prompt_ids(history before turn k)`` (the template's own render, with its generation prompt) and
trained as that context (mask 0) plus the turn (mask 1). ``agentgspo check-template`` recommends it for such
templates.

Credit: every sample of an episode carries the episode's reward; the group advantage (paper Eq. 6) is computed
over episodes, each counted once, then given to each of its samples (:func:`episode_advantages`). GSPO's sequence
ratio (Eq. 7) is then per turn: ``s_k = (pi(turn_k | context_k) / pi_old(turn_k | context_k)) ^ (1 / |turn_k|)``,
each sample clipped on its own, and an episode's turns each count as one sequence in the 1/N average.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentgspo.objective.advantages import group_advantages

__all__ = ["episode_key", "episode_advantages"]


def episode_key(trajectory: Any, index: int) -> tuple:
    """The episode a sample belongs to: its (group, sample, seed) for a split_turns sample, else itself."""
    if "episode_turn" in trajectory.metadata:
        return ("episode", trajectory.group_id, trajectory.sample_id, trajectory.seed)
    return ("trajectory", index)


def episode_advantages(trajectories: Sequence[Any]) -> tuple[torch.Tensor, dict[str, float]]:
    """Group z-score advantages (Eq. 6, :func:`agentgspo.objective.advantages.group_advantages`) over episodes, each
    given to every sample of its episode. Without split_turns samples this is ``group_advantages(rewards, group_ids)``.

    Returns ``(advantages [N] float64, stats)``; raises ``ValueError`` when the samples of one episode disagree on
    the reward (they must all carry the episode's).
    """
    first_of: dict[tuple, int] = {}  # episode key -> index of its first sample
    number: dict[tuple, int] = {}  # episode key -> episode number
    episode_of = []  # [N] -> episode number
    for i, trajectory in enumerate(trajectories):
        key = episode_key(trajectory, i)
        if key not in first_of:
            first_of[key], number[key] = i, len(number)
        elif trajectories[first_of[key]].reward != trajectory.reward:
            raise ValueError(
                f"samples of one episode (group {trajectory.group_id}, sample {trajectory.sample_id}) "
                f"carry different rewards {trajectories[first_of[key]].reward} and {trajectory.reward}; "
                "each split_turns sample must carry its episode's reward"
            )
        episode_of.append(number[key])
    heads = list(first_of.values())
    rewards = torch.tensor([trajectories[i].reward for i in heads], dtype=torch.float64)  # [E]
    group_ids = torch.tensor([trajectories[i].group_id for i in heads])  # [E]
    per_episode, stats = group_advantages(rewards, group_ids)  # [E]
    return per_episode[torch.tensor(episode_of, dtype=torch.long)], stats  # [N]
