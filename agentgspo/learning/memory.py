"""How much memory a GSPO learner needs per process, before the first step: parameters, gradients, optimizer state,
activations per micro-batch.

The model is built from its config on the meta device (no weights, no memory), so a 30B-parameter config is
estimated on a laptop: ``agentgspo estimate-memory --model-config qwen3-30b-a3b --gpus 8 --gpu-memory-gb 80``.

Model states per process, P parameters, W processes (bytes; fp32 master weights and AdamW state throughout, as the
learner requires; ZeRO paper, Rajbhandari et al. 2020, arXiv 1910.02054, §3.1 and Fig. 1):

    sharding   parameters           gradients                    optimizer (AdamW m, v)
    ddp        4P                   4P + 4P (reducer buckets)     8P
    fsdp2      4P / W + gathered    4P / W + gathered grads      8P / W
    zero2      2P + 4P / W          4P / W                        8P / W
    zero3      2P / W + 4P / W      4P / W                        8P / W

"gathered" is FSDP2's transient unsharded copy, in the compute dtype, of the layers in flight (the current one
and the prefetched next one, forward and backward alike: 2 x the largest layer, plus the root's embeddings and head,
which stay gathered from the first forward to the last backward). ZeRO-2/3 keep bf16 compute weights (2P, sharded
under ZeRO-3) besides the fp32 masters.

Activations saved for the backward of one micro-batch of ``micro_batch_tokens`` tokens (b = bytes of the compute
dtype, h hidden, d head dim, q/kv heads, E experts, k experts per token, I expert width, I_d dense width; SDPA /
flash attention, which keep no [T, T] scores), per token and layer:

    attention  4h + 2b h + b (q + 2 kv) d + 4 (q + kv) d + b (q + kv) d + 2 b q d + 4 q      (fp32 norm inputs)
    moe mlp    4h + 2b h + 4E + k (2b h + 4 b I + 32)              (fp32 router logits, int64 expert indices)
    dense mlp  4h + 2b h + b (h + 4 I_d)

plus the final norm and the head's input (4h + 2b h per token). With activation checkpointing only each layer's
input (b h per token) is kept, plus one layer's activations while it is recomputed in the backward. The head adds
the logits, their gradient (both b x T x V) and the chunked fp32 log-softmax scratch (2 x 4 x 512 x V:
:mod:`agentgspo.objective.logprobs`); no fp32 ``[T, V]`` copy. The compute dtype is that of FSDP2's bf16
``MixedPrecisionPolicy`` or DeepSpeed's bf16 (activations in bf16); under accelerate's autocast (DDP) the residual
stream stays fp32 and autocast keeps a bf16 copy of the weights (2P, counted with the parameters). The formulas count
what autograd saves for the backward; allocator fragmentation, CUDA context and communication buffers are not counted
(``overhead_gb`` adds a fixed margin). :func:`measure_saved_activation_bytes` measures the same quantity on a real model
(``tests/learning/test_memory.py`` checks the formula against it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentgspo.learning.sharding import decoder_layer_classes

__all__ = [
    "MODEL_PRESETS",
    "SHARDINGS",
    "MemoryEstimate",
    "estimate_for_model",
    "estimate_memory",
    "load_model_config",
    "measure_saved_activation_bytes",
]

SHARDINGS = ("ddp", "fsdp2", "zero2", "zero3")
GIB = 1024**3
LOGPROB_CHUNK_ROWS = 512  # agentgspo.objective.logprobs.DEFAULT_CHUNK_SIZE

# Qwen3-30B-A3B, the GSPO paper's MoE model: the values of its published config.json
# (https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json; 30.5B parameters, 3.3B active, per the model
# card). Only the fields that shape the parameters and activations are needed here.
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "qwen3-30b-a3b": {
        "model_type": "qwen3_moe",
        "architectures": ["Qwen3MoeForCausalLM"],
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "attention_bias": False,
    },
}


@dataclass
class MemoryEstimate:
    """Estimated bytes per process of a learner run (see the module docstring for the formulas)."""

    model: str
    parameters: int  # total parameter count
    processes: int
    sharding: str
    compute_dtype: str  # "bf16" or "fp32"
    micro_batch_tokens: int
    activation_checkpointing: bool
    parameter_bytes: float
    gradient_bytes: float
    optimizer_bytes: float
    activation_bytes: float  # one micro-batch: decoder layers and final norm (the recomputed layer included)
    recompute_bytes: float  # of activation_bytes: one layer's activations while checkpointing recomputes it
    logits_bytes: float  # one micro-batch, head: logits, their gradient, log-softmax scratch
    overhead_bytes: float = 0.0
    gpu_memory_bytes: float | None = None

    @property
    def total_bytes(self) -> float:
        """Peak estimate: model states plus one micro-batch's activations plus the fixed overhead."""
        return (
            self.parameter_bytes
            + self.gradient_bytes
            + self.optimizer_bytes
            + self.activation_bytes
            + self.logits_bytes
            + self.overhead_bytes
        )

    @property
    def fits(self) -> bool | None:
        """Whether the total fits the given device memory (``None`` when no device memory was given)."""
        return None if self.gpu_memory_bytes is None else self.total_bytes <= self.gpu_memory_bytes

    def as_dict(self) -> dict[str, Any]:
        """The estimate in GiB (and its inputs), for JSON output."""
        sizes = {
            "parameter_bytes": self.parameter_bytes,
            "gradient_bytes": self.gradient_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "activation_bytes": self.activation_bytes,
            "logits_bytes": self.logits_bytes,
            "overhead_bytes": self.overhead_bytes,
            "total_bytes": self.total_bytes,
        }
        gib = {name: round(size / GIB, 2) for name, size in sizes.items()}
        return {
            "model": self.model,
            "parameters": self.parameters,
            "processes": self.processes,
            "sharding": self.sharding,
            "compute_dtype": self.compute_dtype,
            "micro_batch_tokens": self.micro_batch_tokens,
            "activation_checkpointing": self.activation_checkpointing,
            **{k.replace("_bytes", "_gib"): v for k, v in gib.items()},
            "gpu_memory_gib": None if self.gpu_memory_bytes is None else round(self.gpu_memory_bytes / GIB, 2),
            "fits": self.fits,
        }

    def report(self) -> str:
        """A few lines for a log: each component per process and whether it fits."""
        rows = [
            ("parameters (fp32 master + compute copies)", self.parameter_bytes),
            ("gradients", self.gradient_bytes),
            ("optimizer state (AdamW, fp32)", self.optimizer_bytes),
            (
                f"activations per micro-batch ({self.micro_batch_tokens} tokens"
                f"{', checkpointed' if self.activation_checkpointing else ''})",
                self.activation_bytes,
            ),
            ("logits + log-prob scratch per micro-batch", self.logits_bytes),
        ]
        if self.overhead_bytes:
            rows.append(("fixed overhead", self.overhead_bytes))
        lines = [
            f"memory estimate per process: {self.model}, {self.parameters / 1e9:.2f}B parameters, "
            f"{self.processes} process(es), {self.sharding}, {self.compute_dtype} compute"
        ]
        lines += [f"  {name:<62} {value / GIB:9.2f} GiB" for name, value in rows]
        total = f"  {'total':<62} {self.total_bytes / GIB:9.2f} GiB"
        if self.gpu_memory_bytes is not None:
            verdict = "fits" if self.fits else "does NOT fit"
            total += f"  ({verdict} in {self.gpu_memory_bytes / GIB:.0f} GiB)"
        return "\n".join([*lines, total])


