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
routing-volatility metric: the share of (token, layer, slot) top-k expert choices of the same tokens that the first
update changes (the paper reports ~10% for Qwen3-30B-A3B), read during the recompute and the second update's
forward, and over all the step's updates (one no-grad forward after the last).
"""

from __future__ import annotations

import contextlib
from collections import Counter
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentgspo.objective.advantages import token_advantages, turn_advantages
from agentgspo.objective.batching import Batch, collate, forward, length_buckets, logprobs_from_logits, score
from agentgspo.objective.logprobs import token_entropy
from agentgspo.objective.correction import behaviour_diagnostics
from agentgspo.objective.kl import kl_k3
from agentgspo.objective.terms import TOKEN, TURN
from agentgspo.models.routing_replay import (
    batch_replay,
    decode_routing,
    find_routers,
    record_router_logits,
    record_routing,
    replay_routing,
    split_recorded,
)
from agentgspo.learning.config import LearnerConfig, ObjectiveSettings, loss_for, objective_of, settings_of
from agentgspo.learning.means import Means, record_declared
from agentgspo.learning.memory import estimate_for_model
from agentgspo.learning.preparation import (
    compute_dtype_name,
    disable_stochastic_layers,
    enable_activation_checkpointing,
    keep_compute_dtype_outputs,
)
from agentgspo.learning.sharding import check_deepspeed_processes, is_deepspeed, is_sharded
from agentgspo.objective.split_turns import episode_advantages
from agentgspo.core.trajectory import Trajectory, sampler_logprobs_mismatch

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


@dataclass
class _Agreed:
    """Per-step counts agreed by all ranks: ``sums`` over ranks and ``most`` (the maximum of any rank)."""

    sums: list[float]
    most: list[int]


@dataclass
class _Minibatch:
    """One optimizer step's work on this rank, with the counts every rank agreed on."""

    micro_batches: list[list[int]]  # this rank's forwarded rows, length-bucketed
    trainable: float  # rows forwarded in this minibatch on all ranks (0: every rank skips it)
    num_sequences: float  # the minibatch's sample weights on all ranks, / W: the paper's N for the 1/N mean
    forwarded: float  # trainable / W: the denominator of the aux loss's row-weighted mean
    passes: int  # micro-batch passes this rank runs; in lockstep the most of any rank, placeholders past its own


@dataclass
class _Plan:
    """One step's layout: the minibatches, and the logp_old recompute's passes over the same micro-batches."""

    minibatches: list[_Minibatch]
    score_buckets: list[list[int]]  # the micro-batches the recompute scores, in order (all but `reused`'s)
    score_passes: int  # scoring passes this rank runs (in lockstep with recompute: the most of any rank)
    probe_routing: bool  # whether this rank runs the routing-volatility passes (MoE)
    trained: list[int]  # the minibatches some rank trains on (agreed), in order: one optimizer step each
    reused: int | None  # the minibatch whose logp_old is its own forward's (first_logp_old="forward"), if any


@dataclass
class _RoutingProbe:
    """The routing-volatility probe: the top-k expert choices at the real tokens of fixed rows, before the step's
    first update (``choices[0]``), after it (``choices[1]``) and after the last (``choices[2]``), each as
    ``{row: [L, n_row, k]}``. Where the learner's own forwards see those rows at those weights (the logp_old
    recompute or the first update's forward, then the second update's forward), the choices are read there;
    ``*_pass`` says which are a no-grad forward of ``batch`` of the probe's alone."""

    rows: list[int]  # the probed trajectories (indices), in order
    batch: Batch  # their collated batch (a placeholder on a rank without any) for the probe's own passes
    before_pass: bool  # choices[0] from a pass of its own (no forward of the old policy reads the rows)
    first_pass: bool  # choices[1] from a pass of its own after the first update (the second does not read them)
    choices: tuple[dict[int, torch.Tensor], dict[int, torch.Tensor], dict[int, torch.Tensor]] = field(
        default_factory=lambda: ({}, {}, {})
    )


def _supported_routers(model: Any) -> list[torch.nn.Module] | None:
    """The model's top-k routers (:func:`agentgspo.models.routing_replay.find_routers`), or ``None`` for a model
    without a supported one."""
    try:
        return find_routers(model)
    except ValueError:
        return None


def _expert_choices(model: Any, batch: Batch, k: int) -> torch.Tensor:
    """Top-k expert ids per (layer, token) at the batch's real tokens: ``[L, N, k]``."""
    out = model(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False, output_router_logits=True
    )
    real = batch.attention_mask.reshape(-1).bool()  # [B*T]
    return torch.stack([logits[real].topk(k, dim=-1).indices.sort(-1).values for logits in out.router_logits])


def _add_sampler_gap(gap: list[float], logprobs: torch.Tensor, batch: Batch) -> None:
    """Add ``sum |logp_old - sampler log-prob|`` over the batch's sampled tokens and their count to ``gap``."""
    difference = (logprobs - batch.sampler_logprobs).abs()  # [B, T]
    gap[0] += float(torch.where(batch.loss_mask, difference, torch.zeros_like(difference)).sum())
    gap[1] += int(batch.loss_mask.sum())


