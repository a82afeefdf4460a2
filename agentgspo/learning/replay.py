"""The routing one learner step replays (``routing_replay``, MoE): GSPO §5.3's Routing Replay, for the step's forwards.

``"old_policy"`` (the paper's): the logp_old recompute records each row's top-k expert choices and every training
forward of the step replays them; ``"rollout"``: each trajectory's routing recorded at sampling
(``Trajectory.routed_experts``) is replayed in the recompute and the training forwards. The hooks themselves are
:mod:`agentgspo.models.routing_replay`'s; this module keeps one step's choices by trajectory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from agentgspo.core.trajectory import Trajectory
from agentgspo.models.routing_replay import batch_replay, decode_routing, record_routing, replay_routing, split_recorded
from agentgspo.objective.batching import Batch

__all__ = ["StepReplays"]


class StepReplays:
    """One step's recorded routing by trajectory (``[T, L, k]`` expert ids each), replayed in its forwards.

    Args:
        model: the unwrapped policy whose routers record and replay.
    """

    def __init__(self, model: Any):
        self.model = model
        self._by_trajectory: dict[int, torch.Tensor] = {}  # id(trajectory) -> [T, L, k]

    def start(self, trajectories: Sequence[Trajectory], rows: list[int], mode: str) -> None:
        """Begin a step: under ``mode="rollout"`` each trained trajectory's recorded routing (refused where it was
        not recorded); otherwise nothing yet (``"old_policy"`` records during the recompute)."""
        self._by_trajectory = {}
        if mode != "rollout":
            return
        for i in rows:
            t = trajectories[i]
            if t.routed_experts is None:
                raise ValueError(
                    f"routing_replay='rollout': trajectory (group {t.group_id}, sample {t.sample_id}) has "
                    "no recorded routing; sample with HFPolicy(record_routing=True) (vLLM backends do "
                    "not record it here: vLLM's routed-expert output needs its V2 runner with Triton), "
                    "or use routing_replay='old_policy'"
                )
            self._by_trajectory[id(t)] = decode_routing(t.routed_experts)

    def end(self) -> None:
        """Forget the step's routing (the trajectories go with the step)."""
        self._by_trajectory = {}

    def recording(self, rows: Sequence[Trajectory], batch: Batch, score: Callable[[], torch.Tensor]) -> torch.Tensor:
        """``score()`` (the logp_old recompute of ``batch``, collated from ``rows``) with each row's top-k expert
        choices recorded, to replay in the training forwards (``routing_replay="old_policy"``)."""
        with record_routing(self.model) as calls:
            logprobs = score()
        recorded = split_recorded(calls, [len(t.token_ids) for t in rows], batch.input_ids.shape[1])
        self._by_trajectory.update(zip(map(id, rows), recorded))
        return logprobs

    def replaying(self, rows: Sequence[Trajectory], batch: Batch) -> Any:
        """The replay context of a forward over ``rows`` (collated as ``batch``); a no-op when nothing is recorded and
        for placeholder micro-batches (no recorded routing)."""
        if not self._by_trajectory or any(id(t) not in self._by_trajectory for t in rows):
            return contextlib.nullcontext()
        return replay_routing(
            self.model, batch_replay([self._by_trajectory[id(t)] for t in rows], batch.input_ids.shape[1])
        )
