"""The learner's settings: :class:`LearnerConfig`, each setting documented once (the training config inherits them, so
each is a flag of every recipe), and the objective it names (:func:`objective_of`, :func:`loss_for`).

The first settings, the objective and its hyperparameters, are generated from the registered objectives
(:class:`ObjectiveSettings`: one setting per hyperparameter name, their union); ``"auto"`` values are resolved here,
once, in ``__post_init__``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, make_dataclass
from typing import Any, Literal

from agentgspo.core.settings import check_settings, setting
from agentgspo.core.trajectory import EXCLUDED_STOPS, STOP_REASONS
from agentgspo.objective import decoupled, load_objective
from agentgspo.objective.correction import BEHAVIOUR_FRACTIONS, BEHAVIOUR_MASK, BEHAVIOUR_TIS_CAP
from agentgspo.objective.registry import Objective, ObjectiveError, hyperparameters
from agentgspo.objective.terms import SEQUENCE

__all__ = ["ObjectiveSettings", "LearnerConfig", "objective_of", "loss_for"]


def _objective_settings() -> type:
    """The objective and one setting per hyperparameter name of the registered objectives (their union: one name,
    one flag, e.g. ``--eps-low`` for every objective with a clip band), each empty by default: the chosen
    objective's own default (config.json records the value used). A hyperparameter of an objective loaded by
    ``package.module:name`` that no registered objective declares takes its default."""
    settings = [
        (
            "objective",
            str,
            setting(
                "gspo",
                "'gspo' (sequence ratio, the paper), 'gspo_turn' (a ratio per assistant turn), 'gspo_token' (Eq. "
                "13-14), 'grpo' (the token-ratio baseline, with its own clip band 0.2 / 0.27), or your own as "
                "'package.module:name' (agentgspo.objective.registry); config.json records it, resume imports it",
            ),
        )
    ]
    for name, declared in hyperparameters().items():
        by_default: dict[Any, list[str]] = {}
        for objective, default in declared.defaults.items():
            by_default.setdefault(default, []).append(objective)
        defaults = "; ".join(f"{value:g} for {' and '.join(names)}" for value, names in by_default.items())
        help_text = f"{declared.help} (empty: the objective's, {defaults}); config.json records the value used"
        settings.append((name, declared.kind | None, setting(None, help_text)))
    generated = make_dataclass("ObjectiveSettings", settings)
    generated.__module__, generated.__qualname__ = __name__, "ObjectiveSettings"  # importable: configs pickle
    return generated


ObjectiveSettings = _objective_settings()


@dataclass
class LearnerConfig(ObjectiveSettings):
    """Settings of :class:`GSPOLearner`, each documented (defaults cite the paper where it gives one). Declared
    once: the training config inherits these fields (:class:`agentgspo.training.train.TrainConfig`), so each is a
    flag of every recipe (``--eps-low``, ``--kl-coef``, ...), and :meth:`from_settings` reads them back. The first
    ones, the objective and its hyperparameters, come from the registered objectives (:class:`ObjectiveSettings`)."""

    minibatches: int = setting(
        4, "optimizer steps per rollout batch (paper §5.1: 4; updates 2..4 are off-policy)", at_least=1
    )
    micro_batch_tokens: int = setting(
        8192, "padded tokens per forward (gradients accumulate over micro-batches)", at_least=1
    )
    logp_old: Literal["auto", "recompute", "sampler"] = setting(
        "auto",
        "'recompute' (score the batch with the policy before updating), 'sampler' (reuse the sampler's log-probs, "
        "paper §5.4; saves a forward pass) or 'auto' (recompute when the training loop's max_staleness > 0, else "
        "its synchronous_logp_old; the learner alone: recompute); config.json records the value used",
    )
    behaviour_correction: Literal["auto", "none", "tis", "mask"] = setting(
        "auto",
        "for a sampler some versions stale (asynchronous training): 'auto' ('tis' when the training loop's "
        "max_staleness > 0, else 'none'), 'none' (the ratio against logp_old, the "
        "paper's) or AReaL's decoupled objective: the ratio and its clip against pi_prox (the logp_old recompute: "
        "the weights at the start of the step), each sequence (turn with unit turn, token with grpo) weighed by "
        "w = pi_prox / mu (mu: the sampler's log-probs; a geometric mean over the unit's tokens), 'tis' truncating "
        "w at behaviour_tis_cap or 'mask' dropping units whose w is outside [behaviour_mask_low, "
        "behaviour_mask_high]; needs logp_old recompute",
    )
    behaviour_tis_cap: float = setting(
        BEHAVIOUR_TIS_CAP,
        "behaviour_correction tis: the cap C of min(w, C) (5.0: SkyRL's sequence TIS, for the geometric-mean "
        "weight of gspo, gspo_token and unit turn; grpo weighs each token, where SkyRL caps token TIS at 2.0)",
    )
    behaviour_mask_low: float = setting(
        BEHAVIOUR_MASK[0],
        "behaviour_correction mask: units whose w = pi_prox / mu is below this are dropped (0.99: SkyRL's "
        "geometric sequence mask; grpo's w is per token and needs a far wider band)",
    )
    behaviour_mask_high: float = setting(
        BEHAVIOUR_MASK[1], "behaviour_correction mask: units whose w is above this are dropped (1.01: SkyRL's)"
    )
    temperature: float = setting(1.0, "sampling temperature; the learner scores softmax(logits / T)")
    max_grad_norm: float | None = setting(1.0, "gradient clipping norm (empty: off)")
    kl_coef: float = setting(
        0.0, "weight of a k3 KL penalty to a frozen reference model (0: off, the paper's authors' advice)"
    )
    router_aux_loss_coef: float | None = setting(
        None, "MoE router load-balancing loss weight (empty: the model config's value; 0: off)"
    )
    volatility_rows: int = setting(
        16,
        "MoE: trajectories of the routing-volatility metric (0: off); their expert choices before the first "
        "update and after it are read during the logp_old recompute and the second minibatch's forward, and one "
        "no-grad forward of them after the last update gives routing_volatility_step",
    )
    first_logp_old: Literal["forward", "recompute"] = setting(
        "forward",
        "logp_old='recompute': the first update's logp_old is its own forward's log-probs, detached ('forward': "
        "the weights are still the old policy's, so they are the recompute's values, bit for bit where the "
        "forward is deterministic, and one scoring pass is saved; TRL does the same on-policy) or scored by the "
        "recompute too ('recompute': its mb0_ratio_* then show any train/score drift); routing_replay='old_policy' "
        "always recomputes (the recompute records the routing to replay)",
    )
    skip_zero_advantage: bool = setting(
        True, "do not forward trajectories with A = 0 (exact for the objective: they contribute nothing; saves compute)"
    )
    exclude_stop_reasons: tuple[str, ...] = setting(
        EXCLUDED_STOPS,
        "stop reasons whose episodes carry no signal about the policy (a crashed env, a failed "
        "verifier, a sampler failure): left out of the groups' advantages and of the loss (default: "
        "those agentgspo.core.trajectory.ENDINGS marks untrained)",
    )
    split_turns_weight: Literal["episode", "turn"] = setting(
        "episode",
        "--history split_turns: 'episode' (each episode weighs 1/N, its K turn samples 1/K each: the "
        "paper's per-trajectory mean, Eq. 5) or 'turn' (each turn sample weighs 1/N: long episodes weigh "
        "more)",
    )
    turn_baseline: Literal["episode", "turn"] = setting(
        "episode",
        "--credit turn: 'episode' (each turn's return-to-go against the group's mean episode return, "
        "scaled by its std: equals Eq. 6 when only the end is rewarded) or 'turn' (against the group's "
        "returns-to-go at the same turn, over the episodes that reached it)",
    )
    compile: bool = setting(
        False,
        "torch.compile the region from the logits to the loss, so the [B, T, V] fp32 "
        "upcast is fused instead of stored (a GPU win; the model itself is compiled by "
        "accelerate's dynamo_backend)",
    )
    activation_checkpointing: bool = setting(
        False,
        "recompute each decoder layer in the backward (Hugging Face gradient_checkpointing_enable, "
        "non-reentrant): less memory for about one more forward; long episodes need it at 30B",
    )
    sync_each_micro_batch: bool | None = setting(
        None,
        "reduce gradients after every micro-batch (true) or only after a minibatch's last one (false); empty: "
        "true when the policy is sharded (FSDP2, DeepSpeed), false under DDP",
    )
    allow_low_precision_params: bool = setting(
        False,
        "train parameters stored in bf16/fp16 with a torch optimizer (AdamW on bf16 weights rounds away "
        "updates below the weight's resolution: keep fp32 master weights and compute in bf16 instead)",
    )
    memory_estimate: bool = setting(
        True, "print the estimated memory per process when the learner is built (agentgspo.learning.memory)"
    )
    unit: Literal["trajectory", "turn"] = setting(
        "trajectory",
        "what one GSPO ratio covers: 'trajectory' (every assistant token, tool outputs masked, Eq. 7) "
        "or 'turn' (each assistant turn its own ratio and clip, weighing 1/K of its trajectory); "
        "objective gspo only",
    )
    credit: Literal["trajectory", "turn"] = setting(
        "trajectory",
        "'trajectory' (one advantage per episode, Eq. 6) or 'turn' (per-turn return-to-go advantages "
        "from each step's reward; with gspo_token, grpo or --unit turn)",
    )
    routing_replay: Literal["off", "rollout", "old_policy"] = setting(
        "off",
        "MoE: 'off', 'rollout' (R3: replay the sampler's expert choices; the hf backend records them) or "
        "'old_policy' (the paper's Routing Replay: the logp_old recompute's); the replayed experts' weights "
        "come from the live router",
    )

    @classmethod
    def from_settings(cls, settings: Any) -> LearnerConfig:
        """The learner's settings out of a config that inherits them (a recipe's training config)."""
        values = asdict(settings)
        return cls(**{spec.name: values[spec.name] for spec in fields(cls)})

    def __post_init__(self) -> None:
        if self.logp_old == "auto":  # the training loop resolves it by its max_staleness; alone: recompute
            self.logp_old = "recompute"
        check_settings(self)  # each value among its Literal's, or within its declared bounds
        if self.unit == "turn" and self.objective not in ("gspo", "gspo_turn"):
            raise ValueError(
                f"unit='turn' is a GSPO sequence-ratio setting; objective {self.objective!r} has its own unit: use "
                "objective='gspo' (or 'gspo_turn') or unit='trajectory'"
            )
        trained = objective_of(self)  # an unknown or unloadable objective is an error naming it here
        if self.credit == "turn" and trained.unit is SEQUENCE:
            raise ValueError(
                f"credit='turn' with objective={self.objective!r} and unit='trajectory': one trajectory ratio "
                "cannot carry per-turn advantages; use objective='gspo_token' (Eq. 13-14), unit='turn' "
                "or credit='trajectory'"
            )
        unknown = sorted(set(self.exclude_stop_reasons) - set(STOP_REASONS))
        if unknown:
            raise ValueError(f"exclude_stop_reasons: unknown stop reasons {unknown}; expected some of {STOP_REASONS}")
        if self.routing_replay == "old_policy" and self.logp_old != "recompute":
            raise ValueError(
                "routing_replay='old_policy' replays the routing of the logp_old recompute; set "
                "logp_old='recompute' or use routing_replay='rollout'"
            )
        self._check_behaviour_correction(trained)
        self._resolve_hyperparameters(trained)
        self.exclude_stop_reasons = tuple(self.exclude_stop_reasons)  # a JSON or YAML list reads as a list
        if self.temperature <= 0:
            raise ValueError(
                f"temperature: expected > 0 (the learner scores softmax(logits / T)), got "
                f"{self.temperature}; for greedy rollouts train with T=1"
            )

    def _resolve_hyperparameters(self, trained: Objective) -> None:
        """The hyperparameters used, so a run's config.json records them: the objective's defaults where a setting
        is empty (paper §5.1 for the clip bands); a value given for a hyperparameter the objective does not declare
        is an error naming the objectives that do."""
        declared = settings_of(trained.hyper)
        for name, hyperparameter in hyperparameters().items():
            value = getattr(self, name)
            if name in declared:
                if value is None:
                    value = getattr(trained.hyper, name)
                setattr(self, name, float(value) if hyperparameter.kind is float else value)  # a YAML 1 is 1.0
            elif value is not None:
                raise ValueError(
                    f"{name}: objective {self.objective!r} does not take it ({name} is a hyperparameter of "
                    f"{', '.join(sorted(hyperparameter.defaults))}); leave it empty or choose one of those objectives"
                )

    def _check_behaviour_correction(self, trained: Objective) -> None:
        """``behaviour_correction`` needs the recompute (it is pi_prox), a decoupled form of the objective and unit,
        and a cap or band that keeps on-policy units (w = 1) as they are."""
        if self.behaviour_correction == "auto":  # the training loop picks by its max_staleness; alone: none
            self.behaviour_correction = "none"
        correction = self.behaviour_correction
        if correction not in ("none", *BEHAVIOUR_FRACTIONS):
            raise ValueError(
                f"behaviour_correction: expected 'none' or one of {sorted(BEHAVIOUR_FRACTIONS)}, got {correction!r}"
            )
        if correction == "none":
            return
        if self.logp_old != "recompute":
            raise ValueError(
                f"behaviour_correction={correction!r} clips against pi_prox, the logp_old recompute (the learner's "
                "weights at the start of the step), and weighs by pi_prox / mu with mu the sampler's log-probs; "
                "with logp_old='sampler' there is no pi_prox (pi_prox = mu: w = 1, and the clip is against the "
                "stale sampler). Set logp_old='recompute' (--logp-old recompute) or behaviour_correction='none'"
            )
        try:
            decoupled(trained)
        except ObjectiveError as exc:
            raise ValueError(f"behaviour_correction={correction!r}: {exc}") from exc
        if correction == "tis" and not self.behaviour_tis_cap >= 1.0:
            raise ValueError(
                f"behaviour_tis_cap: expected >= 1 (a cap below 1 shrinks the weight of on-policy units, w = 1), "
                f"got {self.behaviour_tis_cap}"
            )
        if correction == "mask" and not 0.0 <= self.behaviour_mask_low <= 1.0 <= self.behaviour_mask_high:
            raise ValueError(
                "behaviour_mask_low / behaviour_mask_high: expected 0 <= low <= 1 <= high (a band without 1 drops "
                f"on-policy units, w = 1), got [{self.behaviour_mask_low}, {self.behaviour_mask_high}]"
            )


def objective_of(config: LearnerConfig) -> Objective:
    """The objective a config names (``gspo_turn`` for ``objective="gspo"`` with ``unit="turn"``), loaded by
    :func:`agentgspo.objective.load_objective` (a built-in, ``package.module:name`` or an entry point)."""
    name = "gspo_turn" if config.objective == "gspo" and config.unit == "turn" else config.objective
    try:
        return load_objective(name)
    except ObjectiveError as exc:
        raise ValueError(str(exc)) from exc


def loss_for(config: LearnerConfig) -> Any:
    """The loss a config trains with: its objective (:func:`objective_of`), or the objective with the asynchronous
    correction composed onto it (:func:`agentgspo.objective.decoupled`) under a ``behaviour_correction``."""
    trained = objective_of(config)
    return decoupled(trained) if config.behaviour_correction != "none" else trained


def settings_of(hyper: Any) -> set[str]:
    return {declared.name for declared in fields(hyper)}
