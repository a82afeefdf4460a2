"""Preparing a policy for the learner: outputs kept in the compute dtype under mixed precision, activation
checkpointing, stochastic layers (dropout, router jitter) switched off so that the recompute and the update score the
same function."""

from __future__ import annotations

import inspect
from types import MethodType
from typing import Any

import torch

from agentgspo.learning.sharding import sharded_mixed_precision

__all__ = [
    "compute_dtype_name",
    "keep_compute_dtype_outputs",
    "enable_activation_checkpointing",
    "disable_stochastic_layers",
]


def compute_dtype_name(accelerator: Any, model: Any) -> str:
    """``bf16`` when the policy computes in bf16 (autocast, FSDP2 mixed precision or bf16 weights), else ``no``."""
    if str(accelerator.mixed_precision) == "bf16" or sharded_mixed_precision(model) == "bf16":
        return "bf16"
    return "bf16" if next(model.parameters()).dtype == torch.bfloat16 else "no"


def keep_compute_dtype_outputs(accelerator: Any, model: Any) -> None:
    """Undo accelerate's fp32 cast of a mixed-precision model's outputs, keeping its autocast.

    ``accelerator.prepare`` under ``mixed_precision="bf16"`` / ``"fp16"`` replaces ``model.forward`` by
    ``convert_outputs_to_fp32(autocast(forward))`` (accelerate ``Accelerator.prepare_model``): every bf16 output,
    the ``[B, T, V]`` logits included, is copied to fp32 (4 bytes x B x T x V: 20 GB for 8 x 4096 tokens at
    Qwen3's 152k vocabulary). The log-probs only need fp32 chunk by chunk
    (:func:`agentgspo.objective.logprobs.token_logprobs`), so the forward becomes ``autocast(forward)`` alone. A no-op
    for a model accelerate did not wrap that way.
    """
    base = accelerator.unwrap_model(model)
    original = getattr(base, "_original_forward", None)  # accelerate's private attribute, set only by that wrap
    if not inspect.ismethod(original):
        return
    function = original.__func__

    def forward(module: Any, *args: Any, **kwargs: Any) -> Any:
        with accelerator.autocast():
            return function(module, *args, **kwargs)

    forward.__wrapped__ = function  # accelerate's unwrap_model(keep_fp32_wrapper=False) follows __wrapped__
    base.forward = MethodType(forward, base)


def enable_activation_checkpointing(model: Any) -> None:
    """Non-reentrant activation checkpointing of every decoder layer of a Hugging Face model.

    Non-reentrant checkpointing recomputes a layer's forward (FSDP2 all-gathers included) inside the backward; it
    works with DDP, FSDP2 and frozen inputs alike (PyTorch ``torch.utils.checkpoint`` docs). Hugging Face layers
    checkpoint only in training mode (``from_pretrained`` returns the model in eval mode), so the model is put in
    training mode.
    """
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ValueError(
            f"activation_checkpointing: {type(model).__name__} does not support gradient "
            "checkpointing (supports_gradient_checkpointing is False); turn the setting off"
        )
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()


#: Float attributes of Hugging Face modules that make a training-mode forward random: attention and hidden dropout,
#: Mixtral-style router jitter (``jitter_noise`` / ``router_jitter_noise``).
STOCHASTIC_ATTRIBUTES = (
    "attention_dropout",
    "hidden_dropout",
    "activation_dropout",
    "dropout",
    "jitter_noise",
    "router_jitter_noise",
)


def disable_stochastic_layers(model: torch.nn.Module) -> list[str]:
    """Set dropout and router jitter to 0 in every module of ``model``; returns what was changed (``module.attr``).

    The learner forwards in training mode (Hugging Face checkpoints activations only then), where a checkpoint's
    dropout or Mixtral's router jitter would make logp_old and logp independent random draws: the ratios would
    measure noise, not the update. The sampler (eval mode) is unaffected.
    """
    changed = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0:
            module.p = 0.0
            changed.append(f"{name or type(model).__name__}.p")
        for attribute in STOCHASTIC_ATTRIBUTES:
            value = module.__dict__.get(attribute)  # plain attributes only (a Dropout submodule is handled above)
            if isinstance(value, float) and value > 0:
                setattr(module, attribute, 0.0)
                changed.append(f"{name or type(model).__name__}.{attribute}")
    return changed
