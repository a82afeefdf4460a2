"""What the learner refuses before it trains: each a silent bias of every update otherwise.

- :func:`check_parameter_precision`: bf16/fp16 weights under a torch optimizer (AdamW rounds small updates away);
- :func:`check_accumulation_and_clipping`: accelerate's own gradient accumulation (a rescale of the 1/N mean) and a
  DeepSpeed engine that clips at another norm than ``max_grad_norm``;
- :func:`check_sampling`: trajectories sampled at another temperature than the learner scores, and sampler
  log-probs that are not the learner's quantity where the learner uses them (``logp_old="sampler"``, a
  ``behaviour_correction``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentgspo.core.trajectory import Trajectory, sampler_logprobs_mismatch
from agentgspo.learning.config import LearnerConfig

__all__ = ["check_parameter_precision", "check_accumulation_and_clipping", "check_sampling"]


def check_parameter_precision(optimizer: Any, config: LearnerConfig, *, deepspeed: bool) -> None:
    """Refuse bf16/fp16 parameters under a torch optimizer (AdamW would round small updates away)."""
    if config.allow_low_precision_params or deepspeed:  # DeepSpeed keeps its own fp32 master copy
        return
    low = {
        p.dtype
        for group in optimizer.param_groups
        for p in group["params"]
        if p.dtype in (torch.bfloat16, torch.float16)
    }
    if low:
        raise ValueError(
            f"the optimizer updates {sorted(map(str, low))} parameters: AdamW on bf16/fp16 weights rounds away "
            "updates smaller than the weight's resolution (bf16 near 1.0: 2^-8), e.g. all of them at lr 1e-6. "
            "Load the policy in float32 and compute in bf16 with Accelerator(mixed_precision='bf16') or "
            "shard_policy(..., mixed_precision='bf16'); or set LearnerConfig(allow_low_precision_params=True)"
        )


def check_accumulation_and_clipping(accelerator: Any, model: Any, config: LearnerConfig, *, deepspeed: bool) -> None:
    """Refuse accelerate's own gradient accumulation (``accelerator.backward`` would divide every loss by its step
    count: a silent rescale of the learner's 1/N) and a DeepSpeed engine whose clipping is not ``max_grad_norm``
    (DeepSpeed clips inside its step and ignores ``clip_grad_norm_``)."""
    steps = accelerator.gradient_accumulation_steps
    if steps != 1:
        raise ValueError(
            f"accelerate's gradient_accumulation_steps is {steps} (`accelerate launch "
            "--gradient_accumulation_steps`, ACCELERATE_GRADIENT_ACCUMULATION_STEPS or Accelerator(...)): "
            "accelerator.backward would divide every loss by it, rescaling the paper's per-trajectory mean. "
            "Set it to 1; the learner accumulates over its own micro-batches (lower "
            "LearnerConfig.micro_batch_tokens for less memory per forward)"
        )
    if deepspeed:
        clipping = float(model.gradient_clipping() or 0.0)
        wanted = float(config.max_grad_norm or 0.0)
        if clipping != wanted:
            raise ValueError(
                f"DeepSpeed clips gradients at {clipping} (its config's gradient_clipping; 0 is off) "
                f"but max_grad_norm is {config.max_grad_norm}: DeepSpeed ignores "
                "clip_grad_norm_. Build the engine with shard_policy(..., max_grad_norm=...) or set "
                "gradient_clipping in the DeepSpeed config to the same value"
            )


def check_sampling(trajectories: Sequence[Trajectory], config: LearnerConfig) -> None:
    """Refuse trajectories sampled at another temperature than the learner scores, and sampler log-probs that are not
    the learner's quantity under ``logp_old="sampler"`` or a ``behaviour_correction`` (the rule:
    :func:`agentgspo.core.trajectory.sampler_logprobs_mismatch`). Either would bias every ratio silently."""
    temperature, correction = config.temperature, config.behaviour_correction
    uses_sampler_logprobs = config.logp_old == "sampler" or correction != "none"  # else any log-probs will do
    for t in trajectories:
        where = f"trajectory (group {t.group_id}, sample {t.sample_id})"
        if t.sampling is not None and t.sampling.get("temperature") != temperature:
            raise ValueError(
                f"{where} was sampled at temperature {t.sampling.get('temperature')} but the learner "
                f"scores softmax(logits / {temperature}) (LearnerConfig.temperature): the ratios "
                "would compare two different policies. Sample and learn at one temperature "
                "(a recipe's --temperature sets both)"
            )
        why = sampler_logprobs_mismatch(t.sampling, temperature) if uses_sampler_logprobs else None
        if why is not None and config.logp_old == "sampler":
            raise ValueError(
                f"logp_old='sampler': {where}: {why}. Its log-probs are not what the learner "
                "computes, so every sequence ratio would be off by that gap (with GSPO's 3e-4 "
                "band, clipping whole sequences silently). Use logp_old='recompute' "
                "(--logp-old recompute), or sample with top_p=1 and top_k=0"
            )
        if why is not None and correction != "none":  # the sampler's log-probs are mu
            raise ValueError(
                f"behaviour_correction={correction!r}: {where}: {why}. Its log-probs are not the policy's "
                "(log-probs renormalised over a top-p nucleus exceed the policy's, so w = pi_prox / mu < 1 for "
                "every sequence), and the behaviour weights would measure that gap, not staleness. Sample with "
                "top_p=1 and top_k=0 (full-vocabulary log-probs at the learner's temperature), or use "
                "behaviour_correction='none'"
            )
