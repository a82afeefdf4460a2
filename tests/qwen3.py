"""The real Qwen3 tokenizer and chat template (vendored under tests/fixtures/qwen3) and a tiny random Qwen3-MoE
with its full vocabulary, saved as a `save_pretrained` folder: what a real checkpoint looks like, built offline."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "qwen3"
FILES = ("tokenizer.json", "tokenizer_config.json")


def unpack_tokenizer(folder: Path) -> Path:
    """Write the Qwen3 tokenizer files into ``folder`` (created) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        with gzip.open(FIXTURE / f"{name}.gz") as src, open(folder / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return folder


def load_tokenizer(folder: Path):
    """The tokenizer with the file's own pre-tokenizer and decoder (see MACHINE.md on transformers 5)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(folder)


def build_tiny_qwen3_moe(folder: Path, *, seed: int = 0) -> Path:
    """A random-init Qwen3-MoE (2 layers, hidden 64, 8 experts top-2) over Qwen3's vocabulary, saved with its
    tokenizer into ``folder``; about 20M parameters, nearly all of them the embedding and the LM head."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    unpack_tokenizer(folder)
    tokenizer = load_tokenizer(folder)
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    Qwen3MoeForCausalLM(config).save_pretrained(folder)
    return folder