def routing_volatility(before: torch.Tensor, after: torch.Tensor) -> float:
    """Share of expert choices in ``before`` (``[L, N, k]``) that are not among the same slot's ``after`` choices."""
    kept = (before[..., :, None] == after[..., None, :]).any(-1)  # [L, N, k]
    return 1.0 - kept.float().mean().item()


def sample_weights(trajectories: Sequence[Trajectory], split_turns_weight: str = "episode") -> torch.Tensor:
    """Each sample's weight in the per-trajectory mean (paper Eq. 5), ``[N]`` float64: 1 for whole episodes; for
    the K samples of one ``split_turns`` episode 1/K each under ``"episode"`` (every episode weighs 1/N, as in the
    paper), 1 under ``"turn"``.

    >>> from agentgspo.core.trajectory import Trajectory
    >>> turns = [Trajectory(metadata={"episode_turn": k, "episode_turns": 4}) for k in range(4)]
    >>> sample_weights([Trajectory(), *turns]).tolist()
    [1.0, 0.25, 0.25, 0.25, 0.25]
    """
    if split_turns_weight == "turn":
        return torch.ones(len(trajectories), dtype=torch.float64)
    return torch.tensor([1.0 / t.metadata.get("episode_turns", 1) for t in trajectories], dtype=torch.float64)


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
        self.config = config or LearnerConfig()
        if self.config.kl_coef > 0 and ref_model is None:
            raise ValueError("kl_coef > 0 needs ref_model (a frozen copy of the initial policy)")
        self.ref_model = ref_model
        base = accelerator.unwrap_model(model)
        model_config = getattr(base, "config", None)
        self.is_moe = hasattr(model_config, "num_experts_per_tok")
        if self.config.routing_replay != "off":
            find_routers(base)  # a clear error for a model without a supported router
        # The routers whose outputs the routing-volatility probe reads during the learner's own forwards.
        self._routers = _supported_routers(base) if self.is_moe else None
        coef = self.config.router_aux_loss_coef
        self.aux_coef = (
            (getattr(model_config, "router_aux_loss_coef", 0.0) if coef is None else coef) if self.is_moe else 0.0
        )
        self.generator = torch.Generator().manual_seed(seed)
        self._replays: dict[int, torch.Tensor] = {}  # id(trajectory) -> [T, L, k] experts replayed in this step
        # The objective this config trains with; its declared diagnostics say how they are logged.
        self.loss_fn = loss_for(self.config)
        # The objective's hyperparameters from the settings of the same names (eps_low, eps_high for the built-ins).
        settings = settings_of(self.config) & settings_of(self.loss_fn.hyper)
        self._hyperparameters = {name: getattr(self.config, name) for name in sorted(settings)}
        self._objective = (
            torch.compile(self._objective_from_logits, dynamic=True)
            if self.config.compile
            else self._objective_from_logits
        )
        self.deepspeed = is_deepspeed(accelerator)
        check_deepspeed_processes(accelerator)
        self.sharded = is_sharded(model) or self.deepspeed
        # Under FSDP2 / DeepSpeed each forward and backward is a collective: every rank runs the same passes.
        self.lockstep = self.sharded and accelerator.num_processes > 1
        sync_each = self.config.sync_each_micro_batch
        self.sync_each_micro_batch = self.sharded if sync_each is None else sync_each
        self._check_parameter_precision()
        self._check_accumulation_and_clipping()
        disabled = disable_stochastic_layers(base)
        if disabled:
            kinds = Counter(change.rsplit(".", 1)[1] for change in disabled)
            accelerator.print(
                "learner: set to 0 for its forwards (logp_old and logp must be one deterministic "
                f"function of the weights): {', '.join(f'{k} x{n}' for k, n in kinds.items())}"
            )
        keep_compute_dtype_outputs(accelerator, model)
        if self.config.activation_checkpointing:
            enable_activation_checkpointing(base)
        if self.config.memory_estimate and model_config is not None:
            self._print_memory_estimate(base)

    def _check_parameter_precision(self) -> None:
        """Refuse bf16/fp16 parameters under a torch optimizer (AdamW would round small updates away)."""
        if self.config.allow_low_precision_params or self.deepspeed:  # DeepSpeed keeps its own fp32 master copy
            return
        low = {
            p.dtype
            for group in self.optimizer.param_groups
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

    def _check_accumulation_and_clipping(self) -> None:
        """Refuse accelerate's own gradient accumulation (``accelerator.backward`` would divide every loss by its
        step count: a silent rescale of the learner's 1/N) and a DeepSpeed engine whose clipping is not
        ``max_grad_norm`` (DeepSpeed clips inside its step and ignores ``clip_grad_norm_``)."""
        steps = getattr(self.accelerator, "gradient_accumulation_steps", 1)
        if steps != 1:
            raise ValueError(
                f"accelerate's gradient_accumulation_steps is {steps} (`accelerate launch "
                "--gradient_accumulation_steps`, ACCELERATE_GRADIENT_ACCUMULATION_STEPS or Accelerator(...)): "
                "accelerator.backward would divide every loss by it, rescaling the paper's per-trajectory mean. "
                "Set it to 1; the learner accumulates over its own micro-batches (lower "
                "LearnerConfig.micro_batch_tokens for less memory per forward)"
            )
        if self.deepspeed:
            clipping = float(self.model.gradient_clipping() or 0.0)
            wanted = float(self.config.max_grad_norm or 0.0)
            if clipping != wanted:
                raise ValueError(
                    f"DeepSpeed clips gradients at {clipping} (its config's gradient_clipping; 0 is off) "
                    f"but max_grad_norm is {self.config.max_grad_norm}: DeepSpeed ignores "
                    "clip_grad_norm_. Build the engine with shard_policy(..., max_grad_norm=...) or set "
                    "gradient_clipping in the DeepSpeed config to the same value"
                )

    def _print_memory_estimate(self, base: Any) -> None:
        """Print :func:`agentgspo.learning.memory.estimate_memory` for this run on the main process."""
        estimate = estimate_for_model(
            base,
            processes=self.accelerator.num_processes,
            sharded=self.sharded,
            micro_batch_tokens=self.config.micro_batch_tokens,
            activation_checkpointing=self.config.activation_checkpointing,
            mixed_precision=compute_dtype_name(self.accelerator, base),
        )
        self.accelerator.print(estimate.report())

    def state_dict(self) -> dict[str, Any]:
        """The learner's own state (the minibatch shuffling RNG); model/optimizer state is checkpointed apart.

        With several processes it holds every rank's generator (gathered: call it on all ranks together, as
        ``accelerator.save_state`` does), because accelerate writes a registered object's state from the main process
        only, and each rank shuffles with its own stream.
        """
        state = self.generator.get_state()  # [S] uint8
        if self.accelerator.num_processes == 1:
            return {"generator": state}
        gathered = self.accelerator.gather(state[None].to(self.accelerator.device)).cpu()  # [W, S]
        return {"generator": state, "rank_generators": list(gathered)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (each rank takes its own generator when the state holds every rank's)."""
        per_rank = state.get("rank_generators")
        if per_rank is None:
            self.generator.set_state(state["generator"])
            return
        if len(per_rank) != self.accelerator.num_processes:
            raise ValueError(
                f"learner state saved by {len(per_rank)} processes cannot resume exactly on "
                f"{self.accelerator.num_processes}; resume with the same number of processes"
            )
        self.generator.set_state(per_rank[self.accelerator.process_index].clone())

    @torch.no_grad()
    def _score_no_grad(self, model: Any, batch: Batch) -> torch.Tensor:
        return score(model, batch, temperature=self.config.temperature)[0]

    def _local_model(self) -> Any:
        """The policy for the no-grad passes only some ranks run (logp_old, routing volatility).

        A DDP module's forward is a collective: the first forward after a synced backward broadcasts the buffers
        (e.g. rotary ``inv_freq``) from rank 0. Ranks score different numbers of batches (none where every group is
        all-equal), so through DDP these broadcasts pair with another rank's gradient all-reduce and deadlock; the
        wrapped module computes the same values without one.
        """
        model = self.model
        inner = getattr(model, "_orig_mod", model)  # under torch.compile(DDP(...))
        return inner.module if isinstance(inner, torch.nn.parallel.DistributedDataParallel) else model

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
        plan = self._plan(trajectories, credit)  # minibatches of micro-batches, their counts agreed by all ranks
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
                if p < len(minibatch.micro_batches):
                    minibatch_loss += self._micro_step(
                        trajectories,
                        minibatch.micro_batches[p],
                        old,
                        credit.advantages,
                        credit.weights,
                        num_sequences=minibatch.num_sequences,
                        forwarded=minibatch.forwarded,
                        scale=1.0,
                        sync=sync,
                        means=means,
                        prefixes=prefixes,
                        probe=probe,
                        updates=optimizer_steps,
                        gap=gap if m == plan.reused else None,  # its logp_old is this forward's
                    )
                else:  # nothing (more) on this rank: a zero-weight placeholder joins the collectives
                    self._placeholder_step(sync, means, prefixes)
            means.add("loss", minibatch_loss)
            self._clip_and_step(means)  # clip the gradient norm, optimizer step, LR schedule
            optimizer_steps += 1
            if probe is not None and optimizer_steps == 1 and probe.first_pass:
                probe.choices[1].update(self._probe_pass(probe))  # no later forward reads the probe's rows

        self._routing_volatility(means, probe, optimizer_steps)
        self._replays = {}
        return self._metrics(means, trajectories, credit, (gap[0], int(gap[1])), optimizer_steps, started)

    # ------------------------------------------------------------------------ credit: who trains, with which A

    def _credit(self, trajectories: Sequence[Trajectory]) -> _Credit:
        """The rows this step trains on and their advantages: episodes with an excluded stop reason are left out,
        the rest get group advantages (Eq. 6) or per-turn ones (``credit="turn"``), scaled by each sample's weight in
        the 1/N mean; rows whose advantage is 0 are not forwarded (``skip_zero_advantage``, unless KL is on)."""
        config = self.config
        included = [i for i, t in enumerate(trajectories) if t.stop_reason not in config.exclude_stop_reasons]
        self._check_sampling([trajectories[i] for i in included])
        weights = sample_weights(trajectories, config.split_turns_weight)  # [N] float64
        advantages, stats = self._advantages(trajectories, included)  # [N] or [N, K]
        n = len(trajectories)
        signal = advantages.nan_to_num(0.0).reshape(n, -1).ne(0).any(-1) if n else advantages.bool()  # [N]
        # Each sample's weight in the 1/N mean (split_turns: 1/K per turn of an episode, the paper's 1/N per
        # episode): min(s A w, clip(s) A w) = w min(s A, clip(s) A) for w > 0, so scaling A by w is exact.
        advantages = advantages * weights.reshape(n, *([1] * (advantages.dim() - 1))) if n else advantages
        keep = [i for i in included if signal[i] or not config.skip_zero_advantage or config.kl_coef > 0]
        return _Credit(included=included, keep=keep, weights=weights, advantages=advantages, stats=stats)

    def _check_sampling(self, trajectories: Sequence[Trajectory]) -> None:
        """Refuse trajectories sampled at another temperature than the learner scores, and sampler log-probs that
        are not the learner's quantity under ``logp_old="sampler"`` or a ``behaviour_correction`` (the rule:
        :func:`agentgspo.core.trajectory.sampler_logprobs_mismatch`). Either would bias every ratio silently."""
        temperature = self.config.temperature
        for t in trajectories:
            where = f"trajectory (group {t.group_id}, sample {t.sample_id})"
            if t.sampling is not None and t.sampling.get("temperature") != temperature:
                raise ValueError(
                    f"{where} was sampled at temperature {t.sampling.get('temperature')} but the learner "
                    f"scores softmax(logits / {temperature}) (LearnerConfig.temperature): the ratios "
                    "would compare two different policies. Sample and learn at one temperature "
                    "(a recipe's --temperature sets both)"
                )
            if self.config.logp_old == "sampler":
                why = sampler_logprobs_mismatch(t.sampling, temperature)
                if why is not None:
                    raise ValueError(
                        f"logp_old='sampler': {where}: {why}. Its log-probs are not what the learner "
                        "computes, so every sequence ratio would be off by that gap (with GSPO's 3e-4 "
                        "band, clipping whole sequences silently). Use logp_old='recompute' "
                        "(--logp-old recompute), or sample with top_p=1 and top_k=0"
                    )
            self._check_behaviour_logprobs(t, where)

    def _check_behaviour_logprobs(self, trajectory: Trajectory, where: str) -> None:
        """Under a ``behaviour_correction`` the sampler's log-probs are mu: refuse them where they are not the
        learner's quantity (:func:`agentgspo.core.trajectory.sampler_logprobs_mismatch`)."""
        correction = self.config.behaviour_correction
        if correction == "none":
            return
        why = sampler_logprobs_mismatch(trajectory.sampling, self.config.temperature)
        if why is not None:
            raise ValueError(
                f"behaviour_correction={correction!r}: {where}: {why}. Its log-probs are not the policy's "
                "(log-probs renormalised over a top-p nucleus exceed the policy's, so w = pi_prox / mu < 1 for "
                "every sequence), and the behaviour weights would measure that gap, not staleness. Sample with "
                "top_p=1 and top_k=0 (full-vocabulary log-probs at the learner's temperature), or use "
                "behaviour_correction='none'"
            )

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
            return self._turn_credit(trajectories, included)  # [N, K]
        # The samples of a split_turns episode share its advantage (agentgspo.objective.split_turns)
        advantages[included], stats = episode_advantages([trajectories[i] for i in included])
        return advantages, stats

    def _turn_credit(
        self, trajectories: Sequence[Trajectory], included: list[int]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Per-turn advantages ``[N, K]`` (``credit="turn"``; rows not included are 0) from each episode's step
        rewards; a clear error where they are missing or disagree with the episode's reward."""
        seen = set()
        for i in included:
            t = trajectories[i]
            if len(t.turn_rewards) != t.num_turns:
                raise ValueError(
                    f"credit='turn': trajectory (group {t.group_id}, sample {t.sample_id}) has "
                    f"{len(t.turn_rewards)} turn rewards for {t.num_turns} turns; it was recorded without "
                    "per-turn rewards (an older rollout): sample again or use credit='trajectory'"
                )
            if abs(sum(t.turn_rewards) - t.reward) > 1e-6 * max(1.0, abs(t.reward)):
                raise ValueError(
                    f"credit='turn': trajectory (group {t.group_id}, sample {t.sample_id}) has reward "
                    f"{t.reward} but its turn rewards sum to {sum(t.turn_rewards)} (a group reward "
                    "function changed it?); per-turn credit would ignore that change: use "
                    "credit='trajectory'"
                )
            if (t.group_id, t.sample_id) in seen:
                raise ValueError(
                    "credit='turn' needs whole episodes; these are split_turns samples (one turn each): "
                    "use credit='trajectory' with history='split_turns'"
                )
            seen.add((t.group_id, t.sample_id))
        per_turn, stats = turn_advantages(
            [trajectories[i].turn_rewards for i in included],
            torch.tensor([trajectories[i].group_id for i in included]),
            baseline=self.config.turn_baseline,
        )  # [n, K]
        advantages = torch.zeros(len(trajectories), max(per_turn.shape[1], 1), dtype=torch.float64)  # [N, K]
        advantages[included, : per_turn.shape[1]] = per_turn.to(torch.float64)
        return advantages, stats

    # ------------------------------------------------------------- the plan: minibatches agreed across ranks

    def _plan(self, trajectories: Sequence[Trajectory], credit: _Credit) -> _Plan:
        """Shuffle the batch into ``minibatches`` (one ``randperm`` of the learner's generator) and each minibatch's
        forwarded rows into length-bucketed micro-batches. The logp_old recompute scores exactly those micro-batches
        (same rows, same padding), so the first update's ratios are exactly 1 in fp32. All ranks agree on the counts
        in one gather: sums for the 1/N weighting, maxima for the passes every rank runs in lockstep."""
        config, ranks = self.config, self.accelerator.num_processes
        order = torch.randperm(len(trajectories), generator=self.generator).tolist()
        included, kept = set(credit.included), set(credit.keep)
        chunks, bucketed = [], []  # per minibatch: its included rows, its forwarded rows in micro-batches
        for m in range(config.minibatches):
            chunk = [i for i in order[m :: config.minibatches] if i in included]
            rows = [i for i in chunk if i in kept]
            chunks.append(chunk)
            bucketed.append(
                [
                    [rows[j] for j in bucket]
                    for bucket in length_buckets(
                        [len(trajectories[i].token_ids) for i in rows], config.micro_batch_tokens
                    )
                ]
            )
        all_buckets = sum(map(len, bucketed))
        wants_probe = bool(self.is_moe and config.volatility_rows and credit.keep)
        agreed = self._agree(
            [all_buckets, int(wants_probe)]
            + [
                x
                for chunk, buckets in zip(chunks, bucketed)
                for x in (sum(map(len, buckets)), float(credit.weights[chunk].sum()) if chunk else 0.0, len(buckets))
            ]
            + [all_buckets - len(buckets) for buckets in bucketed]  # scoring passes when minibatch m is not scored
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
                _Minibatch(
                    micro_batches=buckets,
                    trainable=trainable,
                    # The ranks' gradients are averaged (divided by W): with N / W here the update is (1/N) sum over the
                    # minibatch's N trajectories on all ranks, whatever each rank holds (paper Eq. 5); N counts weights.
                    num_sequences=weight_sum / ranks,
                    # The aux loss is a row-weighted mean over the rows forwarded on all ranks (averaged over W like the
                    # gradients), so a rank holding fewer rows, or none, does not change its weight.
                    forwarded=trainable / ranks,
                    # DDP needs one backward per rank (its all-reduce is in the last); FSDP2 / DeepSpeed need all.
                    passes=most_buckets if self.lockstep else max(len(buckets), 1),
                )
            )
        return _Plan(
            minibatches=minibatches,
            score_buckets=score_buckets,
            score_passes=most_passes if self.lockstep and recompute else len(score_buckets),
            probe_routing=agreed.most[1] > 0 if self.lockstep else wants_probe,
            trained=trained,
            reused=reused,
        )

    def _agree(self, local: list[int]) -> _Agreed:
        """Every rank's ``local`` counts, summed and maximised over the ranks (one gather; itself without ranks)."""
        if self.accelerator.num_processes == 1:
            return _Agreed(sums=[float(x) for x in local], most=list(local))
        gathered = self.accelerator.gather(
            torch.tensor([local], dtype=torch.float64, device=self.accelerator.device)
        ).cpu()  # [W, K]
        return _Agreed(sums=gathered.sum(0).tolist(), most=[int(x) for x in gathered.max(0).values.tolist()])

    # ------------------------------------------------------------------- logp_old, routing replay, placeholders

    def _old_logprobs(
        self, trajectories: Sequence[Trajectory], keep: list[int], plan: _Plan, probe: _RoutingProbe | None
    ) -> tuple[dict[int, torch.Tensor], list[float]]:
        """logp_old of every row the recompute scores (the policy that sampled, scored before any update of this
        batch; every kept row but those of ``plan.reused``, whose forward gives its own), and the summed
        |recompute - sampler| gap over its sampled tokens with their count (``[sum, count]``; the reused
        minibatch's forward adds its own). Records the routing to replay (``routing_replay``) and the probe's expert
        choices before any update on the way. In lockstep a rank that has scored its own rows runs placeholder
        passes."""
        config, device = self.config, self.accelerator.device
        old: dict[int, torch.Tensor] = {}
        self._replays = self._rollout_routing(trajectories, keep) if config.routing_replay == "rollout" else {}
        gap = [0.0, 0]
        recompute = config.logp_old == "recompute"
        for p in range(plan.score_passes):
            if p >= len(plan.score_buckets):  # this rank has scored its own: a placeholder keeps the ranks in step
                self._score_no_grad(self._local_model(), self._placeholder_batch())
                continue
            rows = plan.score_buckets[p]
            batch = collate([trajectories[i] for i in rows], self.pad_token_id).to(device)
            if recompute and config.routing_replay == "old_policy":
                logp = self._score_recording_routing(trajectories, rows, batch)
            elif recompute:
                with (
                    self._replaying([trajectories[i] for i in rows], batch),
                    self._reading_routing(probe, 0, rows, batch),
                ):
                    logp = self._score_no_grad(self._local_model(), batch)
                _add_sampler_gap(gap, logp, batch)
            else:
                logp = batch.sampler_logprobs
            for r, i in enumerate(rows):
                old[i] = logp[r, : len(trajectories[i].token_ids)]
        return old, gap

    def _score_recording_routing(
        self, trajectories: Sequence[Trajectory], rows: list[int], batch: Batch
    ) -> torch.Tensor:
        """The logp_old recompute of ``batch`` under ``routing_replay="old_policy"`` (the paper's Routing Replay):
        each row's top-k expert choices are kept to replay in the training forwards."""
        with record_routing(self.accelerator.unwrap_model(self.model)) as calls:
            logp = self._score_no_grad(self._local_model(), batch)
        recorded = split_recorded(calls, [len(trajectories[i].token_ids) for i in rows], batch.input_ids.shape[1])
        self._replays.update(zip((id(trajectories[i]) for i in rows), recorded))
        return logp

    def _rollout_routing(self, trajectories: Sequence[Trajectory], rows: list[int]) -> dict[int, torch.Tensor]:
        """Each trained trajectory's recorded ``[T, L, k]`` expert ids by ``id(trajectory)``
        (``routing_replay="rollout"``)."""
        routings = {}
        for i in rows:
            t = trajectories[i]
            if t.routed_experts is None:
                raise ValueError(
                    f"routing_replay='rollout': trajectory (group {t.group_id}, sample {t.sample_id}) has "
                    "no recorded routing; sample with HFPolicy(record_routing=True) (vLLM backends do "
                    "not record it here: vLLM's routed-expert output needs its V2 runner with Triton), "
                    "or use routing_replay='old_policy'"
                )
            routings[id(t)] = decode_routing(t.routed_experts)
        return routings

    def _replaying(self, batch_trajectories: Sequence[Trajectory], batch: Batch) -> Any:
        """The routing-replay context of a forward over ``batch_trajectories`` (collated as ``batch``); a no-op when
        replay is off and for placeholder micro-batches (no recorded routing)."""
        if not self._replays or any(id(t) not in self._replays for t in batch_trajectories):
            return contextlib.nullcontext()
        return replay_routing(
            self.accelerator.unwrap_model(self.model),
            batch_replay([self._replays[id(t)] for t in batch_trajectories], batch.input_ids.shape[1]),
        )

    def _placeholder_rows(
        self, device: Any
    ) -> tuple[list[Trajectory], list[int], dict[int, torch.Tensor], torch.Tensor, torch.Tensor]:
        """(trajectories, rows, logp_old, advantages, weights) of a zero-weight micro-batch: two padding tokens,
        A = 0."""
        placeholder = Trajectory()
        placeholder.append_forced([self.pad_token_id] * 2)
        return (
            [placeholder],
            [0],
            {0: torch.zeros(2, device=device)},
            torch.zeros(1, dtype=torch.float64),
            torch.ones(1, dtype=torch.float64),
        )

    def _placeholder_batch(self) -> Batch:
        """A two-token batch for a no-grad pass a rank runs only to keep the collectives in step."""
        trajectories = self._placeholder_rows(self.accelerator.device)[0]
        return collate(trajectories, self.pad_token_id).to(self.accelerator.device)

    def _placeholder_step(self, sync: bool, means: Means, prefixes: tuple[str, ...]) -> None:
        """A zero-weight micro-batch (a forward and a backward of ``0 * loss``) that a rank with nothing (more) to
        train runs so that its collectives pair with the other ranks' (FSDP2, DeepSpeed; DDP's one backward)."""
        self._micro_step(
            *self._placeholder_rows(self.accelerator.device),
            num_sequences=1.0,
            forwarded=1,
            scale=0.0,
            sync=sync,
            means=means,
            prefixes=prefixes,
        )

    # -------------------------------------------------------------------- one micro-batch: forward, loss, backward

    def _micro_step(
        self,
        trajectories: Sequence[Trajectory],
        rows: list[int],
        old: dict[int, torch.Tensor],
        advantages: torch.Tensor,
        weights: torch.Tensor,
        *,
        num_sequences: float,
        forwarded: float,
        scale: float,
        sync: bool,
        means: Means,
        prefixes: tuple[str, ...] = ("",),
        probe: _RoutingProbe | None = None,
        updates: int = 0,
        gap: list[float] | None = None,
    ) -> float:
        """Forward, loss and backward of one micro-batch; returns its share of the minibatch loss. Its diagnostics go
        to ``means`` under each of ``prefixes`` (``"mb0_"`` too for the first update's). Rows without a logp_old in
        ``old`` (``plan.reused``: the first update, on the old policy's weights) take their forward's log-probs,
        detached, and add their sampler gap to ``gap``. The probe's rows have their expert choices read after
        ``updates`` optimizer steps (0 or 1)."""
        batch, old_logprobs, adv, turn_ids = self._loss_inputs(trajectories, rows, old, advantages)
        # A decoupled loss's mu: the sampler's log-probs (old_logprobs is then pi_prox, the recompute).
        behaviour = batch.sampler_logprobs if self.config.behaviour_correction != "none" else None  # [B, T]
        with self._accumulating(sync), self._replaying([trajectories[i] for i in rows], batch):
            with self._reading_routing(probe, updates, rows, batch):
                outputs = forward(self.model, batch, output_router_logits=self.aux_coef > 0)
            # Compiled, N is a tensor so that a new minibatch size does not recompile.
            n = torch.tensor(float(num_sequences), device=adv.device) if self.config.compile else num_sequences
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
                weights[rows],
                num_sequences=num_sequences,
                share=len(rows) / forwarded,
                means=means if scale else Means(),
            )
            self.accelerator.backward(total * scale)
        if scale == 0.0:
            return 0.0
        self._record(diagnostics, outputs.logits, batch, means, prefixes)
        return loss.detach().item()

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

    @contextlib.contextmanager
    def _accumulating(self, sync: bool) -> Iterator[None]:
        """Gradient accumulation through accelerate: ``sync_gradients`` is what ``accelerator.accumulate`` sets (a
        DeepSpeed engine steps only when it is True), and ``no_sync`` skips the gradient reduction of the micro-batches
        before the last, unless ``sync_each_micro_batch``. The sharded model of
        :func:`agentgspo.learning.sharding.shard_policy` (not one accelerate prepared) gets FSDP2's own switch, as
        accelerate's ``no_sync`` does for its FSDP2."""
        accelerator = self.accelerator
        accelerator.gradient_state._set_sync_gradients(sync)
        try:
            if sync or self.sync_each_micro_batch or accelerator.num_processes == 1:
                yield
            elif is_sharded(self.model) and not getattr(accelerator, "is_fsdp2", False):
                self.model.set_requires_gradient_sync(False)
                try:
                    yield
                finally:
                    self.model.set_requires_gradient_sync(True)
            else:
                with accelerator.no_sync(self.model):
                    yield
        finally:
            accelerator.gradient_state._set_sync_gradients(True)

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
                    grad_norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
                    means.add("grad_norm", float(grad_norm))
            self.optimizer.step()
        if self.scheduler is not None:
            self._step_scheduler()
        self.optimizer.zero_grad(set_to_none=True)

    def _step_scheduler(self) -> None:
        """One scheduler step per optimizer step. accelerate's prepared scheduler steps ``num_processes`` times per
        call (it assumes a data loader whose global batch grew with the ranks), which would end a warm-up of 8
        optimizer steps after 4 on 2 ranks; step the scheduler it wraps once, unless the optimizer skipped its step
        (fp16 overflow), as accelerate does."""
        from accelerate.scheduler import AcceleratedScheduler

        if not isinstance(self.scheduler, AcceleratedScheduler):
            self.scheduler.step()
        elif not getattr(self.optimizer, "step_was_skipped", False):
            self.scheduler.scheduler.step()

    # ------------------------------------------------------------------------------------------ metrics, MoE probe

    def _routing_probe(self, trajectories: Sequence[Trajectory], keep: list[int], plan: _Plan) -> _RoutingProbe | None:
        """Routing volatility (MoE): which rows are probed and where their expert choices are read.

        The rows: up to ``volatility_rows`` of the second trained minibatch's forwarded rows (of the only one when
        there is one), in micro-batch order, so that the logp_old recompute (or the first update's own forward)
        reads their choices before any update and the second update's forward reads them after the first: two
        forwards fewer than probing apart. Where the routers' outputs cannot be read during those forwards (a
        router :func:`~agentgspo.models.routing_replay.find_routers` does not know) or would not be the live
        routing of the unreplayed model (``routing_replay`` on), the rows are the first ``volatility_rows`` kept
        rows and every reading is a pass of its own. A rank without rows probes a placeholder (lockstep)."""
        if not plan.probe_routing:
            return None
        config = self.config
        if self._routers is not None and config.routing_replay == "off" and plan.trained:
            source = plan.trained[1] if len(plan.trained) > 1 else plan.trained[0]
            rows = [i for bucket in plan.minibatches[source].micro_batches for i in bucket][: config.volatility_rows]
            # Before any update the recompute reads every minibatch but the reused one, which its own forward reads
            # (first_logp_old="forward"); the sampler's logp_old reads none but the first update's forward.
            before_pass = not (config.logp_old == "recompute" or source == plan.trained[0])
            first_pass = source == plan.trained[0]
        else:
            rows, before_pass, first_pass = keep[: config.volatility_rows], True, True
        picks = [trajectories[i] for i in rows]
        batch = collate(picks, self.pad_token_id).to(self.accelerator.device) if picks else self._placeholder_batch()
        probe = _RoutingProbe(rows=rows, batch=batch, before_pass=before_pass, first_pass=first_pass)
        if before_pass:
            probe.choices[0].update(self._probe_pass(probe))
        return probe

    @contextlib.contextmanager
    def _reading_routing(
        self, probe: _RoutingProbe | None, updates: int, rows: list[int], batch: Batch
    ) -> Iterator[None]:
        """Read the probe's rows' expert choices after ``updates`` optimizer steps (0: before any; 1: after the
        first) during the forward inside the block, unless read already or taken by a pass of the probe's own."""
        own_pass = probe is None or updates > 1 or (probe.before_pass, probe.first_pass)[updates]
        wanted = set() if own_pass else {i for i in rows if i in probe.rows and i not in probe.choices[updates]}
        if not wanted:
            yield
            return
        with record_router_logits(self._routers) as logits:
            yield
        probe.choices[updates].update(self._choices_by_row(logits, batch, rows, wanted))

    def _choices_by_row(
        self, router_logits: Sequence[torch.Tensor], batch: Batch, rows: list[int], wanted: set[int]
    ) -> dict[int, torch.Tensor]:
        """Each wanted row's top-k expert ids ``[L, n, k]`` at its real tokens, from one forward's router logits
        (``[B * T, E]`` per MoE layer, as the model flattens the batch), as :func:`_expert_choices` takes them."""
        k = self.accelerator.unwrap_model(self.model).config.num_experts_per_tok
        width = batch.input_ids.shape[1]
        real = batch.attention_mask.bool()  # [B, T]
        top = torch.stack([z.detach() for z in router_logits]).topk(k, dim=-1).indices.sort(-1).values  # [L, B*T, k]
        top = top.view(top.shape[0], len(rows), width, k)  # [L, B, T, k]
        return {i: top[:, r, real[r]].cpu() for r, i in enumerate(rows) if i in wanted}  # each [L, n, k]

    def _probe_pass(self, probe: _RoutingProbe) -> dict[int, torch.Tensor]:
        """The probe rows' expert choices under the current weights from a no-grad forward of their own batch."""
        with torch.no_grad():
            if self._routers is None:  # the router logits the model returns (output_router_logits)
                k = self.accelerator.unwrap_model(self.model).config.num_experts_per_tok
                choices = _expert_choices(self._local_model(), probe.batch, k)  # [L, N, k]
                if not probe.rows:  # a placeholder
                    return {}
                per_row = probe.batch.attention_mask.sum(1).tolist()
                return dict(zip(probe.rows, (c.cpu() for c in choices.split(per_row, dim=1))))
            with record_router_logits(self._routers) as logits:
                forward(self._local_model(), probe.batch)
        return self._choices_by_row(logits, probe.batch, probe.rows, set(probe.rows)) if probe.rows else {}

    def _routing_volatility(self, means: Means, probe: _RoutingProbe | None, optimizer_steps: int) -> None:
        """Log the share of the probe's expert choices that changed: per update (``routing_volatility``, the paper's
        figure, §4.3: the share the first update changes) and over the whole step's updates
        (``routing_volatility_step``; one more pass after the last update when there are several), each weighted by
        the probe's (layer, token, slot) choices."""
        if probe is None or optimizer_steps == 0:
            return
        before, first, last = probe.choices
        if optimizer_steps > 1:
            last.update(self._probe_pass(probe))
        else:
            last.update(first)
        if probe.rows:
            stacked = [torch.cat([choices[i] for i in probe.rows], dim=1) for choices in (before, first, last)]
            means.add("routing_volatility", routing_volatility(stacked[0], stacked[1]), stacked[0].numel())
            means.add("routing_volatility_step", routing_volatility(stacked[0], stacked[2]), stacked[0].numel())

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
        metrics = self._over_ranks(means).result()
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

    def _over_ranks(self, means: Means) -> Means:
        """This step's metrics over all ranks (every rank gets the same), so what rank 0 logs describes the whole
        batch: weighted means, extremes and counts of every rank's micro-batches. One small collective per step."""
        if self.accelerator.num_processes == 1:
            return means
        from accelerate.utils import gather_object

        merged = Means()
        for part in gather_object([means]):
            merged.merge(part)
        return merged
