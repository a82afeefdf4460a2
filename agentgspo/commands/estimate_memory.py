"""`agentgspo estimate-memory --model-config qwen3-30b-a3b --gpus 8 --gpu-memory-gb 80`: will a GSPO run fit?

Builds the model from its config on the meta device (no weights are loaded or allocated) and prints the memory per
process: parameters, gradients, AdamW state and the activations of one micro-batch (:mod:`agentgspo.learning.memory`).
"""

from __future__ import annotations

import argparse
import json

from agentgspo.learning.memory import MODEL_PRESETS, SHARDINGS, estimate_memory, load_model_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `estimate-memory`."""
    parser.add_argument(
        "--model-config",
        required=True,
        metavar="PRESET|PATH",
        help=f"a preset ({', '.join(sorted(MODEL_PRESETS))}), a model folder holding config.json, "
        "or a config.json file",
    )
    parser.add_argument("--gpus", type=int, default=1, help="processes (GPUs) the run uses (default 1)")
    parser.add_argument(
        "--gpu-memory-gb", type=float, default=None, help="memory per GPU in GiB, to say whether the run fits (e.g. 80)"
    )
    parser.add_argument(
        "--sharding",
        choices=SHARDINGS,
        default="fsdp2",
        help="how model states are split over the GPUs (default fsdp2; ddp replicates them)",
    )
    parser.add_argument(
        "--micro-batch-tokens",
        type=int,
        default=8192,
        help="padded tokens per forward, LearnerConfig.micro_batch_tokens (default 8192)",
    )
    parser.add_argument(
        "--precision",
        choices=("bf16", "fp32"),
        default="bf16",
        help="compute dtype; master weights and AdamW state are fp32 either way (default bf16)",
    )
    parser.add_argument(
        "--activation-checkpointing",
        action="store_true",
        help="recompute layer activations in the backward (LearnerConfig.activation_checkpointing)",
    )
    parser.add_argument(
        "--overhead-gb",
        type=float,
        default=0.0,
        help="a fixed margin in GiB added to the total (CUDA context, allocator, buffers)",
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as one JSON object (GiB)")


def run(args: argparse.Namespace) -> int:
    """Print the estimate; exit status 1 when ``--gpu-memory-gb`` is given and the run does not fit."""
    if args.gpus < 1:
        raise ValueError(f"--gpus: expected >= 1, got {args.gpus}")
    if args.micro_batch_tokens < 1:
        raise ValueError(f"--micro-batch-tokens: expected >= 1, got {args.micro_batch_tokens}")
    config = load_model_config(args.model_config)
    estimate = estimate_memory(
        config,
        processes=args.gpus,
        sharding=args.sharding,
        micro_batch_tokens=args.micro_batch_tokens,
        compute_dtype=args.precision,
        activation_checkpointing=args.activation_checkpointing,
        gpu_memory_gb=args.gpu_memory_gb,
        overhead_gb=args.overhead_gb,
        name=args.model_config,
    )
    print(json.dumps(estimate.as_dict()) if args.json else estimate.report())
    return 1 if estimate.fits is False else 0
