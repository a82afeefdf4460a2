"""Tiny random-weight models of several Hugging Face causal-LM families, built from configs (nothing downloaded)."""

from __future__ import annotations

import torch

SHAPE = dict(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
FAMILIES = {  # name: (config class, model class, family-specific settings)
    "qwen3_moe": (
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        dict(moe_intermediate_size=16, num_experts=8, num_experts_per_tok=3, head_dim=8),
    ),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "olmoe": (
        "OlmoeConfig",
        "OlmoeForCausalLM",
        dict(num_experts=8, num_experts_per_tok=2, eos_token_id=None, pad_token_id=0),
    ),
    "qwen2_moe_shared_expert": (
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=32),
    ),
    "dense_qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=8)),
}
MOE_FAMILIES = [name for name in FAMILIES if not name.startswith("dense")]


def build_tiny(name: str, *, seed: int = 0, dtype: torch.dtype = torch.float32, **overrides):
    """A random-init model of family ``name`` (``FAMILIES``), vocab 128 unless overridden."""
    import transformers

    config_cls, model_cls, extra = FAMILIES[name]
    config = getattr(transformers, config_cls)(**{**SHAPE, **extra, **overrides})
    torch.manual_seed(seed)
    return getattr(transformers, model_cls)(config).to(dtype)
