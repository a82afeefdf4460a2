"""Routing volatility (MoE): the share of top-k expert choices an update changes (GSPO §4.3: ~10% per update for
Qwen3-30B-A3B, the reason for Routing Replay and for GSPO's sequence ratio).

The learner probes up to ``volatility_rows`` rows of one step and logs two numbers: ``routing_volatility``, the share
of the probe's (layer, token, slot) choices the first update changes, and ``routing_volatility_step``, the share all
the step's updates change. Where the learner's own forwards see the probed rows at the weights wanted (the logp_old
recompute or the first update's forward before any update, the second update's forward after the first), the
choices are read there from the routers' outputs (:func:`agentgspo.models.routing_replay.record_router_logits`);
otherwise a no-grad pass of the probe's own batch reads them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentgspo.learning.means import Means
from agentgspo.models.routing_replay import find_routers, record_router_logits
from agentgspo.objective.batching import Batch, forward

__all__ = ["RoutingProbe", "start_probe", "supported_routers", "expert_choices", "routing_volatility"]


def supported_routers(model: Any) -> list[torch.nn.Module] | None:
    """The model's top-k routers (:func:`agentgspo.models.routing_replay.find_routers`), or ``None`` for a model
    without a supported one (its router logits are then read from ``output_router_logits``)."""
    try:
        return find_routers(model)
    except ValueError:
        return None


def expert_choices(model: Any, batch: Batch, k: int) -> torch.Tensor:
    """Top-k expert ids per (layer, token) at the batch's real tokens: ``[L, N, k]``."""
    out = model(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False, output_router_logits=True
    )
    real = batch.attention_mask.reshape(-1).bool()  # [B*T]
    return torch.stack([logits[real].topk(k, dim=-1).indices.sort(-1).values for logits in out.router_logits])


def routing_volatility(before: torch.Tensor, after: torch.Tensor) -> float:
    """Share of expert choices in ``before`` (``[L, N, k]``) that are not among the same slot's ``after`` choices."""
    kept = (before[..., :, None] == after[..., None, :]).any(-1)  # [L, N, k]
    return 1.0 - kept.float().mean().item()


def _choices_by_row(
    router_logits: Sequence[torch.Tensor], batch: Batch, rows: list[int], wanted: set[int], k: int
) -> dict[int, torch.Tensor]:
    """Each wanted row's top-k expert ids ``[L, n, k]`` at its real tokens, from one forward's router logits
    (``[B * T, E]`` per MoE layer, as the model flattens the batch), as :func:`expert_choices` takes them."""
    width = batch.input_ids.shape[1]
    real = batch.attention_mask.bool()  # [B, T]
    top = torch.stack([z.detach() for z in router_logits]).topk(k, dim=-1).indices.sort(-1).values  # [L, B*T, k]
    top = top.view(top.shape[0], len(rows), width, k)  # [L, B, T, k]
    return {i: top[:, r, real[r]].cpu() for r, i in enumerate(rows) if i in wanted}  # each [L, n, k]


