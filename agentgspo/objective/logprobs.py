"""Per-token log-probs and entropy from logits, in fp32, without materialising a ``[B, T, V]`` fp32 copy.

A bf16 model's logits are upcast chunk by chunk: the log-softmax of each chunk of rows is computed in fp32 (or
float64 for float64 logits), and only ``[rows]``-sized results are kept. The backward pass of ``token_logprobs``
recomputes each chunk's softmax instead of saving it, so peak extra memory is one ``[chunk_size, V]`` fp32 block in
the forward and the backward alike (plus the logits' own gradient, which autograd needs anyway).

Precision matters for GSPO: its clip band [1 - 3e-4, 1 + 4e-4] is finer than bf16 resolution, so the log-probs
that feed the ratio must come from an fp32 log-softmax (GSPO paper arXiv 2507.18071, §5.1 hyper-parameters).
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

__all__ = ["token_logprobs", "token_entropy", "fused_token_logprobs"]

DEFAULT_CHUNK_SIZE = 512  # rows (tokens) per chunk: 512 x 152k vocab x 4 bytes = 311 MB of fp32 scratch


def token_logprobs(
    logits: torch.Tensor,
    target_ids: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> torch.Tensor:
    """Log-probs of ``target_ids`` under ``softmax(logits / temperature)``, computed in fp32 or better.

        logp_bt = z_{b,t,y_bt} - logsumexp_v z_{b,t,v},   z = float32(logits) / temperature

    These are the ``logp_theta`` / ``logp_old`` of GSPO Eq. 7. Use the temperature the sampler used, or the
    ratio compares different distributions. Differentiable w.r.t. ``logits`` (first order only).

    Args:
        logits: ``[B, T, V]`` any float dtype; position t scores ``target_ids[:, t]`` (shift before calling).
        target_ids: ``[B, T]`` integer ids in ``[0, V)``; replace ignore-index labels such as -100 by any valid id
            and drop those positions with the loss mask.
        temperature: > 0.
        chunk_size: rows of the flattened ``[B * T, V]`` logits processed at once.

    Returns:
        ``[B, T]`` in ``promote(logits.dtype, float32)``.
    """
    if logits.dim() != 3 or target_ids.shape != logits.shape[:2]:
        raise ValueError(
            f"expected logits [B, T, V] and target_ids [B, T], got {tuple(logits.shape)} and {tuple(target_ids.shape)}"
        )
    if temperature <= 0 or chunk_size < 1:
        raise ValueError(f"expected temperature > 0 and chunk_size >= 1, got {temperature} and {chunk_size}")
    vocab = logits.shape[-1]
    if target_ids.numel() and (target_ids.min() < 0 or target_ids.max() >= vocab):
        raise ValueError(
            f"target_ids must lie in [0, {vocab}), got min {int(target_ids.min())} and max {int(target_ids.max())}; "
            "replace ignore-index labels (e.g. -100) by a valid id and exclude them with loss_mask"
        )
    flat_logits = logits.reshape(-1, vocab)  # [B*T, V]
    flat_targets = target_ids.reshape(-1)  # [B*T]
    flat_logp = _ChunkedTargetLogprob.apply(flat_logits, flat_targets, float(temperature), int(chunk_size))  # [B*T]
    return flat_logp.view(target_ids.shape)  # [B, T]


def fused_token_logprobs(logits: torch.Tensor, target_ids: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    """:func:`token_logprobs`' math as plain ops, for ``torch.compile`` to fuse: ``[B, T]`` fp32 or better.

        logp_bt = z_{b,t,y_bt} - logsumexp_v z_{b,t,v},   z = float32(logits) / temperature

    Eager, this materialises the ``[B, T, V]`` fp32 copy that ``token_logprobs`` avoids; inside a compiled region
    Inductor fuses the upcast into the reductions (forward and backward), so the copy never goes through memory
    (measured on an H200: +12-14% GSPO step throughput, ``benchmarks/gpu_gspo_step.py``). No argument checks here
    (they would break the graph); validate with ``token_logprobs`` semantics upstream.
    """
    z = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature  # [B, T, V], fused when compiled
    return z.gather(-1, target_ids[..., None]).squeeze(-1) - torch.logsumexp(z, dim=-1)  # [B, T]


@torch.no_grad()
def token_entropy(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    loss_mask: torch.Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> torch.Tensor:
    """Mean token entropy of ``softmax(logits / temperature)`` over the positions where ``loss_mask`` is 1.

        H_bt = -sum_v p_btv log p_btv,   p = softmax(z),   z = float32(logits) / temperature   (0 log 0 = 0)
        H    = sum_bt m_bt H_bt / sum_bt m_bt          (all positions when loss_mask is None)

    A diagnostic (no grad), fp32 or better, chunked like ``token_logprobs``. Returns a 0-dim tensor, NaN when the
    mask selects nothing.

    Args:
        logits: ``[B, T, V]``.
        loss_mask: ``[B, T]`` or None.
    """
    if logits.dim() != 3:
        raise ValueError(f"expected logits [B, T, V], got {tuple(logits.shape)}")
    if temperature <= 0 or chunk_size < 1:
        raise ValueError(f"expected temperature > 0 and chunk_size >= 1, got {temperature} and {chunk_size}")
    dtype = torch.promote_types(logits.dtype, torch.float32)
    flat_logits = logits.reshape(-1, logits.shape[-1])  # [B*T, V]
    entropy = torch.empty(flat_logits.shape[0], dtype=dtype, device=logits.device)  # [B*T]
    for start in range(0, flat_logits.shape[0], chunk_size):
        z = flat_logits[start : start + chunk_size].to(dtype) / temperature  # [C, V]
        probs = torch.softmax(z, dim=-1)  # [C, V]
        entropy[start : start + chunk_size] = torch.special.entr(probs).sum(dim=-1)  # [C], -inf logits give 0
    if loss_mask is None:
        return entropy.mean()  # []
    if loss_mask.shape != logits.shape[:2]:
        raise ValueError(f"expected loss_mask of shape {tuple(logits.shape[:2])}, got {tuple(loss_mask.shape)}")
    mask = loss_mask.reshape(-1).bool()  # [B*T]
    return torch.where(mask, entropy, 0.0).sum() / mask.sum()  # [], NaN when nothing is selected


class _ChunkedTargetLogprob(torch.autograd.Function):
    """``z[n, y_n] - logsumexp(z[n])`` with ``z = fp32(logits) / temperature``, chunked over rows n.

    Saves only the logits (already alive in the model's graph), targets and the ``[N]`` logsumexp; the backward
    recomputes ``softmax(z)`` per chunk: d logp_n / d logits_nv = (1[v = y_n] - p_nv) / temperature.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, temperature: float, chunk_size: int) -> torch.Tensor:
        dtype = torch.promote_types(logits.dtype, torch.float32)
        lse = torch.empty(logits.shape[0], dtype=dtype, device=logits.device)  # [N]
        target_logit = torch.empty_like(lse)  # [N]
        for start in range(0, logits.shape[0], chunk_size):
            stop = start + chunk_size
            z = logits[start:stop].to(dtype) / temperature  # [C, V]
            lse[start:stop] = torch.logsumexp(z, dim=-1)  # [C]
            target_logit[start:stop] = z.gather(-1, targets[start:stop, None]).squeeze(-1)  # [C]
        ctx.save_for_backward(logits, targets, lse)
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        return target_logit - lse  # [N]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_logp: torch.Tensor):
        logits, targets, lse = ctx.saved_tensors  # [N, V], [N], [N]
        grad_logits = torch.empty_like(logits)  # [N, V] in the logits' dtype
        for start in range(0, logits.shape[0], ctx.chunk_size):
            stop = start + ctx.chunk_size
            z = logits[start:stop].to(lse.dtype) / ctx.temperature  # [C, V]
            probs = torch.exp(z - lse[start:stop, None])  # [C, V]
            grad_z = -probs * grad_logp[start:stop, None]  # [C, V]
            grad_z.scatter_add_(-1, targets[start:stop, None], grad_logp[start:stop, None].to(lse.dtype))  # [C, V]
            grad_logits[start:stop] = grad_z / ctx.temperature  # [C, V], cast to the logits' dtype
        return grad_logits, None, None, None
