"""Every setting of a GSPO run: :class:`TrainConfig` (the learner's inherited from
:class:`~agentgspo.learning.config.LearnerConfig`), each declared once with its help text, its choices or bounds
(:func:`agentgspo.core.settings.setting`), and ``"auto"`` resolved here, once, so ``config.json`` records the values
used. A recipe's defaults are a mapping over these (:class:`agentgspo.training.recipe.Recipe`); :data:`SMOKE` is every
recipe's CPU size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from agentgspo.core.settings import setting
from agentgspo.environments.held_out import check_final_eval, training_kwargs
from agentgspo.environments.interop.openenv_client import is_remote_env_id
from agentgspo.environments.registry import env_budget, resolve
from agentgspo.learning.config import LearnerConfig
from agentgspo.learning.sharding import MIXED_PRECISION
from agentgspo.policy.factory import run_options
from agentgspo.policy.policy_settings import LIMIT_DEFAULTS
from agentgspo.policy.weight_sync import WEIGHT_TRANSFERS
from agentgspo.rollouts.rollout import HISTORY_MODES

__all__ = ["TrainConfig", "SMOKE", "SMOOTHING", "SHARDINGS", "INTERRUPT_MARKER", "bare_env_id", "episode_limits"]

SMOOTHING = 10  # steps in the moving average of the stop rule (and the plot)
SHARDINGS = ("none", "fsdp2")
INTERRUPT_MARKER = "waiting-for-interrupt"  # written by --wait-for-interrupt-at (testing)


@dataclass
class TrainConfig(LearnerConfig):
    """Every setting of a GSPO run (saved to DIR/config.json; a rerun must match it to resume). The learner's
    settings come first, inherited from :class:`~agentgspo.learning.config.LearnerConfig`."""

    out: str = setting(
        "runs/gspo", "run folder: config, metrics, checkpoints and the trained policy go here", resumable=True
    )
    seed: int = setting(0, "seed of the data order, sampling and (for 'tiny') the model init")
    # Policy.
    policy: str = setting(
        "Qwen/Qwen3-30B-A3B",
        "the paper's MoE by default: a hub id resolved offline from the "
        "local Hugging Face cache (HF_HOME), a save_pretrained folder, or "
        "'tiny' (the embedded tiny MoE)",
    )
    dtype: str = setting(
        "float32",
        "parameter dtype when loading: float32 keeps fp32 master weights and AdamW "
        "state (compute in bf16 with --mixed-precision bf16)",
    )
    mixed_precision: str = setting(
        "no",
        "'no' or 'bf16': compute dtype of the forward/backward (fp32 master "
        "weights either way); an accelerate config's mixed_precision also applies",
        choices=MIXED_PRECISION,
    )
    attn_implementation: str = setting(
        "", "transformers attention implementation: eager, sdpa, flash_attention_2, ... (empty: the model's default)"
    )
    device: str = setting("auto", "'auto' (the device accelerate gives this process) or 'cpu'")
    sharding: str = setting(
        "none",
        "'none' (one copy per process; DDP across processes) or 'fsdp2' (parameters, "
        "gradients and optimizer state sharded over the processes)",
        choices=SHARDINGS,
    )
    backend: str = setting(
        "vllm",
        "who samples: 'vllm' (a vLLM engine in this process), 'server' (--server-url) "
        "or 'hf' (transformers in this process; small models); each gets the weights "
        "after a step",
    )
    server_url: str = setting(
        "",
        "comma-separated base URLs of `agentgspo serve-policy` servers (--backend "
        "server); they get the weights streamed, or read them from DIR/sampler-RANK/ "
        "(a shared file system) with --weight-transfer folder",
    )
    weight_transfer: str = setting(
        "auto",
        "how the weights reach vLLM after a step (--backend vllm or server): 'gloo' "
        "streams them from memory through vLLM's weight-transfer routes, 'folder' "
        "writes DIR/sampler-RANK/ and has vLLM reload it, 'auto' streams where the "
        "sampler accepts it (folders otherwise; the choice is logged)",
        choices=WEIGHT_TRANSFERS,
    )
    # Env and episodes.
    env_id: str = setting(
        "agentgspo/Calculator-v0",
        "registered env id ('module:id' imports the module first), an env server's URL (http://HOST:PORT), or "
        "fleet:MANIFEST[#GROUP] for a fleet's env servers",
    )
    env_kwargs: dict = setting({}, "keyword arguments of the env (a JSON object on the command line)")
    max_turns: int = setting(6, "assistant turns per episode (0: the env's registered budget)")
    max_new_tokens: int = setting(
        4096, "ids per assistant turn; Qwen3 thinks before it answers (0: the env's registered budget)"
    )
    max_context: int = setting(16384, "ids per episode (0: the env's registered budget)")
    env_call_timeout_s: float = setting(
        300.0,
        "seconds one env call (reset, step) may take; past it the call is "
        "hung, the machine's fault: stop reason env_timeout, not trained "
        "(0: no limit)",
        at_least=0,
    )
    env_budget_s: float = setting(
        1800.0,
        "seconds of env calls per episode (time waiting for the sampler not "
        "counted); past it the episode is truncated as env_budget and trained, "
        "keeping the reward earned (0: no budget)",
        at_least=0,
    )
    sampler_timeout_s: float = setting(
        600.0,
        "seconds one sampler call may take; past it the episode ends as sampler_error, not trained (0: no limit)",
        at_least=0,
    )
    requeue_limit: int = setting(
        2,
        "times an episode lost to infrastructure (a re-queueable ending: a dead replica, sandbox or env server, a "
        "hung call) is played again, same task and seeds, before its failure stands (never trained; 0: never)",
    )
    history: str = setting(
        "as_sampled",
        "'as_sampled': one sample per episode, each turn conditioned on the "
        "sequence as sampled; 'split_turns': each assistant turn its own sample, "
        "in the context the chat template renders at that turn (templates that "
        "drop earlier <think> blocks, e.g. Qwen3)",
        choices=HISTORY_MODES,
    )
    top_p: float = setting(
        1.0,
        "nucleus sampling (1: off); with --logp-old sampler only backends whose log-probs "
        "are the full distribution's (hf) allow < 1",
    )
    top_k: int = setting(0, "sample among the k most likely ids (0: off); as --top-p for --logp-old sampler")
    # GSPO steps.
    steps: int = setting(200, "most GSPO steps (rollout batch + update)", at_least=1)
    prompts_per_step: int = setting(16, "prompts per step, per process", at_least=1)
    group_size: int = setting(8, "samples per prompt: the group GSPO's advantages compare (Eq. 6)", at_least=1)
    lr: float = setting(1e-6, "AdamW learning rate")
    warmup_steps: int = setting(4, "optimizer steps of linear LR warm-up (then constant)")
    max_staleness: int = setting(
        0,
        "policy versions the rollouts may lag the learner (one version = one weight update of the sampler): 0 is "
        "the synchronous loop; S > 0 plays the next groups while the learner trains (the sampler a separate copy), "
        "with the decoupled objective (--behaviour-correction) unless told otherwise",
        at_least=0,
    )
    rollout_order: Literal["data", "completion"] = setting(
        "data",
        "which groups a step trains on when --max-staleness > 0: 'data' (the oldest data positions, waiting for "
        "them; the synchronous loop's batches) or 'completion' (the first to finish; one more than S versions "
        "behind is dropped and its prompt played again, at most --max-drops times)",
    )
    max_drops: int = setting(
        2,
        "--rollout-order completion: times a group more than S versions behind may be dropped and replayed; then "
        "its next finish is trained however stale, with the behaviour correction (unbounded, a slow group would "
        "never train: the run would favour short episodes)",
        at_least=0,
    )
    synchronous_logp_old: Literal["recompute", "sampler"] = setting(
        "recompute",
        "what --logp-old auto means at --max-staleness 0 (the recipe's choice; the sampler's log-probs are the "
        "old policy's only when the sampler is the learner's own fp32 weights); at S > 0 auto is always recompute",
    )
    allow_uncorrected_staleness: bool = setting(
        False,
        "allow --max-staleness > 0 with --logp-old sampler or --behaviour-correction none: the ratio is then "
        "taken against the stale sampler, uncorrected (it clips most sequences and learns slowly, ASYNC.md); a "
        "warning is logged each step",
        resumable=True,
    )
    allow_fewer_samplers: bool = setting(
        False,
        "--backend server with several servers: when a weight update fails on some of them twice in a row, train "
        "on with the servers that took it (the others retired) instead of stopping with an error naming them",
        resumable=True,
    )
    stop_success: float | None = setting(
        None, f"stop once the {SMOOTHING}-step mean success reaches this (empty: run every step)"
    )
    max_minutes: float = setting(
        0.0, "time cap: GSPO stops once the command has run this many minutes (0: none)", resumable=True, at_least=0
    )
    # Optional supervised warm start on the env's demonstrator (its oracle, and `wrong` in a share of the episodes).
    warm_demos: int = setting(0, "demonstration episodes for a warm start (0: none; a real checkpoint needs none)")
    warm_wrong_frac: float = setting(0.5, "share of the demonstrations played by the env's `wrong` policy")
    warm_steps: int = setting(0, "warm-start AdamW steps")
    warm_batch: int = setting(32, "demonstrations per warm-start step")
    warm_lr: float = setting(3e-3, "warm-start learning rate (linearly decayed to 0)")
    warm_eval_every: int = setting(
        0,
        "warm-start steps between evals of sampled success on 64 held-out prompts (for the plot; 0: none)",
        at_least=0,
    )
    warm_checkpoint_every: int = setting(
        100, "warm-start steps between checkpoints (an interruption saves one too)", resumable=True, at_least=1
    )
    # Outputs.
    final_eval_episodes: int = setting(
        0,
        "episodes of the final evaluation, sampled (T=1) and greedy, on held-out tasks: the env's held-out split "
        "(--final-eval-env-kwargs), or seeds disjoint from training's for a procedural env (0: none)",
        at_least=0,
    )
    final_eval_env_kwargs: dict = setting(
        {},
        "keyword arguments of the final evaluation's env (a JSON object); {}: --env-kwargs with split 'test' for an "
        "env with a held-out split (Math-v0, Code-v0, CodeForces-v0, Search-v0: the training env then plays split "
        "'train'), --env-kwargs on seeds disjoint from training's for a procedural env (Calculator-v0)",
    )
    checkpoint_every: int = setting(
        10, "GSPO steps between checkpoints (an interruption saves one too)", resumable=True, at_least=1
    )
    trajectories_every: int = setting(
        10,
        "GSPO steps between saving the step's episodes (ids, masks, log-probs, "
        "messages) to DIR/trajectories/step_N_rankR.jsonl, for `agentgspo view "
        "FILE --tokenizer DIR/final` (0: never)",
        resumable=True,
        at_least=0,
    )
    kill_after_step: int = setting(
        0, "testing exact resume: SIGKILL this process right after that GSPO step (0: never)", testing=True
    )
    wait_for_interrupt_at: str = setting(
        "",
        "testing interruption: after warm-start step N ('warm:N') or GSPO "
        f"step N ('gspo:N'), write DIR/{INTERRUPT_MARKER} and wait for "
        "SIGINT/SIGTERM",
        testing=True,
    )

    def __post_init__(self) -> None:
        # 'auto' resolved here, so config.json records the values used: whenever rollouts may be stale, the
        # decoupled objective (the ratio against the logp_old recompute, each unit weighed by pi_prox / mu).
        if self.logp_old == "auto":
            self.logp_old = "recompute" if self.max_staleness > 0 else self.synchronous_logp_old
        if self.behaviour_correction == "auto":
            self.behaviour_correction = "tis" if self.max_staleness > 0 and self.logp_old == "recompute" else "none"
        uncorrected = self.uncorrected_staleness()
        if uncorrected and not self.allow_uncorrected_staleness:
            raise ValueError(
                f"max_staleness {self.max_staleness} with {uncorrected} takes the ratio against a sampler up to "
                f"{self.max_staleness} versions stale, uncorrected: it clips most sequences and learns slowly "
                "(docs/async.md). Leave --logp-old and --behaviour-correction at auto (the decoupled objective), "
                "or pass --allow-uncorrected-staleness to train this way anyway"
            )
        # The learner's checks and every setting's declared choices and bounds (check_settings); the clip band
        # resolved, so config.json records it.
        super().__post_init__()
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(f"env_kwargs: expected a JSON object, got {self.env_kwargs!r}")
        run_options(  # each backend checks its needs
            self.backend, seed=self.seed, server_urls=self.server_urls(), weight_transfer=self.weight_transfer
        )
        if self.routing_replay == "rollout" and self.backend != "hf":
            raise ValueError(
                "routing_replay 'rollout' needs the sampler's expert choices: --backend hf records them "
                "(vLLM's routed-expert output needs its V2 runner with Triton, not wired here); or use "
                "--routing-replay old_policy"
            )
        if self.warm_demos and not self.warm_steps:
            raise ValueError("warm_demos without warm_steps: set --warm-steps too (or --warm-demos 0)")
        phase, _, step = self.wait_for_interrupt_at.partition(":")
        if self.wait_for_interrupt_at and (phase not in ("warm", "gspo") or not step.isdigit()):
            raise ValueError(
                f"wait_for_interrupt_at: expected 'warm:N' or 'gspo:N', got {self.wait_for_interrupt_at!r}"
            )
        if not isinstance(self.final_eval_env_kwargs, dict):
            raise ValueError(f"final_eval_env_kwargs: expected a JSON object, got {self.final_eval_env_kwargs!r}")
        if self.final_eval_episodes:  # a final evaluation of training tasks is refused before any work
            check_final_eval(self.env_id, self.env_kwargs, self.final_eval_env_kwargs)

    def uncorrected_staleness(self) -> str:
        """What makes training on stale rollouts uncorrected ('' when nothing does): with ``max_staleness`` > 0,
        ``logp_old`` sampler or ``behaviour_correction`` none."""
        if self.max_staleness == 0:
            return ""
        if self.logp_old == "sampler":
            return "logp_old 'sampler'"
        return "behaviour_correction 'none'" if self.behaviour_correction == "none" else ""

    def server_urls(self) -> list[str]:
        """``server_url`` as a list."""
        return [url for url in self.server_url.split(",") if url]

    def train_env_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of the env the policy trains on: ``env_kwargs``, plus ``split="train"`` for an env
        with a held-out split (unless ``env_kwargs`` names a split), so that no held-out task is ever trained on
        (:mod:`agentgspo.envs.splits`). The env's own default stays ``"all"`` for ``agentgspo eval`` and rollouts."""
        return training_kwargs(self.env_id, self.env_kwargs)


def bare_env_id(env_id: str) -> str:
    """``env_id`` without Gymnasium's ``module:`` prefix, its module imported (it registers the id); a server URL
    is returned as is."""
    return env_id if is_remote_env_id(env_id) else resolve(env_id, {})[0]


def episode_limits(config: Any) -> dict[str, int]:
    """``max_turns``, ``max_new_tokens``, ``max_context``: the config's, else the env's registered budget, else the
    library defaults."""
    budget = env_budget(bare_env_id(config.env_id))
    registered = dataclasses.asdict(budget) if budget else LIMIT_DEFAULTS
    given = {"max_turns": config.max_turns, "max_new_tokens": config.max_new_tokens, "max_context": config.max_context}
    return {name: value or registered[name] for name, value in given.items()}


# The CPU size of every recipe's --smoke: the tiny policy, two steps of two prompts x two samples.
SMOKE: dict[str, Any] = dict(
    policy="tiny",
    backend="hf",
    device="cpu",
    activation_checkpointing=False,
    max_turns=2,
    max_new_tokens=32,
    max_context=1024,
    steps=2,
    prompts_per_step=2,
    group_size=2,
    lr=1e-4,
    checkpoint_every=1,
    trajectories_every=1,
)
