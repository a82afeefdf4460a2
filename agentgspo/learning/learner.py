"""The GSPO learner: one rollout batch in, optimizer steps out (arXiv 2507.18071).

    rollout batch -> credit: rows kept, advantages (Eq. 6 per group, or per turn), each sample's 1/N weight
      -> plan: shuffle into `minibatches` (paper: 4; updates 2..4 are off-policy), each into length-bucketed
         micro-batches, the counts agreed by all ranks
      -> logp_old: recomputed over those same micro-batches (recording the routing to replay), or the sampler's (§5.4);
         the first update's is its own forward's, detached (still the old policy's weights: the recompute's value)
         (under ``behaviour_correction`` the recompute is pi_prox, and the sampler's log-probs weigh each unit)
      -> per minibatch: per micro-batch forward -> loss (+ MoE aux, KL) -> backward, gradients accumulated
           -> clip grad norm -> AdamW step -> LR schedule
      -> metrics over ranks (each diagnostic combined as the objective declares, ``objective.diagnostics``)

This module is the algorithm; the plumbing lives beside it, each in a module of its own: what the ranks and
accelerate are owed (:mod:`agentgspo.learning.ranks`: counts agreed in one gather, zero-weight placeholder
micro-batches, gradient accumulation switches), what is refused before training (:mod:`~agentgspo.learning.checks`),
the policy's preparation (:mod:`~agentgspo.learning.preparation`), the metric means (:mod:`~agentgspo.learning.means`),
MoE routing replay and volatility (:mod:`~agentgspo.learning.replay`, :mod:`~agentgspo.learning.volatility`).

Distributed work goes through an ``accelerate.Accelerator``: DDP, FSDP2 (accelerate's, or ``fully_shard`` applied
by :func:`agentgspo.learning.sharding.shard_policy`, which also runs on CPU under gloo) or DeepSpeed ZeRO. Each rank
trains on its own trajectories; gradients are averaged over ranks, and each minibatch's loss is divided by the
trajectory count over all ranks (over W), so the update is the paper's per-trajectory mean over all ranks whatever each
rank holds. Under FSDP2 and DeepSpeed every forward and backward is a collective, so all ranks run the same number of
scoring passes and micro-batches: a rank with fewer (or no) trajectories runs zero-weight placeholder micro-batches.
Gradients are accumulated over micro-batches with accelerate's mechanism (``sync_gradients`` and ``no_sync``), so
DeepSpeed steps its engine once per minibatch.

Precision: train an fp32 policy under bf16 autocast (``Accelerator(mixed_precision="bf16")``) or FSDP2's bf16
``MixedPrecisionPolicy``: fp32 master weights and AdamW state, bf16 compute. accelerate casts a mixed-precision
model's outputs back to fp32, which would build an fp32 ``[B, T, V]`` copy of the logits; the learner keeps the
autocast but drops that cast (the log-probs are upcast chunk by chunk, :mod:`agentgspo.objective.logprobs`).

Trajectories whose advantage is 0 (all-equal groups) contribute exactly nothing to the GSPO objective, so they are
not forwarded (they still count in the 1/N weighting). MoE policies get the router load-balancing loss and a
routing-volatility metric (:mod:`agentgspo.learning.volatility`).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.tensor import DTensor

from agentgspo.core.trajectory import Trajectory
from agentgspo.learning.checks import check_accumulation_and_clipping, check_parameter_precision, check_sampling
from agentgspo.learning.config import LearnerConfig, ObjectiveSettings, loss_for, objective_of, settings_of
from agentgspo.learning.credit import sample_weights, turn_credit
from agentgspo.learning.means import Means, record_declared
from agentgspo.learning.plan import Plan, plan_step
from agentgspo.learning.memory import estimate_for_model
from agentgspo.learning.preparation import (
    compute_dtype_name,
    disable_stochastic_layers,
    enable_activation_checkpointing,
    keep_compute_dtype_outputs,
)
from agentgspo.learning.ranks import (
    accumulating,
    generator_state,
    load_generator_state,
    local_model,
    over_ranks,
    placeholder_batch,
    placeholder_rows,
    step_scheduler,
)
from agentgspo.learning.replay import StepReplays
from agentgspo.learning.sharding import check_deepspeed_processes, is_deepspeed, is_sharded
from agentgspo.learning.volatility import RoutingProbe, routing_volatility, start_probe, supported_routers
from agentgspo.models.routing_replay import find_routers
from agentgspo.objective.advantages import token_advantages
from agentgspo.objective.batching import Batch, collate, forward, logprobs_from_logits, score
from agentgspo.objective.correction import behaviour_diagnostics
from agentgspo.objective.kl import kl_k3
from agentgspo.objective.logprobs import token_entropy
from agentgspo.objective.split_turns import episode_advantages
from agentgspo.objective.terms import TOKEN, TURN

__all__ = [
    "LearnerConfig",
    "ObjectiveSettings",
    "loss_for",
    "objective_of",
    "keep_compute_dtype_outputs",
    "enable_activation_checkpointing",
    "disable_stochastic_layers",
    "routing_volatility",
    "sample_weights",
    "GSPOLearner",
]


@dataclass
class _Credit:
    """Who trains in one step, and with which advantage."""

    included: list[int]  # rows whose stop reason is not excluded (they count in their groups' advantages)
    keep: list[int]  # included rows that are forwarded (A != 0, unless skip_zero_advantage is off or KL is on)
    weights: torch.Tensor  # [N] float64, each sample's weight in the per-trajectory mean
    advantages: torch.Tensor  # [N], or [N, K] per turn (credit="turn"), float64, already scaled by the weights
    stats: dict[str, float]  # zero_variance_frac, num_groups


@dataclass(frozen=True)
class _MicroBatch:
    """One micro-batch's place in its minibatch: the rows, the counts its loss is weighted by, when it syncs."""

    rows: list[int]  # the trajectories it forwards (indices into the step's batch)
    num_sequences: float  # the minibatch's N over all ranks, / W (the 1/N mean)
    forwarded: float  # the minibatch's forwarded rows over all ranks, / W (the aux loss's row-weighted mean)
    sync: bool  # the minibatch's last on this rank: gradients are reduced after its backward
    prefixes: tuple[str, ...] = ("",)  # its diagnostics are logged under each ("mb0_" too for the first update)
    updates: int = 0  # optimizer steps taken before it in this step (the routing probe reads after 0 and 1)
    scale: float = 1.0  # 0: a placeholder, whose backward joins the collectives and changes nothing


