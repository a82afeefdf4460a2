"""The sampler the loop trains for: which backend plays the rollouts, and how each step's weights reach it.

- :func:`make_sampler`: the HF policy itself (a backend that samples with the learner's module, synchronous), its own
  copy (ahead of the learner, ``max_staleness > 0``), or the backend ``--backend`` names, loaded from a folder of the
  policy's weights and tokenizer;
- :func:`refresh_sampler`: the learner's weights into the sampler after a step (gathered from the shards under
  FSDP2); servers that fail the update twice are retired, and the run stops naming them unless
  ``allow_fewer_samplers``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgspo.core.sampling import WeightUpdateFailed
from agentgspo.learning.sharding import full_state_dict, is_sharded, load_sampler_weights
from agentgspo.policy.factory import backend_class, make_backend, run_options
from agentgspo.policy.hf import HFPolicy
from agentgspo.policy.weight_sync import save_weights, sync_weights
from agentgspo.training.config import TrainConfig

__all__ = ["make_sampler", "refresh_sampler"]


def make_sampler(config: TrainConfig, policy: HFPolicy, folder: Path, load_policy: Callable[[], HFPolicy]) -> Any:
    """The backend ``config.backend`` names: the HF ``policy`` itself (it samples with the learner's module), a copy
    from ``load_policy()`` when the rollouts run ahead of the learner, or another backend loaded from ``folder`` (the
    weights and tokenizer written there)."""
    if backend_class(config.backend).samples_with_learner_module:
        # Synchronous, it samples with the learner's own module; ahead of the learner it needs its own copy
        # (loaded here, given the learner's weights at each update).
        return policy if config.max_staleness == 0 else load_policy()
    save_weights(policy.model, folder)
    policy.renderer.tokenizer.save_pretrained(folder)
    return make_backend(
        str(folder),
        config.backend,
        **run_options(
            config.backend, seed=config.seed, server_urls=config.server_urls(), weight_transfer=config.weight_transfer
        ),
    )


def refresh_sampler(
    sampler: Any, model: Any, policy: HFPolicy, folder: Path, *, accelerator: Any, allow_fewer_samplers: bool
) -> None:
    """Give the sampler the learner's current weights (gathered from the shards under FSDP2: a collective, on every
    rank). Servers that fail the update (after the backend's second attempt) are retired and never serve a partial
    load; the run stops with an error naming them, unless ``allow_fewer_samplers`` says to train on with those that
    took it."""
    if is_sharded(model):
        load_sampler_weights(policy.model, full_state_dict(accelerator, model))
        model = policy.model  # the unsharded copy: the sampler itself (hf), or what vLLM / the servers reload
    try:
        sync_weights(sampler, model, folder)
    except WeightUpdateFailed as exc:
        if not exc.serving or not allow_fewer_samplers:
            fix = (
                "no server took it: check them and resume the run"
                if not exc.serving
                else f"resume the run once they serve again, or pass --allow-fewer-samplers to train on with "
                f"{', '.join(exc.updated) or f'the {exc.serving} that took it'}"
            )
            raise RuntimeError(
                f"the weight update to version {exc.version} failed twice on {', '.join(exc.retired)} "
                f"(retired: {exc}); {fix}"
            ) from exc
        rank = accelerator.process_index
        print(f"warning (rank {rank}, --allow-fewer-samplers): {exc}", file=sys.stderr, flush=True)
