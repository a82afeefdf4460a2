"""One learner step's layout: the batch shuffled into minibatches, each into length-bucketed micro-batches, with the
counts all ranks agreed on (:func:`agentgspo.learning.ranks.agree`).

The paper's step (arXiv 2507.18071, §5.1): the rollout batch is split into ``minibatches`` (4), one optimizer step
each, so updates 2..4 are off-policy. Each minibatch's forwarded rows are cut into micro-batches of at most
``micro_batch_tokens`` padded tokens (:func:`agentgspo.objective.batching.length_buckets`); the logp_old recompute
scores exactly those micro-batches, so the first update's ratios are exactly 1. Each minibatch's loss is divided by
its trajectory count over all ranks (over W), so the update is the per-trajectory mean whatever each rank holds, and in
lockstep (FSDP2, DeepSpeed: every forward and backward a collective) each rank runs the most passes of any rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentgspo.core.trajectory import Trajectory
from agentgspo.learning.config import LearnerConfig
from agentgspo.learning.ranks import agree
from agentgspo.objective.batching import length_buckets

__all__ = ["Minibatch", "Plan", "plan_step"]


@dataclass
class Minibatch:
    """One optimizer step's work on this rank, with the counts every rank agreed on."""

    micro_batches: list[list[int]]  # this rank's forwarded rows, length-bucketed
    trainable: float  # rows forwarded in this minibatch on all ranks (0: every rank skips it)
    num_sequences: float  # the minibatch's sample weights on all ranks, / W: the paper's N for the 1/N mean
    forwarded: float  # trainable / W: the denominator of the aux loss's row-weighted mean
    passes: int  # micro-batch passes this rank runs; in lockstep the most of any rank, placeholders past its own


@dataclass
class Plan:
    """One step's layout: the minibatches, and the logp_old recompute's passes over the same micro-batches."""

    minibatches: list[Minibatch]
    score_buckets: list[list[int]]  # the micro-batches the recompute scores, in order (all but `reused`'s)
    score_passes: int  # scoring passes this rank runs (in lockstep with recompute: the most of any rank)
    probe_routing: bool  # whether this rank runs the routing-volatility passes (MoE)
    trained: list[int]  # the minibatches some rank trains on (agreed), in order: one optimizer step each
    reused: int | None  # the minibatch whose logp_old is its own forward's (first_logp_old="forward"), if any


def plan_step(
    trajectories: Sequence[Trajectory],
    included: list[int],
    keep: list[int],
    weights: torch.Tensor,
    *,
    config: LearnerConfig,
    generator: torch.Generator,
    accelerator: Any,
    lockstep: bool,
    wants_probe: bool,
) -> Plan:
    """Shuffle the batch into ``minibatches`` (one ``randperm`` of the learner's generator) and each minibatch's
    forwarded rows into length-bucketed micro-batches. The logp_old recompute scores exactly those micro-batches
    (same rows, same padding), so the first update's ratios are exactly 1 in fp32. All ranks agree on the counts
    in one gather: sums for the 1/N weighting, maxima for the passes every rank runs in ``lockstep``.

    ``included``: the rows that count in the 1/N mean; ``keep``: those forwarded; ``weights``: ``[N]`` each sample's
    weight in that mean; ``wants_probe``: this rank probes the routing (MoE), agreed by all in lockstep."""
    ranks = accelerator.num_processes
    order = torch.randperm(len(trajectories), generator=generator).tolist()
    included_rows, kept = set(included), set(keep)
    chunks, bucketed = [], []  # per minibatch: its included rows, its forwarded rows in micro-batches
    for m in range(config.minibatches):
        chunk = [i for i in order[m :: config.minibatches] if i in included_rows]
        rows = [i for i in chunk if i in kept]
        chunks.append(chunk)
        bucketed.append(
            [
                [rows[j] for j in bucket]
                for bucket in length_buckets([len(trajectories[i].token_ids) for i in rows], config.micro_batch_tokens)
            ]
        )
    all_buckets = sum(map(len, bucketed))
    agreed = agree(
        accelerator,
        [all_buckets, int(wants_probe)]
        + [
            x
            for chunk, buckets in zip(chunks, bucketed)
            for x in (sum(map(len, buckets)), float(weights[chunk].sum()) if chunk else 0.0, len(buckets))
        ]
        + [all_buckets - len(buckets) for buckets in bucketed],  # scoring passes when minibatch m is not scored
    )
    recompute = config.logp_old == "recompute"
    trained = [m for m in range(config.minibatches) if agreed.sums[2 + 3 * m] > 0]
    # The first update runs on the old policy's weights: its forward's log-probs are the recompute's, so that
    # minibatch is not scored (unless the recompute must record its routing, routing_replay="old_policy").
    reuse = recompute and config.first_logp_old == "forward" and config.routing_replay != "old_policy"
    reused = trained[0] if reuse and trained else None
    score_buckets = [bucket for m, buckets in enumerate(bucketed) if m != reused for bucket in buckets]
    most_passes = agreed.most[0] if reused is None else agreed.most[2 + 3 * config.minibatches + reused]
    minibatches = []
    for m, buckets in enumerate(bucketed):
        trainable, weight_sum, most_buckets = agreed.sums[2 + 3 * m], agreed.sums[3 + 3 * m], agreed.most[4 + 3 * m]
        minibatches.append(
            Minibatch(
                micro_batches=buckets,
                trainable=trainable,
                # The ranks' gradients are averaged (divided by W): with N / W here the update is (1/N) sum over the
                # minibatch's N trajectories on all ranks, whatever each rank holds (paper Eq. 5); N counts weights.
                num_sequences=weight_sum / ranks,
                # The aux loss is a row-weighted mean over the rows forwarded on all ranks (averaged over W like the
                # gradients), so a rank holding fewer rows, or none, does not change its weight.
                forwarded=trainable / ranks,
                # DDP needs one backward per rank (its all-reduce is in the last); FSDP2 / DeepSpeed need all.
                passes=most_buckets if lockstep else max(len(buckets), 1),
            )
        )
    return Plan(
        minibatches=minibatches,
        score_buckets=score_buckets,
        score_passes=most_passes if lockstep and recompute else len(score_buckets),
        probe_routing=agreed.most[1] > 0 if lockstep else wants_probe,
        trained=trained,
        reused=reused,
    )
