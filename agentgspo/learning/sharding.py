"""Sharded training with torch FSDP2 (``fully_shard``): sharding a policy, full weights for the sampler, checkpoints.

Two ways in, one learner:

- GPUs: ``accelerate launch --config_file recipes/accelerate/fsdp2_8gpu.yaml train.py`` and a plain
  ``accelerator.prepare(model, optimizer)``; accelerate applies ``fully_shard`` and saves sharded checkpoints.
  :func:`shard_policy` does just that when ``accelerator.is_fsdp2``.
- CPU (and any launch accelerate runs as plain DDP): accelerate's ``--use_fsdp`` silently falls back to DDP without
  a GPU, so :func:`shard_policy` applies ``fully_shard`` itself to every decoder layer and the root on the process
  group accelerate (or torchrun) started (gloo on CPU), builds the optimizer on the sharded parameters, and
  registers save/load hooks so that ``accelerator.save_state`` / ``load_state`` write and read the model and the
  optimizer as sharded tensors (``torch.distributed.checkpoint``, one file per rank; exact resume).

Mixed precision ``bf16`` is FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``: the sharded
parameters the optimizer updates stay fp32 (master weights; AdamW state fp32), each layer is all-gathered and
computed in bf16, gradients are reduced in fp32. The model's outputs keep the compute dtype (no fp32 ``[B, T, V]``
logits; the learner upcasts them chunk by chunk, :mod:`agentgspo.objective.logprobs`).

Every forward and backward of a sharded model is a collective: all ranks must run the same passes in the same order.
:class:`agentgspo.learning.learner.GSPOLearner` pads the ranks with fewer micro-batches (or none) with zero-weight ones.

DeepSpeed ZeRO-2/3 (``pip install 'agentgspo[deepspeed]'``, ``recipes/accelerate/deepspeed_zero3_8gpu.yaml``):
:func:`shard_policy` fills in DeepSpeed's batch bookkeeping and calls ``accelerator.prepare``; the learner marks
each minibatch's last micro-batch as the accumulation boundary, so the engine steps once per minibatch. accelerate
sets DeepSpeed up on GPU backends only: on CPU a single DeepSpeed process works, several are refused
(:func:`check_deepspeed_processes`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "MIXED_PRECISION",
    "accelerate_fsdp2",
    "check_deepspeed_processes",
    "decoder_layer_classes",
    "full_state_dict",
    "is_deepspeed",
    "is_sharded",
    "load_sampler_weights",
    "prepare_deepspeed",
    "prepare_policy",
    "save_full_weights",
    "shard_policy",
    "sharded_mixed_precision",
    "uncompiled",
]

MIXED_PRECISION = ("no", "bf16")
_CHECKPOINT_DIR = "fsdp2_sharded"  # inside an accelerate save_state folder
# The mixed precision of each model shard_policy sharded itself (FSDP2's policy, which the model does not expose).
_SHARDED_PRECISION: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_sharded(model: Any) -> bool:
    """Whether ``model`` is an FSDP2 module (``fully_shard`` applied, by accelerate or by :func:`shard_policy`)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(uncompiled(model), FSDPModule)


def uncompiled(model: Any) -> Any:
    """The module inside ``torch.compile``'s wrapper (its ``_orig_mod``); ``model`` itself when it is not compiled."""
    return getattr(model, "_orig_mod", model)


def accelerate_fsdp2(accelerator: Any) -> bool:
    """Whether accelerate itself runs FSDP2 (an FSDP2 launch config): ``accelerator.is_fsdp2``; ``False`` under an
    accelerate too old to have it (before FSDP2 support)."""
    return bool(getattr(accelerator, "is_fsdp2", False))


def decoder_layer_classes(model: torch.nn.Module) -> set[str]:
    """Class names of a Hugging Face model's decoder blocks (its ``_no_split_modules``); empty for a model that
    names none (not every model is a Hugging Face one)."""
    return set(getattr(model, "_no_split_modules", None) or [])