@dataclass
class RoutingProbe:
    """The top-k expert choices at the real tokens of fixed rows, before the step's first update (``choices[0]``),
    after it (``choices[1]``) and after the last (``choices[2]``), each as ``{row: [L, n_row, k]}``. ``*_pass``
    says which are a no-grad forward of ``batch`` of the probe's alone."""

    rows: list[int]  # the probed trajectories (indices), in order
    batch: Batch  # their collated batch (a placeholder on a rank without any) for the probe's own passes
    before_pass: bool  # choices[0] from a pass of its own (no forward of the old policy reads the rows)
    first_pass: bool  # choices[1] from a pass of its own after the first update (the second does not read them)
    routers: list[torch.nn.Module] | None  # where the choices are read; None: the model's output_router_logits
    k: int  # experts per token
    choices: tuple[dict[int, torch.Tensor], dict[int, torch.Tensor], dict[int, torch.Tensor]] = field(
        default_factory=lambda: ({}, {}, {})
    )

    @contextlib.contextmanager
    def reading(self, updates: int, rows: list[int], batch: Batch) -> Iterator[None]:
        """Read the probe's rows' expert choices after ``updates`` optimizer steps (0: before any; 1: after the
        first) during the forward inside the block, unless read already or taken by a pass of the probe's own."""
        own_pass = updates > 1 or (self.before_pass, self.first_pass)[updates]
        wanted = set() if own_pass else {i for i in rows if i in self.rows and i not in self.choices[updates]}
        if not wanted:
            yield
            return
        with record_router_logits(self.routers) as logits:
            yield
        self.choices[updates].update(_choices_by_row(logits, batch, rows, wanted, self.k))

    def own_pass(self, model: Any) -> dict[int, torch.Tensor]:
        """The probe rows' expert choices under ``model``'s current weights from a no-grad forward of their batch."""
        with torch.no_grad():
            if self.routers is None:  # the router logits the model returns (output_router_logits)
                choices = expert_choices(model, self.batch, self.k)  # [L, N, k]
                if not self.rows:  # a placeholder
                    return {}
                per_row = self.batch.attention_mask.sum(1).tolist()
                return dict(zip(self.rows, (c.cpu() for c in choices.split(per_row, dim=1))))
            with record_router_logits(self.routers) as logits:
                forward(model, self.batch)
        return _choices_by_row(logits, self.batch, self.rows, set(self.rows), self.k) if self.rows else {}

    def after_first_update(self, model: Any) -> None:
        """The choices after the first update, from a pass of the probe's own when no later forward reads them."""
        if self.first_pass:
            self.choices[1].update(self.own_pass(model))

    def record(self, means: Means, optimizer_steps: int, model: Any) -> None:
        """Log the share of the probe's expert choices that changed: per update (``routing_volatility``, the paper's
        figure, §4.3: the share the first update changes) and over the whole step's updates
        (``routing_volatility_step``; one more pass after the last update when there are several), each weighted by
        the probe's (layer, token, slot) choices."""
        if optimizer_steps == 0:
            return
        before, first, last = self.choices
        last.update(self.own_pass(model) if optimizer_steps > 1 else first)
        if self.rows:
            stacked = [torch.cat([choices[i] for i in self.rows], dim=1) for choices in (before, first, last)]
            means.add("routing_volatility", routing_volatility(stacked[0], stacked[1]), stacked[0].numel())
            means.add("routing_volatility_step", routing_volatility(stacked[0], stacked[2]), stacked[0].numel())


def start_probe(
    keep: list[int],
    trained_rows: list[list[int]],
    *,
    volatility_rows: int,
    routers: list[torch.nn.Module] | None,
    k: int,
    recompute: bool,
    replay: bool,
    batch_of: Callable[[list[int]], Batch],
    model: Any,
) -> RoutingProbe:
    """Which rows are probed and where their expert choices are read.

    The rows: up to ``volatility_rows`` of the second trained minibatch's forwarded rows (``trained_rows``, each
    trained minibatch's rows in micro-batch order; the only one's when there is one), so that the logp_old recompute
    (or the first update's own forward) reads their choices before any update and the second update's forward reads
    them after the first: two forwards fewer than probing apart. Where the routers' outputs cannot be read during
    those forwards (``routers`` None) or would not be the live routing of the unreplayed model (``replay``), the rows
    are the first ``volatility_rows`` of ``keep`` and every reading is a pass of its own. ``batch_of(rows)`` collates
    them (a placeholder for none: a rank without rows probes one in lockstep); ``model`` scores the passes."""
    if routers is not None and not replay and trained_rows:
        source = 1 if len(trained_rows) > 1 else 0
        rows = trained_rows[source][:volatility_rows]
        # Before any update the recompute reads every minibatch but the reused one, which its own forward reads
        # (first_logp_old="forward"); the sampler's logp_old reads none but the first update's forward.
        before_pass = not (recompute or source == 0)
        first_pass = source == 0
    else:
        rows, before_pass, first_pass = keep[:volatility_rows], True, True
    probe = RoutingProbe(
        rows=rows, batch=batch_of(rows), before_pass=before_pass, first_pass=first_pass, routers=routers, k=k
    )
    if before_pass:
        probe.choices[0].update(probe.own_pass(model))
    return probe