class GSPOLearner:
    """Updates a policy from rollout batches with GSPO (or GSPO-token / GRPO).

    Args:
        model: the policy, already passed through ``accelerator.prepare`` (with its optimizer and scheduler), or
            sharded by :func:`agentgspo.learning.sharding.shard_policy` (FSDP2 / DeepSpeed; fp32 weights).
        optimizer: e.g. ``torch.optim.AdamW``.
        accelerator: the ``accelerate.Accelerator`` that prepared them.
        pad_token_id: padding id for collation.
        config: :class:`LearnerConfig`.
        scheduler: stepped once per optimizer step (optional).
        ref_model: frozen reference policy, needed when ``config.kl_coef > 0``.
        seed: seed of the minibatch shuffling generator (its state is part of :meth:`state_dict`).

    ``loss_fn`` is the objective the config selects (:func:`loss_for`: ``OBJECTIVES[objective]``, or the objective
    with the asynchronous correction composed onto it under a ``behaviour_correction``); its ``unit`` decides the
    shape of the advantages and turn ids it is given, its ``diagnostics`` how each diagnostic is combined across
    micro-batches and ranks, and its ``weight_unit`` how the behaviour diagnostics are.
    """

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        accelerator: Any,
        *,
        pad_token_id: int,
        config: LearnerConfig | None = None,
        scheduler: Any = None,
        ref_model: Any = None,
        seed: int = 0,
    ):
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.accelerator = accelerator
        self.pad_token_id = pad_token_id
        self.config = config = config or LearnerConfig()
        if config.kl_coef > 0 and ref_model is None:
            raise ValueError("kl_coef > 0 needs ref_model (a frozen copy of the initial policy)")
        self.ref_model = ref_model
        base = accelerator.unwrap_model(model)
        model_config = getattr(base, "config", None)  # a Hugging Face model's; MoE ones name their top-k
        self.is_moe = hasattr(model_config, "num_experts_per_tok")
        if config.routing_replay != "off":
            find_routers(base)  # a clear error for a model without a supported router
        self._replays = StepReplays(base)
        # The routers whose outputs the routing-volatility probe reads during the learner's own forwards.
        self._routers = supported_routers(base) if self.is_moe else None
        coef = config.router_aux_loss_coef
        self.aux_coef = (
            (getattr(model_config, "router_aux_loss_coef", 0.0) if coef is None else coef) if self.is_moe else 0.0
        )
        self.generator = torch.Generator().manual_seed(seed)
        # The objective this config trains with; its declared diagnostics say how they are logged.
        self.loss_fn = loss_for(config)
        # The objective's hyperparameters from the settings of the same names (eps_low, eps_high for the built-ins).
        settings = settings_of(config) & settings_of(self.loss_fn.hyper)
        self._hyperparameters = {name: getattr(config, name) for name in sorted(settings)}
        self._objective = (
            torch.compile(self._objective_from_logits, dynamic=True) if config.compile else self._objective_from_logits
        )
        self.deepspeed = is_deepspeed(accelerator)
        check_deepspeed_processes(accelerator)
        self.sharded = is_sharded(model) or self.deepspeed
        # Under FSDP2 / DeepSpeed each forward and backward is a collective: every rank runs the same passes.
        self.lockstep = self.sharded and accelerator.num_processes > 1
        sync_each = config.sync_each_micro_batch
        self.sync_each_micro_batch = self.sharded if sync_each is None else sync_each
        check_parameter_precision(optimizer, config, deepspeed=self.deepspeed)
        check_accumulation_and_clipping(accelerator, model, config, deepspeed=self.deepspeed)
        disabled = disable_stochastic_layers(base)
        if disabled:
            kinds = Counter(change.rsplit(".", 1)[1] for change in disabled)
            accelerator.print(
                "learner: set to 0 for its forwards (logp_old and logp must be one deterministic "
                f"function of the weights): {', '.join(f'{k} x{n}' for k, n in kinds.items())}"
            )
        keep_compute_dtype_outputs(accelerator, model)
        if config.activation_checkpointing:
            enable_activation_checkpointing(base)
        if config.memory_estimate and model_config is not None:
            estimate = estimate_for_model(
                base,
                processes=accelerator.num_processes,
                sharded=self.sharded,
                micro_batch_tokens=config.micro_batch_tokens,
                activation_checkpointing=config.activation_checkpointing,
                mixed_precision=compute_dtype_name(accelerator, base),
            )
            accelerator.print(estimate.report())

    def state_dict(self) -> dict[str, Any]:
        """The learner's own state (the minibatch shuffling RNG, every rank's: call it on all ranks together, as
        ``accelerator.save_state`` does); model/optimizer state is checkpointed apart."""
        return generator_state(self.generator, self.accelerator)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (each rank takes its own generator when the state holds every rank's)."""
        load_generator_state(self.generator, self.accelerator, state)

    # ================================================================================================ the algorithm

    def step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """Train on one rollout batch (this rank's trajectories); returns metrics for logging.

        The algorithm: advantages per group (Eq. 6), the old policy's log-probs (scored with the same micro-batch
        layout the updates use, or the sampler's), then per minibatch a forward, the loss and a backward per
        micro-batch and an optimizer step. ``mb0_*`` metrics describe the first update alone, where the policy still
        is the old one: under ``logp_old="recompute"`` its ratios are exactly 1 and nothing clips (by construction with
        ``first_logp_old="forward"``, its logp_old being its forward's; with ``"recompute"`` in fp32 too, and a
        deviation there is train/score drift, not learning).
        """
        started = time.perf_counter()
        credit = self._credit(trajectories)  # who trains, with which advantage (Eq. 6, or per turn)
        plan = plan_step(  # minibatches of micro-batches, their counts agreed by all ranks
            trajectories,
            credit.included,
            credit.keep,
            credit.weights,
            config=self.config,
            generator=self.generator,
            accelerator=self.accelerator,
            lockstep=self.lockstep,
            wants_probe=bool(self.is_moe and self.config.volatility_rows and credit.keep),
        )
        probe = self._routing_probe(trajectories, credit.keep, plan)  # MoE: which rows, where their routing is read
        old, gap = self._old_logprobs(trajectories, credit.keep, plan, probe)  # logp_old; routing to replay, probe's

        means = Means()
        optimizer_steps = 0
        for m in plan.trained:  # every rank agrees: the other minibatches have nothing to learn from
            minibatch = plan.minibatches[m]
            prefixes = ("", "mb0_") if optimizer_steps == 0 else ("",)  # mb0_: the first update's diagnostics too
            minibatch_loss = 0.0
            for p in range(minibatch.passes):
                sync = p == minibatch.passes - 1  # gradients are reduced after the minibatch's last micro-batch
                if p >= len(minibatch.micro_batches):  # nothing (more) here: a zero-weight placeholder joins in
                    self._placeholder_step(sync, means, prefixes)
                    continue
                micro = _MicroBatch(
                    rows=minibatch.micro_batches[p],
                    num_sequences=minibatch.num_sequences,
                    forwarded=minibatch.forwarded,
                    sync=sync,
                    prefixes=prefixes,
                    updates=optimizer_steps,
                )
                gap_of_forward = gap if m == plan.reused else None  # its logp_old is this forward's
                minibatch_loss += self._micro_step(trajectories, micro, old, credit, means, probe, gap_of_forward)
            means.add("loss", minibatch_loss)
            self._clip_and_step(means)  # clip the gradient norm, optimizer step, LR schedule
            optimizer_steps += 1
            if probe is not None and optimizer_steps == 1:
                probe.after_first_update(local_model(self.model))  # unless the second update's forward reads it

        if probe is not None:
            probe.record(means, optimizer_steps, local_model(self.model))
        self._replays.end()
        return self._metrics(means, trajectories, credit, (gap[0], int(gap[1])), optimizer_steps, started)

    # ------------------------------------------------------------------------ credit: who trains, with which A

    def _credit(self, trajectories: Sequence[Trajectory]) -> _Credit:
        """The rows this step trains on and their advantages: episodes with an excluded stop reason are left out,
        the rest get group advantages (Eq. 6) or per-turn ones (``credit="turn"``), scaled by each sample's weight in
        the 1/N mean; rows whose advantage is 0 are not forwarded (``skip_zero_advantage``, unless KL is on)."""
        config = self.config
        included = [i for i, t in enumerate(trajectories) if t.stop_reason not in config.exclude_stop_reasons]
        check_sampling([trajectories[i] for i in included], config)
        weights = sample_weights(trajectories, config.split_turns_weight)  # [N] float64
        advantages, stats = self._advantages(trajectories, included)  # [N] or [N, K]
        n = len(trajectories)
        signal = advantages.nan_to_num(0.0).reshape(n, -1).ne(0).any(-1) if n else advantages.bool()  # [N]
        # Each sample's weight in the 1/N mean (split_turns: 1/K per turn of an episode, the paper's 1/N per
        # episode): min(s A w, clip(s) A w) = w min(s A, clip(s) A) for w > 0, so scaling A by w is exact.
        advantages = advantages * weights.reshape(n, *([1] * (advantages.dim() - 1))) if n else advantages
        keep = [i for i in included if signal[i] or not config.skip_zero_advantage or config.kl_coef > 0]
        return _Credit(included=included, keep=keep, weights=weights, advantages=advantages, stats=stats)

    def _advantages(
        self, trajectories: Sequence[Trajectory], included: list[int]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """``[N]`` group advantages (Eq. 6 over episodes), or ``[N, K]`` per turn (``credit="turn"``); excluded
        episodes stay at 0."""
        advantages = torch.zeros(len(trajectories), dtype=torch.float64)  # [N]
        stats: dict[str, float] = {"zero_variance_frac": 0.0}
        if not included:
            return advantages, stats
        if self.config.credit == "turn":
            return turn_credit(trajectories, included, baseline=self.config.turn_baseline)  # [N, K]
        # The samples of a split_turns episode share its advantage (agentgspo.objective.split_turns)
        advantages[included], stats = episode_advantages([trajectories[i] for i in included])
        return advantages, stats

    # ------------------------------------------------------------------------ logp_old: the old policy's log-probs

    def _old_logprobs(
        self, trajectories: Sequence[Trajectory], keep: list[int], plan: Plan, probe: RoutingProbe | None
    ) -> tuple[dict[int, torch.Tensor], list[float]]:
        """logp_old of every row the recompute scores (the policy that sampled, scored before any update of this
        batch; every kept row but those of ``plan.reused``, whose forward gives its own), and the summed
        |recompute - sampler| gap over its sampled tokens with their count (``[sum, count]``; the reused
        minibatch's forward adds its own). Records the routing to replay (``routing_replay``) and the probe's expert
        choices before any update on the way. In lockstep a rank that has scored its own rows runs placeholder
        passes."""
        config, device = self.config, self.accelerator.device
        old: dict[int, torch.Tensor] = {}
        self._replays.start(trajectories, keep, config.routing_replay)
        gap = [0.0, 0]
        recompute = config.logp_old == "recompute"
        for p in range(plan.score_passes):
            if p >= len(plan.score_buckets):  # this rank has scored its own: a placeholder keeps the ranks in step
                self._score_no_grad(local_model(self.model), placeholder_batch(self.pad_token_id, device))
                continue
            rows = plan.score_buckets[p]
            picked = [trajectories[i] for i in rows]
            batch = collate(picked, self.pad_token_id).to(device)
            if recompute and config.routing_replay == "old_policy":  # the paper's Routing Replay records here
                logp = self._replays.recording(
                    picked, batch, lambda: self._score_no_grad(local_model(self.model), batch)
                )
            elif recompute:
                with self._replays.replaying(picked, batch), self._reading_routing(probe, 0, rows, batch):
                    logp = self._score_no_grad(local_model(self.model), batch)
                _add_sampler_gap(gap, logp, batch)
            else:
                logp = batch.sampler_logprobs
            for r, i in enumerate(rows):
                old[i] = logp[r, : len(trajectories[i].token_ids)]
        return old, gap

    @torch.no_grad()
    def _score_no_grad(self, model: Any, batch: Batch) -> torch.Tensor:
        return score(model, batch, temperature=self.config.temperature)[0]

    # -------------------------------------------------------------------- one micro-batch: forward, loss, backward

    def _micro_step(
        self,
        trajectories: Sequence[Trajectory],
        micro: _MicroBatch,
        old: dict[int, torch.Tensor],
        credit: _Credit,
        means: Means,
        probe: RoutingProbe | None = None,
        gap: list[float] | None = None,
    ) -> float:
        """Forward, loss and backward of one micro-batch; returns its share of the minibatch loss. Its diagnostics go
        to ``means`` under each of ``micro.prefixes``. Rows without a logp_old in ``old`` (``plan.reused``: the first
        update, on the old policy's weights) take their forward's log-probs, detached, and add their sampler gap to
        ``gap``. The probe's rows have their expert choices read after ``micro.updates`` optimizer steps (0 or 1)."""
        rows = micro.rows
        batch, old_logprobs, adv, turn_ids = self._loss_inputs(trajectories, rows, old, credit.advantages)
        # A decoupled loss's mu: the sampler's log-probs (old_logprobs is then pi_prox, the recompute).
        behaviour = batch.sampler_logprobs if self.config.behaviour_correction != "none" else None  # [B, T]
        accumulation = accumulating(
            self.accelerator, self.model, micro.sync, sync_each_micro_batch=self.sync_each_micro_batch
        )
        with accumulation, self._replays.replaying([trajectories[i] for i in rows], batch):
            with self._reading_routing(probe, micro.updates, rows, batch):
                outputs = forward(self.model, batch, output_router_logits=self.aux_coef > 0)
            # Compiled, N is a tensor so that a new minibatch size does not recompile.
            n = (
                torch.tensor(float(micro.num_sequences), device=adv.device)
                if self.config.compile
                else micro.num_sequences
            )
            loss, diagnostics, logprobs = self._objective(
                outputs.logits, batch.input_ids, old_logprobs, adv, batch.loss_mask, n, turn_ids, behaviour
            )  # [], {...}, [B, T]
            if old_logprobs is None and gap is not None:
                _add_sampler_gap(gap, logprobs.detach(), batch)
            # A zero-weight placeholder's penalties are not the policy's: they stay out of the logged means.
            total = self._with_penalties(
                loss,
                outputs,
                logprobs,
                batch,
                credit.weights[rows],
                num_sequences=micro.num_sequences,
                share=len(rows) / micro.forwarded,
                means=means if micro.scale else Means(),
            )
            self.accelerator.backward(total * micro.scale)
        if micro.scale == 0.0:
            return 0.0
        self._record(diagnostics, outputs.logits, batch, means, micro.prefixes)
        return loss.detach().item()

    # -------------------------------------------------------------------- the objective and its penalties

    def _loss_inputs(
        self,
        trajectories: Sequence[Trajectory],
        rows: list[int],
        old: dict[int, torch.Tensor],
        advantages: torch.Tensor,
    ) -> tuple[Batch, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """One micro-batch as the loss takes it: the collated rows, their logp_old ``[B, T]`` (``None`` for rows
        whose logp_old is their own forward's: ``plan.reused``), their advantages and ``turn_ids`` ``[B, T]`` (each
        sampled token's turn; ``None`` unless the loss clips per turn). Per-turn advantages (``credit="turn"``,
        ``[B, K]``) go as they are to a loss clipping per turn and as each token's turn advantage ``[B, T]``
        (Eq. 13-14's A_it) to a loss clipping per token."""
        device = self.accelerator.device
        batch = collate([trajectories[i] for i in rows], self.pad_token_id).to(device)
        old_logprobs = None
        if rows[0] in old:  # a micro-batch's rows are one minibatch's: all scored, or all reused
            old_logprobs = torch.zeros_like(batch.sampler_logprobs)  # [B, T]
            for r, i in enumerate(rows):
                old_logprobs[r, : old[i].shape[0]] = old[i]
        adv = advantages[rows].to(device)  # [B], or [B, K] per turn (credit="turn")
        clip_unit = self.loss_fn.unit
        if clip_unit is not TURN and adv.dim() == 1:
            return batch, old_logprobs, adv, None
        turn_ids = torch.full_like(batch.input_ids, -1)  # [B, T], each sampled token's turn index
        for r, i in enumerate(rows):
            for k, (start, end) in enumerate(trajectories[i].turn_spans):
                turn_ids[r, start:end] = k
        if adv.dim() == 2 and clip_unit is TOKEN:  # gspo_token / grpo: A_it = its turn's advantage
            adv = token_advantages(adv.nan_to_num(0.0), turn_ids)  # [B, T]
        return batch, old_logprobs, adv, turn_ids if clip_unit is TURN else None

    def _objective_from_logits(
        self,
        logits: torch.Tensor,
        input_ids: torch.Tensor,
        old_logprobs: torch.Tensor | None,
        advantages: torch.Tensor,
        loss_mask: torch.Tensor,
        num_sequences: int | torch.Tensor,
        turn_ids: torch.Tensor | None = None,
        behaviour_logprobs: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        """Logits ``[B, T, V]`` -> (loss, diagnostics, log-probs ``[B, T]``); the region ``config.compile`` compiles.
        ``old_logprobs`` ``None``: the forward is the old policy's (the step's first update), so logp_old is its own
        log-probs, detached (exactly what the recompute would score on these rows and this padding);
        ``turn_ids`` ``[B, T]`` (a loss clipping per turn): each trained token's assistant-turn index;
        ``behaviour_logprobs`` ``[B, T]`` (a decoupled loss): mu, the sampler's log-probs."""
        config = self.config
        logprobs = logprobs_from_logits(logits, input_ids, temperature=config.temperature, fused=config.compile)
        if old_logprobs is None:
            old_logprobs = logprobs.detach()  # [B, T]
        turns = () if turn_ids is None else (turn_ids,)
        loss, diagnostics = self.loss_fn(
            logprobs,
            old_logprobs,
            advantages,
            loss_mask,
            *turns,
            **self._hyperparameters,
            num_sequences=num_sequences,
            **self._behaviour_arguments(behaviour_logprobs),
        )
        return loss, diagnostics, logprobs

    def _behaviour_arguments(self, behaviour_logprobs: torch.Tensor | None) -> dict[str, Any]:
        """A decoupled loss's behaviour log-probs and correction settings; nothing for the other losses."""
        if behaviour_logprobs is None:
            return {}
        config = self.config
        return {
            "behaviour_logprobs": behaviour_logprobs,
            "correction": config.behaviour_correction,
            "tis_cap": config.behaviour_tis_cap,
            "mask_low": config.behaviour_mask_low,
            "mask_high": config.behaviour_mask_high,
        }

    def _with_penalties(
        self,
        loss: torch.Tensor,
        outputs: Any,
        logprobs: torch.Tensor,
        batch: Batch,
        row_weights: torch.Tensor,
        *,
        num_sequences: float,
        share: float,
        means: Means,
    ) -> torch.Tensor:
        """``loss`` plus the MoE router load-balancing loss and the k3 KL penalty, each logged to ``means``.

        The aux loss is weighted by ``share``, the micro-batch's share of the rows forwarded in this minibatch (over
        all ranks, / W), so the minibatch sum is a mean of weight ``aux_coef`` (skipped A = 0 rows are not forwarded
        and must not dilute it). The KL is aggregated like the loss: each sample's weight in the 1/N mean."""
        rows = batch.input_ids.shape[0]
        total = loss
        if self.aux_coef > 0 and getattr(outputs, "aux_loss", None) is not None:
            total = total + self.aux_coef * outputs.aux_loss * share
            means.add("aux_loss", outputs.aux_loss.item(), rows)
        if self.config.kl_coef > 0:
            with torch.no_grad():
                ref_logprobs = self._score_no_grad(self.ref_model, batch)
            kl = kl_k3(logprobs, ref_logprobs, batch.loss_mask)  # [B]
            total = total + self.config.kl_coef * (kl * row_weights.to(kl.device, kl.dtype)).sum() / num_sequences
            means.add("kl", float(kl.detach().mean()), rows)
        return total

    def _record(
        self,
        diagnostics: dict[str, torch.Tensor],
        logits: torch.Tensor,
        batch: Batch,
        means: Means,
        prefixes: tuple[str, ...],
    ) -> None:
        """One micro-batch's diagnostics into ``means``, each combined as the objective declares
        (``loss_fn.diagnostics``: weighted by the count it is a share or mean of, or its extreme kept), then the
        behaviour correction's (not per prefix), the trained tokens and the policy's entropy."""
        for prefix in prefixes:
            record_declared(self.loss_fn.diagnostics, diagnostics, means, prefix)
        if self.config.behaviour_correction != "none":
            declared = behaviour_diagnostics(self.loss_fn.weight_unit, self.config.behaviour_correction)
            record_declared(declared, diagnostics, means)
        tokens = float(batch.loss_mask.sum())  # trained tokens (an objective need not report num_tokens)
        means.count("trained_tokens", tokens)
        entropy = token_entropy(
            logits[:, :-1].detach(), temperature=self.config.temperature, loss_mask=batch.loss_mask[:, 1:]
        )
        means.add("entropy", float(entropy), tokens)

    # ----------------------------------------------------------------------------------------- the optimizer step

    def _clip_and_step(self, means: Means) -> None:
        """Clip the gradient norm (``max_grad_norm``; DeepSpeed clips inside its engine, configured from the same
        setting), log it, take the optimizer and scheduler steps, zero the gradients."""
        config, accelerator = self.config, self.accelerator
        if self.deepspeed:
            self.optimizer.step()  # the engine's step (accelerate's DeepSpeed optimizer wrapper): it clips
            grad_norm = self.model.get_global_grad_norm()
            if grad_norm is not None:
                means.add("grad_norm", float(grad_norm))
        else:
            if config.max_grad_norm is not None:
                grad_norm = accelerator.clip_grad_norm_(self.model.parameters(), config.max_grad_norm)
                if grad_norm is not None:
                    grad_norm = grad_norm.full_tensor() if isinstance(grad_norm, DTensor) else grad_norm
                    means.add("grad_norm", float(grad_norm))
            self.optimizer.step()
        if self.scheduler is not None:
            step_scheduler(self.scheduler, self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)

    # ---------------------------------------------------------------------------------------------- metrics

    def _metrics(
        self,
        means: Means,
        trajectories: Sequence[Trajectory],
        credit: _Credit,
        gap: tuple[float, int],
        optimizer_steps: int,
        started: float,
    ) -> dict[str, float]:
        """The step's metrics over all ranks: the micro-batches' diagnostics, the sampler gap, the batch's counts."""
        gap_sum, gap_tokens = gap
        if gap_tokens:
            means.add("sampler_logprob_gap", gap_sum / gap_tokens, gap_tokens)
        means.add("zero_variance_frac", credit.stats["zero_variance_frac"], credit.stats.get("num_groups", 0))
        means.count("trained_sequences", len(credit.keep))
        means.count("excluded_sequences", len(trajectories) - len(credit.included))
        metrics = over_ranks(self.accelerator, means).result()
        # With every advantage 0 nothing is forwarded, and these are exactly 0 (zero objective, nothing clipped).
        declared = {name for name, _ in self.loss_fn.diagnostics}
        clipped = [
            name for name in ("clip_frac_seq", "clip_frac_token", "clip_frac_low", "clip_frac_high") if name in declared
        ]
        for name in ("loss", *clipped, "zero_variance_frac"):
            metrics.setdefault(name, 0.0)
        metrics.update(
            optimizer_steps=optimizer_steps,
            lr=self.optimizer.param_groups[0]["lr"],
            learner_seconds=time.perf_counter() - started,
        )
        return metrics

    # ================================================================================================ plumbing

    def _placeholder_step(self, sync: bool, means: Means, prefixes: tuple[str, ...]) -> None:
        """A zero-weight micro-batch (a forward and a backward of ``0 * loss``) that a rank with nothing (more) to
        train runs so that its collectives pair with the other ranks' (FSDP2, DeepSpeed; DDP's one backward)."""
        trajectories, rows, old, advantages, weights = placeholder_rows(self.pad_token_id, self.accelerator.device)
        credit = _Credit(included=rows, keep=rows, weights=weights, advantages=advantages, stats={})
        micro = _MicroBatch(rows=rows, num_sequences=1.0, forwarded=1, sync=sync, prefixes=prefixes, scale=0.0)
        self._micro_step(trajectories, micro, old, credit, means)

    def _routing_probe(self, trajectories: Sequence[Trajectory], keep: list[int], plan: Plan) -> RoutingProbe | None:
        """The step's routing-volatility probe (MoE; :func:`agentgspo.learning.volatility.start_probe`), or ``None``."""
        if not plan.probe_routing:
            return None
        config, device = self.config, self.accelerator.device
        trained_rows = [[i for bucket in plan.minibatches[m].micro_batches for i in bucket] for m in plan.trained]

        def batch_of(rows: list[int]) -> Batch:
            if not rows:  # a rank without rows probes a placeholder in lockstep
                return placeholder_batch(self.pad_token_id, device)
            return collate([trajectories[i] for i in rows], self.pad_token_id).to(device)

        return start_probe(
            keep,
            trained_rows,
            volatility_rows=config.volatility_rows,
            routers=self._routers,
            k=self.accelerator.unwrap_model(self.model).config.num_experts_per_tok,
            recompute=config.logp_old == "recompute",
            replay=config.routing_replay != "off",
            batch_of=batch_of,
            model=local_model(self.model),
        )

    def _reading_routing(self, probe: RoutingProbe | None, updates: int, rows: list[int], batch: Batch) -> Any:
        """The probe's reading of ``rows``' expert choices during the forward inside (nothing without a probe)."""
        return contextlib.nullcontext() if probe is None else probe.reading(updates, rows, batch)


def _add_sampler_gap(gap: list[float], logprobs: torch.Tensor, batch: Batch) -> None:
    """Add ``sum |logp_old - sampler log-prob|`` over the batch's sampled tokens and their count to ``gap``."""
    difference = (logprobs - batch.sampler_logprobs).abs()  # [B, T]
    gap[0] += float(torch.where(batch.loss_mask, difference, torch.zeros_like(difference)).sum())
    gap[1] += int(batch.loss_mask.sum())
