"""Trajectories to padded tensors, and the policy's per-token log-probs on them.

All tensors are ``[B, T]`` and aligned with ``Trajectory.token_ids``: column t holds token t, its loss mask, its
sampler log-prob and (from :func:`score`) the model's log-prob of token t given tokens < t. Column 0 has no
prediction; its log-prob is 0 and its loss mask is forced to 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentgspo.objective.logprobs import fused_token_logprobs, token_logprobs
from agentgspo.core.trajectory import Trajectory

__all__ = ["Batch", "collate", "length_buckets", "score", "forward", "logprobs_from_logits"]


@dataclass
class Batch:
    """Right-padded tensors of a list of trajectories (padding has ``attention_mask`` 0 and ``loss_mask`` 0)."""

    input_ids: torch.Tensor  # [B, T] long
    attention_mask: torch.Tensor  # [B, T] long
    loss_mask: torch.Tensor  # [B, T] bool
    sampler_logprobs: torch.Tensor  # [B, T] float32

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on ``device``."""
        return Batch(
            *(t.to(device) for t in (self.input_ids, self.attention_mask, self.loss_mask, self.sampler_logprobs))
        )

    @property
    def num_tokens(self) -> int:
        """Non-padding tokens."""
        return int(self.attention_mask.sum())


def collate(trajectories: Sequence[Trajectory], pad_token_id: int) -> Batch:
    """Pad ``trajectories`` to the longest one (right padding)."""
    if not trajectories:
        raise ValueError("collate: expected at least one trajectory, got none")
    width = max(len(t.token_ids) for t in trajectories)
    batch = len(trajectories)
    input_ids = torch.full((batch, width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((batch, width), dtype=torch.long)
    loss_mask = torch.zeros((batch, width), dtype=torch.bool)
    sampler_logprobs = torch.zeros((batch, width), dtype=torch.float32)
    for row, t in enumerate(trajectories):
        n = len(t.token_ids)
        input_ids[row, :n] = torch.tensor(t.token_ids, dtype=torch.long)
        attention_mask[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(t.loss_mask, dtype=torch.bool)
        sampler_logprobs[row, :n] = torch.tensor(t.sampler_logprobs, dtype=torch.float32)
    loss_mask[:, 0] = False  # nothing predicts the first token
    return Batch(input_ids, attention_mask, loss_mask, sampler_logprobs)


def length_buckets(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Split indices into micro-batches of similar length whose padded size ``rows * longest`` stays within
    ``max_tokens`` (at least one row each), so padding does not dominate the compute."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    buckets: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > max_tokens:
            buckets.append(current)
            current = []
        current.append(i)
    if current:
        buckets.append(current)
    return buckets


def score(
    model: Any, batch: Batch, *, temperature: float = 1.0, output_router_logits: bool = False
) -> tuple[torch.Tensor, Any]:
    """The model's fp32 log-prob of every token given its prefix, aligned with ``batch.input_ids``.

    Returns ``(logprobs [B, T], outputs)``; ``outputs`` is the model's output (``aux_loss`` for MoE models when
    ``output_router_logits``). Column 0 is 0.
    """
    outputs = forward(model, batch, output_router_logits=output_router_logits)
    return logprobs_from_logits(outputs.logits, batch.input_ids, temperature=temperature), outputs


def forward(model: Any, batch: Batch, *, output_router_logits: bool = False) -> Any:
    """The model's training forward pass on ``batch`` (no KV cache); router logits on request (MoE aux loss)."""
    kwargs = {"output_router_logits": True} if output_router_logits else {}
    return model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False, **kwargs)


def logprobs_from_logits(
    logits: torch.Tensor, input_ids: torch.Tensor, *, temperature: float = 1.0, fused: bool = False
) -> torch.Tensor:
    """fp32 log-prob of every token of ``input_ids`` ``[B, T]`` from the logits ``[B, T, V]`` of its prefixes.

    Position t-1's logits score token t; column 0 is 0. ``fused`` uses :func:`fused_token_logprobs` (for a
    ``torch.compile`` region) instead of the chunked, checked :func:`token_logprobs`.
    """
    logits, targets = logits[:, :-1], input_ids[:, 1:]  # [B, T-1, V], [B, T-1]
    if fused:
        logprobs = fused_token_logprobs(logits, targets, temperature=temperature)  # [B, T-1] fp32
    else:
        logprobs = token_logprobs(logits, targets, temperature=temperature)  # [B, T-1] fp32
    return torch.nn.functional.pad(logprobs, (1, 0))  # [B, T]
