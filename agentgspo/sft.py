"""Supervised warm start: maximise the log-likelihood of the sampled (mask 1) tokens of demonstrations.

Used by the quickstart to imitate an env's oracle before GSPO. Loss = mean over masked tokens of -log p (a token
mean, the usual SFT convention; RL losses live in :mod:`agentgspo.loss`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from agentgspo.batching import collate, score
from agentgspo.trajectory import Trajectory


def sft_loss(model: Any, trajectories: Sequence[Trajectory], pad_token_id: int) -> torch.Tensor:
    """Mean negative log-likelihood of the mask-1 tokens of ``trajectories``."""
    batch = collate(trajectories, pad_token_id).to(next(model.parameters()).device)
    logprobs, _ = score(model, batch)  # [B, T]
    masked = torch.where(batch.loss_mask, logprobs, torch.zeros_like(logprobs))  # [B, T]
    return -masked.sum() / batch.loss_mask.sum().clamp(min=1)


def warm_start(model: Any, demonstrations: Sequence[Trajectory], *, pad_token_id: int, steps: int,
               batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
               callback: Callable[[int, float], bool] | None = None) -> list[float]:
    """Train ``model`` on random minibatches of ``demonstrations`` for ``steps`` AdamW steps.

    ``callback(step, loss)`` runs after each step; returning True stops early (e.g. once an eval of the policy
    reaches a target). Returns the loss of each step.
    """
    if not demonstrations:
        raise ValueError("warm_start: expected demonstrations, got none")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for step in range(1, steps + 1):
        picks = torch.randint(len(demonstrations), (batch_size,), generator=generator).tolist()
        loss = sft_loss(model, [demonstrations[i] for i in picks], pad_token_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if callback is not None and callback(step, losses[-1]):
            break
    return losses