def sharded_mixed_precision(model: torch.nn.Module) -> str:
    """The ``mixed_precision`` (``no`` or ``bf16``) :func:`shard_policy` sharded ``model`` with itself; ``no`` for
    any other model (unsharded, or sharded by accelerate, whose own ``mixed_precision`` says)."""
    return _SHARDED_PRECISION.get(uncompiled(model), "no")


def _layer_classes(model: torch.nn.Module) -> set[str]:
    """Class names of the blocks to shard one by one: Hugging Face models list them in ``_no_split_modules``."""
    names = decoder_layer_classes(model)
    if not names:
        raise ValueError(
            f"{type(model).__name__} names no decoder layer class (_no_split_modules is empty); pass "
            "layer_classes=... to shard_policy"
        )
    return names


def shard_policy(
    accelerator: Any,
    model: torch.nn.Module,
    make_optimizer: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer],
    *,
    mixed_precision: str = "no",
    reshard_after_forward: bool = True,
    layer_classes: Iterable[str] | None = None,
    max_grad_norm: float | None = None,
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """Shard ``model`` with FSDP2 over all processes and build its optimizer on the shards.

    Under an accelerate FSDP2 launch (``accelerator.is_fsdp2``; its config sets the mixed precision and the wrap
    policy) this is ``accelerator.prepare(model, make_optimizer(model.parameters()))``. Otherwise (CPU, or a DDP
    launch) it applies ``fully_shard`` to every ``layer_classes`` module (default: the model's
    ``_no_split_modules``) and then to the root, on a 1-D device mesh over the world, and registers hooks on
    ``accelerator`` so that ``save_state`` / ``load_state`` checkpoint the sharded model and optimizer
    (``torch.distributed.checkpoint``). Do not pass the returned model or optimizer to ``accelerator.prepare``
    (it would wrap the model in DDP); a scheduler is stepped by the learner and checkpointed with
    ``accelerator.register_for_checkpointing(scheduler)``.

    Args:
        make_optimizer: builds the optimizer from the parameters it must update (the fp32 shards).
        mixed_precision: ``no`` (fp32) or ``bf16`` (bf16 compute, fp32 sharded master weights and gradient
            reduction).
        reshard_after_forward: free each layer's gathered parameters after its forward (ZeRO-3-like; ``False``
            keeps them until the backward, ZeRO-2-like: more memory, fewer all-gathers).
        max_grad_norm: DeepSpeed only: its engine's gradient clipping (DeepSpeed clips inside its step and ignores
            ``clip_grad_norm_``); give the learner's ``max_grad_norm``. FSDP2 and DDP clip in the learner.
    """
    if mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision: expected one of {MIXED_PRECISION}, got {mixed_precision!r}")
    if is_deepspeed(accelerator):
        prepare_deepspeed(accelerator, max_grad_norm=max_grad_norm)
        return accelerator.prepare(model, make_optimizer(model.parameters()))
    if accelerate_fsdp2(accelerator):
        model, optimizer = accelerator.prepare(model, make_optimizer(model.parameters()))
        return model, optimizer
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "shard_policy needs a process group: start the script with `accelerate launch --multi_gpu "
            "--num_processes N` (CPU: create Accelerator(cpu=True)) or torchrun"
        )
    if is_sharded(model):
        raise ValueError("shard_policy: the model is already sharded (fully_shard was applied); pass the original")
    device = accelerator.device
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if mixed_precision == "bf16"
        else MixedPrecisionPolicy()
    )
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise ValueError(
            "shard_policy: load the policy in float32 (the sharded parameters are the optimizer's "
            "master weights); mixed_precision='bf16' computes in bf16"
        )
    model.to(device)
    classes = set(layer_classes) if layer_classes is not None else _layer_classes(model)
    layers = [m for m in model.modules() if type(m).__name__ in classes]
    if not layers:
        raise ValueError(f"shard_policy: no module of class {sorted(classes)} in {type(model).__name__}")
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
    _SHARDED_PRECISION[model] = mixed_precision  # read by the learner's memory estimate
    optimizer = make_optimizer(model.parameters())
    _register_checkpointing(accelerator, model, optimizer)
    return model, optimizer


