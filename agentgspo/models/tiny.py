"""The embedded default policy: a tiny Qwen3-MoE with a character-level tokenizer, built locally.

Nothing is downloaded. The tokenizer is a ``tokenizers`` WordLevel model over printable ASCII plus a few word
pieces of the tool-call JSON (so a call is ~20 tokens, not ~60), ChatML special tokens and the Hermes tool tags.
Its ``response_template`` reads a sampled turn back into a message (TRL's GRPOTrainer finds tool calls with it).
The model is ``Qwen3MoeForCausalLM`` from a config (4 experts, top-2). Both are saved with ``save_pretrained`` so
any backend (transformers, vLLM) loads the folder like a hub checkpoint.
"""

from __future__ import annotations

import os
import string
from pathlib import Path

from agentgspo.core.paths import cache_root
from agentgspo.models.quiet import no_transformers_progress_bars

TINY_VERSION = "v1"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Atomic but not special: they survive decode(skip_special_tokens=True) and are ordinary text to the template.
TAG_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
]
# Multi-character pieces, matched before single characters (longest first).
WORD_PIECES = [
    '{"name": "',
    '", "arguments": {"',
    '": "',
    '"}}',
    "calculate",
    "expression",
    "run_python",
    "search",
    "submit",
    "python",
    "code",
    "query",
    "stdin",
]

# ChatML, like Qwen's: tool results are grouped into one user turn inside <tool_response> tags, tools are named
# in the system turn. Assistant content is rendered verbatim (tool calls are part of the text the model wrote).
NL = "{{- '\\n' -}}"
CHAT_TEMPLATE = "".join(
    [
        "{%- for message in messages -%}",
        "{%- if message.role == 'tool' -%}",
        "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}<|im_start|>user{%- endif -%}",
        NL,
        "<tool_response>",
        NL,
        "{{- message.content -}}",
        NL,
        "</tool_response>",
        "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}<|im_end|>",
        NL,
        "{%- endif -%}",
        "{%- else -%}",
        "<|im_start|>{{- message.role -}}",
        NL,
        "{{- message.content -}}",
        "{%- if loop.first and message.role == 'system' and tools -%}",
        NL,
        "Tools: {%- for tool in tools %} {{ tool.function.name }}{{ ',' if not loop.last }}{%- endfor -%}",
        "{%- endif -%}",
        "{%- if message.tool_calls -%}{%- for call in message.tool_calls -%}",
        "<tool_call>",
        NL,
        "{{- {'name': call.function.name, 'arguments': call.function.arguments} | tojson -}}",
        NL,
        "</tool_call>",
        "{%- endfor -%}{%- endif -%}",
        "<|im_end|>",
        NL,
        "{%- endif -%}",
        "{%- endfor -%}",
        "{%- if add_generation_prompt -%}<|im_start|>assistant",
        NL,
        "{%- endif -%}",
    ]
)

# How a sampled turn is read back into a message (``tokenizer.parse_response``, which TRL's GRPOTrainer uses to find
# tool calls): the template's ChatML turn, an optional <think> block, Hermes <tool_call>{json}</tool_call> blocks
# (as the template writes ``tool_calls``) and the rest as content; the same fields as TRL's Qwen3 template.
# transformers >= 5.13 reads ``response_template``; the older ``response_schema`` is dropped when a tokenizer loads.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close_pattern": r"</think>\s*", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def build_tiny_tokenizer():
    """The character-level chat tokenizer of the tiny policy, as a ``PreTrainedTokenizerFast``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in "\x0b\x0c"]
    vocab_list = ["<unk>", *WORD_PIECES, *chars]
    vocab = {token: i for i, token in enumerate(dict.fromkeys(vocab_list))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    pattern = "|".join(__import__("re").escape(p) for p in sorted(WORD_PIECES, key=len, reverse=True))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(pattern + r"|[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    core.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        bos_token=None,
        clean_up_tokenization_spaces=False,
        model_max_length=1024,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def build_tiny_policy(
    out_dir: str | Path,
    *,
    seed: int = 0,
    hidden_size: int = 128,
    num_layers: int = 3,
    num_experts: int = 4,
    experts_per_token: int = 2,
    max_positions: int = 1024,
) -> Path:
    """Build the tiny MoE policy with random weights from ``seed`` and save model and tokenizer in ``out_dir``."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    tokenizer = build_tiny_tokenizer()
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        moe_intermediate_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        num_experts=num_experts,
        num_experts_per_tok=experts_per_token,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        router_aux_loss_coef=0.01,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        rope_theta=10000.0,
    )
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = config.eos_token_id
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with no_transformers_progress_bars():
        model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def tiny_policy_path() -> Path:
    """The folder of the tiny policy, built on first use (atomically, so concurrent callers are safe)."""
    import hashlib

    # The folder name changes whenever what it is built from changes, so a stale build is never reused.
    recipe = repr((TINY_VERSION, SPECIAL_TOKENS, TAG_TOKENS, WORD_PIECES, CHAT_TEMPLATE, RESPONSE_TEMPLATE))
    path = cache_root() / f"tiny-moe-{TINY_VERSION}-{hashlib.sha256(recipe.encode()).hexdigest()[:10]}"
    if (path / "config.json").exists() and (path / "tokenizer.json").exists():
        return path
    staging = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    build_tiny_policy(staging)
    try:
        staging.rename(path)
    except OSError:  # another process won the race; its folder is identical
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return path
