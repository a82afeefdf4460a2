"""Expert computation for Hugging Face MoE layers with an atomics-free backward: ``experts_implementation="agentgspo"``.

transformers' ``grouped_mm`` experts sort the S = tokens x top_k (token, expert) pairs by expert, run two grouped
GEMMs and put the rows back in token order with advanced indexing. Autograd differentiates both indexings with
``index_put_(accumulate=True)``: an atomic scatter-add of S rows of the hidden size in the backward of every MoE
layer (the gather of the token rows adds each token's k copies onto one row, the restore adds onto unique rows).
This implementation computes the same forward and gives each of the two gathers the exact inverse as its backward:

    dispatch  x_sorted[s]     = x[perm[s] // k]          backward  dx[t]         = sum_j dx_sorted[inv[t k + j]]
    restore   y[t k + j]      = y_sorted[inv[t k + j]]   backward  dy_sorted[s]  = dy[perm[s]]

with ``perm`` the stable sort of the flattened expert ids and ``inv`` its inverse. Both backwards are gathers
(the k-sum accumulates in fp32), so they need no atomics and are deterministic. Expert biases (gpt-oss) are still
gathered per row as in transformers, so their small gradient remains a scatter-add. Group offsets come from a
``searchsorted`` over the sorted ids (no host sync, any device). The per-token combination
``sum_j w[t, j] y[t k + j]`` is the same as transformers' (fp32 when the routing weights are fp32).

Any model whose experts module is decorated with transformers' ``@use_experts_implementation`` (Qwen3-MoE,
Mixtral, OLMoE, Qwen2-MoE, ... in transformers 5) can use it: ``from_pretrained(..., experts_implementation=
"agentgspo")`` or ``model.set_experts_implementation("agentgspo")`` after ``agentgspo.models.moe.register()``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["agentgspo_experts_forward", "register"]

EXPERTS_IMPLEMENTATION = "agentgspo"


class _GatherRows(torch.autograd.Function):
    """``out = x[index]`` where every row of ``x`` is read exactly ``copies`` times.

    ``inverse`` lists, for each source row r, the ``copies`` output rows that read it (as ``[rows * copies]``,
    row-major), so the backward is ``grad[inverse].view(rows, copies, d).sum(1)``: a gather, not a scatter-add.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, copies: int) -> torch.Tensor:
        ctx.save_for_backward(inverse)
        ctx.copies = copies
        return x[index]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        (inverse,) = ctx.saved_tensors
        gathered = grad[inverse]  # [rows * copies, d]
        if ctx.copies == 1:
            return gathered, None, None, None
        per_row = gathered.view(-1, ctx.copies, gathered.size(-1)).sum(1, dtype=torch.float32)
        return per_row.to(grad.dtype), None, None, None


def _grouped_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor,
    bias: torch.Tensor | None,
    expert_ids: torch.Tensor,
    transposed: bool,
) -> torch.Tensor:
    """Rows of ``x`` grouped by expert (``offsets``: cumulative row counts) times their expert's weight (+ bias).

    ``weight`` is ``[E, out, in]`` (``[E, in, out]`` when ``transposed``), as the experts module stores it.
    """
    mat = weight if transposed else weight.transpose(-2, -1)  # [E, in, out]
    out = torch.nn.functional.grouped_mm(x.to(weight.dtype), mat, offs=offsets)  # [S, out]
    return out + bias[expert_ids] if bias is not None else out


def agentgspo_experts_forward(
    self: torch.nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """Experts forward for a ``@use_experts_implementation`` module: ``[T, H]`` tokens -> ``[T, H]`` output.

    ``top_k_index`` / ``top_k_weights`` are ``[T, k]`` (the router's choices and their weights).
    """
    if getattr(self, "_is_expert_parallel", False):
        raise NotImplementedError(
            f"experts_implementation={EXPERTS_IMPLEMENTATION!r} does not support expert "
            "parallelism; use experts_implementation='grouped_mm' with expert parallel plans"
        )
    num_tokens, hidden = hidden_states.shape
    k = top_k_index.size(-1)
    expert_ids, perm = torch.sort(top_k_index.reshape(-1), stable=True)  # [S], [S]: pairs in expert order
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel(), device=perm.device)  # [S]: sorted position of each pair
    boundaries = torch.arange(1, self.num_experts + 1, device=expert_ids.device, dtype=expert_ids.dtype)
    offsets = torch.searchsorted(expert_ids, boundaries, out_int32=True)  # [E]: cumulative pairs per expert

    def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return _grouped_linear(x, weight, offsets, bias, expert_ids, self.is_transposed)

    # The biases exist only where the experts have them (``has_bias``), as transformers' own experts forwards read them
    x_sorted = _GatherRows.apply(hidden_states, perm // k, inverse, k)  # [S, H]
    if self.has_gate:
        gate_up_bias = self.gate_up_proj_bias if self.has_bias else None
        activated = self._apply_gate(project(x_sorted, self.gate_up_proj, gate_up_bias))  # [S, 2I] -> [S, I]
    else:
        up_bias = self.up_proj_bias if self.has_bias else None
        activated = self.act_fn(project(x_sorted, self.up_proj, up_bias))  # [S, I]
    y_sorted = project(activated, self.down_proj, self.down_proj_bias if self.has_bias else None)  # [S, H]
    y = _GatherRows.apply(y_sorted, inverse, perm, 1).view(num_tokens, k, hidden)  # [T, k, H], token order
    combined = (y * top_k_weights.unsqueeze(-1)).sum(1)  # [T, H]: sum_j w[t, j] y[t, j]
    return combined.to(hidden_states.dtype)


def register() -> None:
    """Make ``experts_implementation="agentgspo"`` available to transformers (idempotent).

    Raises ImportError naming the fix when transformers or torch is too old for pluggable grouped-GEMM experts.
    """
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError as exc:
        raise ImportError(
            f"experts_implementation={EXPERTS_IMPLEMENTATION!r} needs transformers>=5 (its "
            "ExpertsInterface); upgrade transformers or keep the model's default experts"
        ) from exc
    if not hasattr(torch.nn.functional, "grouped_mm"):
        raise ImportError(
            f"experts_implementation={EXPERTS_IMPLEMENTATION!r} needs torch>=2.10 "
            f"(torch.nn.functional.grouped_mm); this is torch {torch.__version__}"
        )
    ALL_EXPERTS_FUNCTIONS.register(EXPERTS_IMPLEMENTATION, agentgspo_experts_forward)