def prepare_policy(
    accelerator: Any,
    model: torch.nn.Module,
    make_optimizer: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer],
    make_scheduler: Callable[[torch.optim.Optimizer], Any],
    *,
    sharding: str = "none",
    mixed_precision: str = "no",
    max_grad_norm: float | None = None,
) -> tuple[Any, Any, Any]:
    """The policy made ready to train: ``(model, optimizer, scheduler)``.

    ``sharding="fsdp2"`` (or an accelerate FSDP2 launch) shards it with :func:`shard_policy`, the optimizer built on
    the shards, the scheduler registered for checkpointing; otherwise ``accelerator.prepare`` wraps all three (DDP
    across processes, DeepSpeed under its launch). ``mixed_precision="bf16"`` without FSDP2 needs accelerate's own
    mixed precision (``accelerate launch --mixed_precision bf16``): an error says so.
    """
    if sharding == "fsdp2" or accelerate_fsdp2(accelerator):
        model, optimizer = shard_policy(
            accelerator, model, make_optimizer, mixed_precision=mixed_precision, max_grad_norm=max_grad_norm
        )
        scheduler = make_scheduler(optimizer)
        accelerator.register_for_checkpointing(scheduler)
        return model, optimizer, scheduler
    if mixed_precision != "no" and accelerator.mixed_precision == "no":
        raise ValueError(
            "--mixed-precision bf16 without FSDP2: launch with `accelerate launch --mixed_precision bf16` "
            "(or --sharding fsdp2)"
        )
    optimizer = make_optimizer(model.parameters())
    return accelerator.prepare(model, optimizer, make_scheduler(optimizer))


def is_deepspeed(accelerator: Any) -> bool:
    """Whether ``accelerator`` runs DeepSpeed (``accelerate launch --use_deepspeed`` or a DeepSpeed config file)."""
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.DEEPSPEED


def check_deepspeed_processes(accelerator: Any) -> None:
    """Refuse a DeepSpeed launch that accelerate does not see as distributed.

    accelerate (1.15) sets up DeepSpeed for GPU-like backends only: on a machine without one, ``accelerate launch
    --use_deepspeed --num_processes N`` starts N processes that DeepSpeed joins into one process group while
    accelerate reports each as process 0 of 1, so every rank would save checkpoints as the main process and the
    learner would weight the loss as if alone. Raises ``RuntimeError`` naming what is missing.
    """
    import torch.distributed as dist

    if not is_deepspeed(accelerator) or not dist.is_available() or not dist.is_initialized():
        return
    world = dist.get_world_size()
    if accelerator.num_processes != world:
        raise RuntimeError(
            f"DeepSpeed runs {world} processes but accelerate sees {accelerator.num_processes} (device "
            f"{accelerator.device}): accelerate's DeepSpeed integration needs a GPU (CUDA, XPU, NPU, ...) backend and "
            "has none here. On CPU use FSDP2 (agentgspo.learning.sharding.shard_policy under "
            "`accelerate launch --multi_gpu`) or a single DeepSpeed process"
        )


def prepare_deepspeed(accelerator: Any, *, max_grad_norm: float | None = None) -> None:
    """Fill in DeepSpeed's batch bookkeeping before ``accelerator.prepare``.

    accelerate takes DeepSpeed's ``train_micro_batch_size_per_gpu`` from a prepared data loader; the learner forms its
    own micro-batches (``LearnerConfig.micro_batch_tokens``) and marks the last one of each minibatch as the
    accumulation boundary itself, so DeepSpeed's sizes only need to be consistent: 1 per GPU, gradient accumulation
    1 (no loss scaling by DeepSpeed), ``train_batch_size`` = processes. ``gradient_clipping`` is set to
    ``max_grad_norm`` (0 for None) where the config leaves it to ``auto`` or unset; a different explicit value is
    an error (the learner would log one clipping and DeepSpeed apply another).
    """
    check_deepspeed_processes(accelerator)
    config = accelerator.state.deepspeed_plugin.deepspeed_config
    for key, value in (
        ("train_micro_batch_size_per_gpu", 1),
        ("gradient_accumulation_steps", 1),
        ("train_batch_size", accelerator.num_processes),
    ):
        if config.get(key) in (None, "auto"):
            config[key] = value
    clipping = float(max_grad_norm or 0.0)
    if config.get("gradient_clipping") in (None, "auto"):
        config["gradient_clipping"] = clipping
    elif float(config["gradient_clipping"]) != clipping:
        raise ValueError(
            f"DeepSpeed gradient_clipping is {config['gradient_clipping']} but max_grad_norm is "
            f"{max_grad_norm}: set one value (the DeepSpeed config's 'auto' takes max_grad_norm)"
        )
    if config["gradient_accumulation_steps"] != 1:
        raise ValueError(
            f"DeepSpeed gradient_accumulation_steps is {config['gradient_accumulation_steps']}: set it to "
            "1; the learner accumulates over its own micro-batches (LearnerConfig.micro_batch_tokens)"
        )