def load_model_config(name_or_path: str) -> Any:
    """A Hugging Face config from a preset name (:data:`MODEL_PRESETS`), a folder with ``config.json`` or a JSON
    file. Raises ``ValueError`` naming the presets when it is none of these."""
    from transformers import AutoConfig

    if name_or_path.lower() in MODEL_PRESETS:
        values = dict(MODEL_PRESETS[name_or_path.lower()])
        return AutoConfig.for_model(values.pop("model_type"), **values)
    path = Path(name_or_path)
    if path.is_dir() and (path / "config.json").is_file():
        return AutoConfig.from_pretrained(path)
    if path.is_file():
        values = json.loads(path.read_text())
        if "model_type" not in values:
            raise ValueError(f"{path}: a model config needs a model_type (e.g. qwen3_moe)")
        return AutoConfig.for_model(values.pop("model_type"), **values)
    raise ValueError(
        f"model config {name_or_path!r}: expected a preset ({', '.join(sorted(MODEL_PRESETS))}), a "
        "folder holding config.json, or a config.json file"
    )


def _meta_model(config: Any) -> torch.nn.Module:
    """The causal LM of ``config`` on the meta device (shapes only, no memory)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def _parameter_counts(model: torch.nn.Module) -> tuple[int, int, int]:
    """(total, largest decoder layer, outside the decoder layers) parameter counts; shared tensors count once."""
    total = sum(p.numel() for p in model.parameters())
    layer_classes = decoder_layer_classes(model)
    layers = [m for m in model.modules() if type(m).__name__ in layer_classes]
    sizes = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    return total, max(sizes, default=0), total - sum(sizes)


def _setting(config: Any, *names: str, default: Any) -> Any:
    """The first of ``names`` that a Hugging Face config sets (to anything but ``None``, 0 or empty), else ``default``.

    Architectures name these differently (``num_experts`` / ``num_local_experts``) or leave them out (a dense
    model has no experts, an older one no ``head_dim``): the one place this module reads a config's optional
    settings."""
    for name in names:
        value = getattr(config, name, None)
        if value:
            return value
    return default


def _text_config(config: Any) -> Any:
    """The language model's config: a multimodal config's ``text_config``, else the config itself."""
    return _setting(config, "text_config", default=config)


def _activation_bytes_per_token(config: Any, compute_bytes: int) -> list[float]:
    """Bytes saved for the backward per token, for each decoder layer (module docstring's formulas)."""
    b = compute_bytes
    text = _text_config(config)
    h = text.hidden_size
    q = text.num_attention_heads
    kv = _setting(text, "num_key_value_heads", default=q)
    d = _setting(text, "head_dim", default=h // q)
    attention = 4 * h + 2 * b * h + b * (q + 2 * kv) * d + 4 * (q + kv) * d + b * (q + kv) * d + 2 * b * q * d + 4 * q
    experts = _setting(text, "num_experts", "num_local_experts", default=0)
    k = _setting(text, "num_experts_per_tok", default=0)
    expert_width = _setting(text, "moe_intermediate_size", "intermediate_size", default=0)
    dense_width = _setting(text, "intermediate_size", default=0)
    moe = 4 * h + 2 * b * h + 4 * experts + k * (2 * b * h + 4 * b * expert_width + 32)
    dense = 4 * h + 2 * b * h + b * (h + 4 * dense_width)
    layers = text.num_hidden_layers
    sparse_step = _setting(text, "decoder_sparse_step", default=1)
    dense_layers = set(_setting(text, "mlp_only_layers", default=()))
    per_layer = []
    for i in range(layers):
        is_moe = experts > 0 and k > 0 and i not in dense_layers and (i + 1) % sparse_step == 0
        per_layer.append(attention + (moe if is_moe else dense))
    return per_layer


def estimate_memory(
    config: Any,
    *,
    processes: int = 1,
    sharding: str = "fsdp2",
    micro_batch_tokens: int = 8192,
    compute_dtype: str = "bf16",
    activation_checkpointing: bool = False,
    gpu_memory_gb: float | None = None,
    overhead_gb: float = 0.0,
    name: str | None = None,
) -> MemoryEstimate:
    """Per-process memory of training the causal LM of ``config`` with the GSPO learner (module docstring).

    Args:
        config: a Hugging Face config (or a preset name / path for :func:`load_model_config`).
        processes: data-parallel processes (GPUs) the model is sharded over.
        sharding: one of :data:`SHARDINGS`.
        micro_batch_tokens: padded tokens per forward (``LearnerConfig.micro_batch_tokens``).
        compute_dtype: ``bf16`` (mixed precision; fp32 master weights) or ``fp32``.
        gpu_memory_gb: device memory per process in GiB, to say whether the run fits.
        overhead_gb: a fixed margin added to the total (CUDA context, allocator, communication buffers).
    """
    if isinstance(config, str):
        name = name or config
        config = load_model_config(config)
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding: expected one of {SHARDINGS}, got {sharding!r}")
    if compute_dtype not in ("bf16", "fp32"):
        raise ValueError(f"compute_dtype: expected 'bf16' or 'fp32', got {compute_dtype!r}")
    if processes < 1 or micro_batch_tokens < 1:
        raise ValueError(f"processes and micro_batch_tokens must be >= 1, got {processes} and {micro_batch_tokens}")
    model = _meta_model(config)
    total, largest_layer, outside = _parameter_counts(model)
    return _estimate(
        total,
        largest_layer,
        outside,
        config,
        processes=processes,
        sharding=sharding,
        micro_batch_tokens=micro_batch_tokens,
        compute_dtype=compute_dtype,
        activation_checkpointing=activation_checkpointing,
        gpu_memory_gb=gpu_memory_gb,
        overhead_gb=overhead_gb,
        name=name or type(model).__name__,
    )


def estimate_for_model(
    model: torch.nn.Module,
    *,
    processes: int,
    sharded: bool,
    micro_batch_tokens: int,
    activation_checkpointing: bool,
    mixed_precision: str,
) -> MemoryEstimate:
    """:func:`estimate_memory` for a live policy (the learner prints it at start): FSDP2 when ``sharded``, else DDP.

    Parameter counts are read from the model itself (global shapes: a sharded parameter counts in full)."""
    total, largest_layer, outside = _parameter_counts(model)
    return _estimate(
        total,
        largest_layer,
        outside,
        model.config,
        processes=processes,
        sharding="fsdp2" if sharded and processes > 1 else "ddp",
        micro_batch_tokens=micro_batch_tokens,
        compute_dtype="bf16" if mixed_precision == "bf16" else "fp32",
        activation_checkpointing=activation_checkpointing,
        gpu_memory_gb=None,
        overhead_gb=0.0,
        name=_setting(model.config, "_name_or_path", default=type(model).__name__),
    )


def _estimate(
    total: int,
    largest_layer: int,
    outside: int,
    config: Any,
    *,
    processes: int,
    sharding: str,
    micro_batch_tokens: int,
    compute_dtype: str,
    activation_checkpointing: bool,
    gpu_memory_gb: float | None,
    overhead_gb: float,
    name: str,
) -> MemoryEstimate:
    """The formulas of the module docstring."""
    b = 2 if compute_dtype == "bf16" else 4
    w = processes
    if processes == 1 or sharding == "ddp":
        # One process, or replicas: fp32 weights, gradients, DDP's reducer buckets (only with >1 process), AdamW.
        params, grads, optimizer = 4 * total, 4 * total + (4 * total if processes > 1 else 0), 8 * total
    elif sharding == "fsdp2":
        in_flight = 2 * largest_layer + outside  # unsharded layers in flight; the root stays gathered
        params, grads, optimizer = 4 * total / w + b * in_flight, 4 * total / w + b * in_flight, 8 * total / w
    elif sharding == "zero2":
        params, grads, optimizer = 2 * total + 4 * total / w, 4 * total / w, 8 * total / w
    else:  # zero3
        params, grads, optimizer = 2 * total / w + 4 * total / w, 4 * total / w, 8 * total / w
    per_layer = _activation_bytes_per_token(config, b)
    hidden = _text_config(config).hidden_size
    head_input = 4 * hidden + 2 * b * hidden  # final norm (fp32 input) and the head's input
    recompute = max(per_layer) * micro_batch_tokens if activation_checkpointing else 0
    if activation_checkpointing:
        per_token = b * hidden * len(per_layer) + head_input
    else:
        per_token = sum(per_layer) + head_input
    if compute_dtype == "bf16" and sharding == "ddp":
        params += 2 * total  # autocast's cached bf16 casts of the weights, alive until the backward
    vocab = _text_config(config).vocab_size
    activations = per_token * micro_batch_tokens + recompute
    logits = 2 * b * vocab * micro_batch_tokens + 2 * 4 * LOGPROB_CHUNK_ROWS * vocab
    return MemoryEstimate(
        model=name,
        parameters=total,
        processes=processes,
        sharding=sharding if processes > 1 else "none",
        compute_dtype=compute_dtype,
        micro_batch_tokens=micro_batch_tokens,
        activation_checkpointing=activation_checkpointing,
        parameter_bytes=params,
        gradient_bytes=grads,
        optimizer_bytes=optimizer,
        activation_bytes=activations,
        recompute_bytes=recompute,
        logits_bytes=logits,
        overhead_bytes=overhead_gb * GIB,
        gpu_memory_bytes=None if gpu_memory_gb is None else gpu_memory_gb * GIB,
    )


def measure_saved_activation_bytes(model: torch.nn.Module, run: Callable[[], torch.Tensor]) -> int:
    """Bytes of the distinct tensors autograd saves for the backward while ``run()`` builds the graph (the quantity
    the activation formulas estimate), parameters excluded. ``run`` returns the loss; its graph is dropped."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[tuple[int, int], int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            seen[(storage.data_ptr(), storage.nbytes())] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = run()
    del loss
    return sum(seen.values())
