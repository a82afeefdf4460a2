"""What the learner owes the other ranks and accelerate: plumbing, not the algorithm.

- :func:`agree`: each step's counts, summed and maximised over the ranks in one gather (the 1/N weighting over all
  ranks, and the passes every rank runs in lockstep);
- :func:`placeholder_rows` / :func:`placeholder_batch`: a zero-weight micro-batch (two padding tokens, A = 0) that a
  rank with nothing (more) to train runs so that its collectives pair with the other ranks' (FSDP2 and DeepSpeed run
  a collective in every forward and backward; DDP in the last backward);
- :func:`accumulating`: gradient accumulation through accelerate's switches (``sync_gradients``, ``no_sync``,
  FSDP2's ``set_requires_gradient_sync``);
- :func:`local_model`: the module for the no-grad passes only some ranks run;
- :func:`step_scheduler`: one scheduler step per optimizer step, whatever the rank count;
- :func:`generator_state` / :func:`load_generator_state`: each rank's shuffling stream in one checkpoint;
- :func:`over_ranks`: the step's metric means merged over the ranks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from agentgspo.core.trajectory import Trajectory
from agentgspo.learning.means import Means
from agentgspo.learning.sharding import accelerate_fsdp2, is_sharded
from agentgspo.objective.batching import Batch, collate

__all__ = [
    "Agreed",
    "agree",
    "placeholder_rows",
    "placeholder_batch",
    "accumulating",
    "local_model",
    "step_scheduler",
    "generator_state",
    "load_generator_state",
    "over_ranks",
]


@dataclass
class Agreed:
    """Per-step counts agreed by all ranks: ``sums`` over ranks and ``most`` (the maximum of any rank)."""

    sums: list[float]
    most: list[int]


def agree(accelerator: Any, local: list[int | float]) -> Agreed:
    """Every rank's ``local`` counts, summed and maximised over the ranks (one gather; itself without ranks)."""
    if accelerator.num_processes == 1:
        return Agreed(sums=[float(x) for x in local], most=list(local))
    gathered = accelerator.gather(torch.tensor([local], dtype=torch.float64, device=accelerator.device)).cpu()  # [W, K]
    return Agreed(sums=gathered.sum(0).tolist(), most=[int(x) for x in gathered.max(0).values.tolist()])


def placeholder_rows(
    pad_token_id: int, device: Any
) -> tuple[list[Trajectory], list[int], dict[int, torch.Tensor], torch.Tensor, torch.Tensor]:
    """(trajectories, rows, logp_old, advantages, weights) of a zero-weight micro-batch: two padding tokens, A = 0."""
    placeholder = Trajectory()
    placeholder.append_forced([pad_token_id] * 2)
    return (
        [placeholder],
        [0],
        {0: torch.zeros(2, device=device)},
        torch.zeros(1, dtype=torch.float64),
        torch.ones(1, dtype=torch.float64),
    )


def placeholder_batch(pad_token_id: int, device: Any) -> Batch:
    """A two-token batch for a no-grad pass a rank runs only to keep the collectives in step."""
    trajectories = placeholder_rows(pad_token_id, device)[0]
    return collate(trajectories, pad_token_id).to(device)


@contextlib.contextmanager
def accumulating(accelerator: Any, model: Any, sync: bool, *, sync_each_micro_batch: bool) -> Iterator[None]:
    """Gradient accumulation through accelerate: ``sync_gradients`` is what ``accelerator.accumulate`` sets (a
    DeepSpeed engine steps only when it is True), and ``no_sync`` skips the gradient reduction of the micro-batches
    before the last, unless ``sync_each_micro_batch``. The sharded model of
    :func:`agentgspo.learning.sharding.shard_policy` (not one accelerate prepared) gets FSDP2's own switch, as
    accelerate's ``no_sync`` does for its FSDP2."""
    accelerator.gradient_state._set_sync_gradients(sync)
    try:
        if sync or sync_each_micro_batch or accelerator.num_processes == 1:
            yield
        elif is_sharded(model) and not accelerate_fsdp2(accelerator):
            model.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                model.set_requires_gradient_sync(True)
        else:
            with accelerator.no_sync(model):
                yield
    finally:
        accelerator.gradient_state._set_sync_gradients(True)


def local_model(model: Any) -> Any:
    """The policy for the no-grad passes only some ranks run (logp_old, routing volatility).

    A DDP module's forward is a collective: the first forward after a synced backward broadcasts the buffers (e.g.
    rotary ``inv_freq``) from rank 0. Ranks score different numbers of batches (none where every group is
    all-equal), so through DDP these broadcasts pair with another rank's gradient all-reduce and deadlock; the
    wrapped module computes the same values without one.
    """
    inner = getattr(model, "_orig_mod", model)  # under torch.compile(DDP(...))
    return inner.module if isinstance(inner, torch.nn.parallel.DistributedDataParallel) else model


def step_scheduler(scheduler: Any, optimizer: Any) -> None:
    """One scheduler step per optimizer step. accelerate's prepared scheduler steps ``num_processes`` times per call
    (it assumes a data loader whose global batch grew with the ranks), which would end a warm-up of 8 optimizer steps
    after 4 on 2 ranks; step the scheduler it wraps once, unless the optimizer skipped its step (fp16 overflow), as
    accelerate does."""
    from accelerate.optimizer import AcceleratedOptimizer
    from accelerate.scheduler import AcceleratedScheduler

    if not isinstance(scheduler, AcceleratedScheduler):
        scheduler.step()
    elif not (isinstance(optimizer, AcceleratedOptimizer) and optimizer.step_was_skipped):
        scheduler.scheduler.step()


def generator_state(generator: torch.Generator, accelerator: Any) -> dict[str, Any]:
    """The minibatch shuffling generator's state; with several processes every rank's (gathered: call it on all ranks
    together, as ``accelerator.save_state`` does), because accelerate writes a registered object's state from the
    main process only, and each rank shuffles with its own stream."""
    state = generator.get_state()  # [S] uint8
    if accelerator.num_processes == 1:
        return {"generator": state}
    gathered = accelerator.gather(state[None].to(accelerator.device)).cpu()  # [W, S]
    return {"generator": state, "rank_generators": list(gathered)}


def load_generator_state(generator: torch.Generator, accelerator: Any, state: dict[str, Any]) -> None:
    """Restore :func:`generator_state` (each rank takes its own generator when the state holds every rank's)."""
    per_rank = state.get("rank_generators")
    if per_rank is None:
        generator.set_state(state["generator"])
        return
    if len(per_rank) != accelerator.num_processes:
        raise ValueError(
            f"learner state saved by {len(per_rank)} processes cannot resume exactly on "
            f"{accelerator.num_processes}; resume with the same number of processes"
        )
    generator.set_state(per_rank[accelerator.process_index].clone())


def over_ranks(accelerator: Any, means: Means) -> Means:
    """This step's metrics over all ranks (every rank gets the same), so what rank 0 logs describes the whole batch:
    weighted means, extremes and counts of every rank's micro-batches. One small collective per step."""
    if accelerator.num_processes == 1:
        return means
    from accelerate.utils import gather_object

    merged = Means()
    for part in gather_object([means]):
        merged.merge(part)
    return merged