def _register_checkpointing(accelerator: Any, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Hooks that make ``accelerator.save_state`` / ``load_state`` write / read the sharded model and optimizer.

    accelerate calls them on every rank; each rank writes its own shards (``torch.distributed.checkpoint``), so a
    resume on the same number of ranks is exact.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    def save(models: list, weights: list, output_dir: str) -> None:
        model_state, optimizer_state = get_state_dict(model, optimizer)
        dcp.save(
            {"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(Path(output_dir, _CHECKPOINT_DIR))
        )

    def load(models: list, input_dir: str) -> None:
        path = Path(input_dir, _CHECKPOINT_DIR)
        if not path.is_dir():
            raise FileNotFoundError(
                f"{input_dir} holds no FSDP2 sharded state ({_CHECKPOINT_DIR}/): it was not saved "
                "by a sharded run; resume it with the sharding it was saved with"
            )
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=str(path))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])

    accelerator.register_save_state_pre_hook(save)
    accelerator.register_load_state_pre_hook(load)


def full_state_dict(accelerator: Any, model: Any, *, all_ranks: bool = True) -> dict[str, torch.Tensor]:
    """The policy's full (unsharded) weights, for a sampler (HF ``generate``) or the vLLM weight sync.

    Sharded (FSDP2): gathered from every rank's shards, a collective that every rank must call. ``all_ranks=False``
    gathers them to rank 0 only, on the CPU (other ranks get ``{}``), as a single sampler process needs. DeepSpeed
    ZeRO-3: ``accelerator.get_state_dict`` (consolidated on rank 0). Otherwise the wrapped module's own tensors.
    Keys are the unwrapped model's ``state_dict`` keys.
    """
    if is_sharded(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=not all_ranks)
        return get_model_state_dict(uncompiled(model), options=options)
    if is_deepspeed(accelerator):
        return accelerator.get_state_dict(model)
    return accelerator.unwrap_model(model).state_dict()


def save_full_weights(accelerator: Any, model: Any, folder: str | Path) -> Path:
    """Gather the policy's full weights and write them (main process) as a Hugging Face checkpoint in ``folder``:
    the layout vLLM's loader reads, e.g. for :func:`agentgspo.policy.weight_sync.sync_weights`' reload. A collective:
    every rank calls it. Returns the folder."""
    state = full_state_dict(accelerator, model, all_ranks=False)
    folder = Path(folder)
    if accelerator.is_main_process:
        folder.mkdir(parents=True, exist_ok=True)
        base = accelerator.unwrap_model(model)
        base.save_pretrained(folder, state_dict=state, safe_serialization=True)
    accelerator.wait_for_everyone()
    return folder


@torch.no_grad()
def load_sampler_weights(sampler_model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy full weights from :func:`full_state_dict` into an unsharded sampler model (cast to its dtype/device).

    Raises ``ValueError`` naming the keys when the state and the sampler do not hold the same tensors.
    """
    if not state:
        return  # a rank that got nothing (``all_ranks=False``)
    own = sampler_model.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise ValueError(
            f"sampler weights do not match the policy: missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}; build the sampler from the same config as the trained policy"
        )
    for name, tensor in own.items():
        tensor.copy_(state[name])
