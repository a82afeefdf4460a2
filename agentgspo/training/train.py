"""The training loop: one GSPO run from one config. Every recipe is its settings and one call of :func:`train`
(``recipes/quickstart.py``, ``gspo_math.py``, ``gspo_code.py``, ``gspo_codeforces.py``, ``gspo_search.py``, the MoE
study's variants).

A run, in order:

1. the folder: a folder holding a run with other settings is refused, a finished one reports its summary;
2. the policy (``HFPolicy.from_pretrained``) and, with ``warm_steps``, a supervised warm start on the env's
   imperfect demonstrator (its transcripts cached in ``DIR/demonstrations.jsonl``; evals every
   ``warm_eval_every`` steps, checkpoints every ``warm_checkpoint_every``);
3. per GSPO step: every rank plays its own prompts (``prompts_per_step`` x ``group_size`` episodes, disjoint seeds
   per rank and step, the same after a resume), the learner takes one GSPO step
   (:class:`agentgspo.learning.learner.GSPOLearner`), the sampler gets the new weights, one line goes to
   ``DIR/metrics.jsonl`` (a recipe's ``evaluation``, :data:`Evaluation`, may evaluate);
4. it stops after ``steps`` steps, once the ``SMOOTHING``-step mean success reaches ``stop_success``, or past
   ``max_minutes``; SIGINT/SIGTERM stop it at a step boundary with a checkpoint (exit 130/143 and the command that
   resumes; resume is exact: state, data order, RNG streams);
5. the end: ``DIR/final/`` (the full weights with ``save_pretrained``, the tokenizer, ``agentgspo.json``: how to play
   it), with ``final_eval_episodes`` a sampled and a greedy evaluation on held-out prompts, ``DIR/reward.png`` and
   ``DIR/summary.json``.

Settings: :class:`TrainConfig` (the learner's inherited from :class:`~agentgspo.learning.config.LearnerConfig`),
read by :mod:`agentgspo.core.settings`: the recipe's defaults, then ``--smoke``, then ``--config FILE.yaml``,
then flags.

Sharding: ``sharding="fsdp2"`` shards the policy with FSDP2 (:func:`agentgspo.learning.sharding.prepare_policy`;
also what an ``accelerate launch --config_file recipes/accelerate/fsdp2_*.yaml`` run does) with fp32 master weights
and bf16 compute under ``mixed_precision="bf16"``; the sampler is then an unsharded copy that gets the gathered full
weights after each step.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, gather_object, set_seed
from transformers import get_scheduler

from agentgspo.environments.held_out import check_final_eval, final_eval_kwargs, training_kwargs
from agentgspo.environments.interop.openenv_client import is_remote_env_id
from agentgspo.environments.registry import env_budget, make, resolve
from agentgspo.learning.config import LearnerConfig
from agentgspo.learning.learner import GSPOLearner
from agentgspo.learning.sharding import (
    MIXED_PRECISION,
    full_state_dict,
    is_sharded,
    load_sampler_weights,
    prepare_policy,
)
from agentgspo.core.sampling import SamplingParams, WeightUpdateFailed
from agentgspo.policy.factory import BACKENDS, backend_class, close_backend, make_backend, run_options
from agentgspo.policy.hf import HFPolicy
from agentgspo.policy.loading import resolve_checkpoint
from agentgspo.policy.policy_settings import LIMIT_DEFAULTS, PolicySettings, write_policy_settings
from agentgspo.models.quiet import no_transformers_progress_bars
from agentgspo.policy.weight_sync import WEIGHT_TRANSFERS, save_weights, sync_weights
from agentgspo.rollouts.producer import RolloutProducer, to_ranges
from agentgspo.rollouts.rollout import HISTORY_MODES, RolloutConfig, RolloutRunner, summarize
from agentgspo.core.trajectory import read_jsonl, write_jsonl
from agentgspo.training.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    load_warm_checkpoint,
    read_run_state,
    save_checkpoint,
    save_warm_checkpoint,
)
from agentgspo.training.metrics import (
    MetricsLogger,
    moving_average,
    plot_training,
    read_metrics,
    rollout_metrics_over_ranks,
)
from agentgspo.training.run_folder import RunInterrupted, StopSignals, check_run_folder
from agentgspo.core.settings import flags_of, load_config, resumable_settings, resume_command, setting
from agentgspo.training.sft import WarmStartProgress, play_demonstrations, warm_start

__all__ = [
    "TrainConfig",
    "SMOKE",
    "Evaluation",
    "run_recipe",
    "run_config",
    "exit_process",
    "bare_env_id",
    "episode_limits",
    "train",
]

# Evaluations play env seeds from 0, training prompts from TRAIN_SEED_BASE. That holds out only a procedural env's
# tasks (drawn from the seed); a dataset env poses seed % rows, so its evaluations play its held-out split instead
# (agentgspo.envs.splits: the training env plays split "train", evaluations split "test").
EVAL_SEEDS = range(0, 100_000)
TRAIN_SEED_BASE = 1_000_000
DEMO_SEED_BASE = 9_000_000  # warm-start demonstrations
SMOOTHING = 10  # steps in the moving average of the stop rule (and the plot)
SUMMARY = "summary.json"
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
    )
    attn_implementation: str = setting(
        "", "transformers attention implementation: eager, sdpa, flash_attention_2, ... (empty: the model's default)"
    )
    device: str = setting("auto", "'auto' (the device accelerate gives this process) or 'cpu'")
    sharding: str = setting(
        "none",
        "'none' (one copy per process; DDP across processes) or 'fsdp2' (parameters, "
        "gradients and optimizer state sharded over the processes)",
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
    )
    env_budget_s: float = setting(
        1800.0,
        "seconds of env calls per episode (time waiting for the sampler not "
        "counted); past it the episode is truncated as env_budget and trained, "
        "keeping the reward earned (0: no budget)",
    )
    sampler_timeout_s: float = setting(
        600.0, "seconds one sampler call may take; past it the episode ends as sampler_error, not trained (0: no limit)"
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
    )
    top_p: float = setting(
        1.0,
        "nucleus sampling (1: off); with --logp-old sampler only backends whose log-probs "
        "are the full distribution's (hf) allow < 1",
    )
    top_k: int = setting(0, "sample among the k most likely ids (0: off); as --top-p for --logp-old sampler")
    # GSPO steps.
    steps: int = setting(200, "most GSPO steps (rollout batch + update)")
    prompts_per_step: int = setting(16, "prompts per step, per process")
    group_size: int = setting(8, "samples per prompt: the group GSPO's advantages compare (Eq. 6)")
    lr: float = setting(1e-6, "AdamW learning rate")
    warmup_steps: int = setting(4, "optimizer steps of linear LR warm-up (then constant)")
    max_staleness: int = setting(
        0,
        "policy versions the rollouts may lag the learner (one version = one weight update of the sampler): 0 is "
        "the synchronous loop; S > 0 plays the next groups while the learner trains (the sampler a separate copy), "
        "with the decoupled objective (--behaviour-correction) unless told otherwise",
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
        0.0, "time cap: GSPO stops once the command has run this many minutes (0: none)", resumable=True
    )
    # Optional supervised warm start on the env's demonstrator (its oracle, and `wrong` in a share of the episodes).
    warm_demos: int = setting(0, "demonstration episodes for a warm start (0: none; a real checkpoint needs none)")
    warm_wrong_frac: float = setting(0.5, "share of the demonstrations played by the env's `wrong` policy")
    warm_steps: int = setting(0, "warm-start AdamW steps")
    warm_batch: int = setting(32, "demonstrations per warm-start step")
    warm_lr: float = setting(3e-3, "warm-start learning rate (linearly decayed to 0)")
    warm_eval_every: int = setting(
        0, "warm-start steps between evals of sampled success on 64 held-out prompts (for the plot; 0: none)"
    )
    warm_checkpoint_every: int = setting(
        100, "warm-start steps between checkpoints (an interruption saves one too)", resumable=True
    )
    # Outputs.
    final_eval_episodes: int = setting(
        0,
        "episodes of the final evaluation, sampled (T=1) and greedy, on held-out tasks: the env's held-out split "
        "(--final-eval-env-kwargs), or seeds disjoint from training's for a procedural env (0: none)",
    )
    final_eval_env_kwargs: dict = setting(
        {},
        "keyword arguments of the final evaluation's env (a JSON object); {}: --env-kwargs with split 'test' for an "
        "env with a held-out split (Math-v0, Code-v0, CodeForces-v0, Search-v0: the training env then plays split "
        "'train'), --env-kwargs on seeds disjoint from training's for a procedural env (Calculator-v0)",
    )
    checkpoint_every: int = setting(
        10, "GSPO steps between checkpoints (an interruption saves one too)", resumable=True
    )
    trajectories_every: int = setting(
        10,
        "GSPO steps between saving the step's episodes (ids, masks, log-probs, "
        "messages) to DIR/trajectories/step_N_rankR.jsonl, for `agentgspo view "
        "FILE --tokenizer DIR/final` (0: never)",
        resumable=True,
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
        super().__post_init__()  # the learner's checks; the clip band resolved, so config.json records it
        choices = {
            "history": HISTORY_MODES,
            "sharding": SHARDINGS,
            "mixed_precision": MIXED_PRECISION,
            "backend": tuple(BACKENDS),
            "weight_transfer": WEIGHT_TRANSFERS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}: expected one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness: expected >= 0 policy versions, got {self.max_staleness}")
        if self.max_drops < 0:
            raise ValueError(f"max_drops: expected >= 0 (0: never drop a stale group), got {self.max_drops}")
        for name in ("steps", "prompts_per_step", "group_size", "checkpoint_every", "warm_checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        for name in (
            "trajectories_every",
            "warm_eval_every",
            "final_eval_episodes",
            "max_minutes",
            "env_call_timeout_s",
            "env_budget_s",
            "sampler_timeout_s",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: expected >= 0 (0: none), got {getattr(self, name)}")
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


#: What evaluates the policy during training, given by a recipe: ``evaluation(config, out, rollout)`` returns the
#: hook called after each step with the step, the sampler, the renderer and ``run=`` (which runs a coroutine on the
#: rollouts' event loop: sample through it, since a backend serves one event loop at a time; the hook returns
#: metrics to log or ``None``), writing under ``out``; ``rollout`` holds the episode limits. ``None`` (or a factory
#: returning ``None``): no evaluation. recipes/gspo_codeforces.py evaluates its held-out problems so.
Evaluation = Callable[[TrainConfig, Path, RolloutConfig], Any]


def run_recipe(
    config_class: type,
    argv: list[str] | None = None,
    *,
    smoke: dict[str, Any],
    command: str,
    description: str = "",
    succeeded: Callable[[dict[str, Any]], bool] | None = None,
    evaluation: Evaluation | None = None,
) -> int:
    """A recipe's command line: its settings from ``argv`` (:func:`agentgspo.core.settings.load_config`), then
    :func:`run_config` (with the recipe's ``evaluation``, if any); bad settings give one line and exit status 2."""
    try:
        config = load_config(config_class, argv, smoke=smoke, description=description)
    except ValueError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    return run_config(config, command=command, succeeded=succeeded, evaluation=evaluation)


def run_config(
    config: TrainConfig,
    *,
    command: str,
    succeeded: Callable[[dict[str, Any]], bool] | None = None,
    evaluation: Evaluation | None = None,
) -> int:
    """:func:`train` and its exit status: 0 done (and ``succeeded(summary)`` when given, else 1), 130/143
    interrupted after a checkpoint, 2 for bad input, with one line, not a traceback, for an interruption or bad
    input."""
    try:
        summary = train(config, command=command, evaluation=evaluation)
    except RunInterrupted as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt as exc:
        print(f"interrupted: {exc or 'stopped without saving'}", file=sys.stderr)
        return 130
    except (ValueError, LookupError, FileNotFoundError) as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    return 0 if succeeded is None or succeeded(summary) else 1


def exit_process(status: int) -> None:
    """Leave a recipe's process with ``status``. Under a launcher every file is written and the process group
    destroyed by now, and the interpreter's teardown of torch's C++ threads has aborted a rank under load
    ('terminate called without an active exception', SIGABRT after a finished run, which the launcher reports as a
    failure): leave without that teardown."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def bare_env_id(env_id: str) -> str:
    """``env_id`` without Gymnasium's ``module:`` prefix, its module imported (it registers the id); a server URL
    is returned as is."""
    return env_id if is_remote_env_id(env_id) else resolve(env_id, {})[0]


def episode_limits(config: Any) -> dict[str, int]:
    """``max_turns``, ``max_new_tokens``, ``max_context``: the config's, else the env's registered budget, else the
    library defaults."""
    budget = env_budget(bare_env_id(config.env_id))
    return {
        name: getattr(config, name) or (getattr(budget, name) if budget else LIMIT_DEFAULTS[name])
        for name in ("max_turns", "max_new_tokens", "max_context")
    }


def train(
    config: TrainConfig, *, command: str = "python -m agentgspo.training.train", evaluation: Evaluation | None = None
) -> dict[str, Any]:
    """Run GSPO as ``config`` says (see the module docstring), evaluating during training with ``evaluation``
    (:data:`Evaluation`) when given; returns the summary written to DIR/summary.json (the same on every rank).
    Raises :class:`~agentgspo.training.run_folder.RunInterrupted` after a checkpoint on SIGINT/SIGTERM and
    ``RunFolderMismatch`` for a folder holding a run with other settings."""
    started = time.perf_counter()
    out = Path(config.out)
    world = int(os.environ.get("WORLD_SIZE", "1"))  # set by `accelerate launch` (and torchrun) on every rank
    # As config.json holds them (a tuple reads back as a list), so the comparison with a saved run is like for like.
    hparams = json.loads(
        json.dumps({"recipe": type(config).__name__, "world_size": world, **dataclasses.asdict(config)}, default=str)
    )
    check_run_folder(
        out,
        hparams,
        command=command,
        ignore=resumable_settings(type(config)),
        flag_of=flags_of(type(config)),
        defaults=json.loads(json.dumps(dataclasses.asdict(type(config)()), default=str)),
    )
    if (out / SUMMARY).exists():
        summary = json.loads((out / SUMMARY).read_text())
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"{out} holds a finished run: nothing to do (pass another --out to train again).")
            _report(out, summary)
        return summary
    resolve_checkpoint(config.policy)  # not a model, or a hub id not cached: an error now, before any work
    make(bare_env_id(config.env_id), **config.train_env_kwargs()).close()  # an unknown id or keyword: an error now
    accelerator = Accelerator(cpu=config.device == "cpu")
    if accelerator.num_processes != world:
        raise ValueError(
            f"WORLD_SIZE says {world} processes but accelerate started {accelerator.num_processes}; "
            "launch with `accelerate launch` (or torchrun), which sets both"
        )
    if accelerator.is_main_process:  # before any work: a rerun with other settings is refused from the start
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(hparams, indent=2, default=str))
    with StopSignals(announce=accelerator.is_main_process) as signals:
        return _Run(config, accelerator, out, hparams, signals, started, command, evaluation).run()


class _Run:
    """One run's state: the pieces :func:`train` builds, then the loop (:meth:`run`)."""

    def __init__(
        self,
        config: TrainConfig,
        accelerator: Accelerator,
        out: Path,
        hparams: dict,
        signals: StopSignals,
        started: float,
        command: str,
        evaluation: Evaluation | None = None,
    ):
        self.config, self.accelerator, self.out, self.hparams = config, accelerator, out, hparams
        self.signals, self.started, self.command, self.evaluation = signals, started, command, evaluation
        self.rank, self.world = accelerator.process_index, accelerator.num_processes
        self.limits = episode_limits(config)
        self.warm_log: dict[str, Any] = {"demonstrator_success": None, "evals": []}

    def make_env(self) -> gym.Env:
        """A fresh training env."""
        env_id, kwargs = resolve(bare_env_id(self.config.env_id), self.config.train_env_kwargs())
        return gym.make(env_id, disable_env_checker=True, **kwargs)

    def interrupted(self, where: str, checkpoint: Path) -> RunInterrupted:
        """The error that stops the run after ``checkpoint``, naming the command that resumes it."""
        return RunInterrupted(
            self.signals.signum,
            f"{self.signals.name} during {where}: saved {checkpoint}. Resume "
            f"with: {resume_command(self.config, self.command)}",
        )

    def run(self) -> dict[str, Any]:
        """Warm start (if asked), GSPO until a stop rule, then the final policy, evaluation and summary."""
        config, accelerator, out = self.config, self.accelerator, self.out
        set_seed(config.seed)  # the same init on every rank
        policy = self.load_policy()
        renderer, model = policy.renderer, policy.model
        self.renderer = renderer
        resume_from = latest_checkpoint(out)
        run_state = read_run_state(resume_from) if resume_from is not None else {"phase": "warm_start", "step": 0}
        self.warm_log = run_state.get("warm_log", self.warm_log)
        if config.warm_steps:
            self.warm_start(policy, resume_from, run_state)

        def make_optimizer(parameters: Any) -> torch.optim.Optimizer:
            return torch.optim.AdamW(parameters, lr=config.lr, weight_decay=0.0)

        def make_scheduler(optimizer: torch.optim.Optimizer) -> Any:
            return get_scheduler("constant_with_warmup", optimizer, num_warmup_steps=config.warmup_steps)

        # The KL penalty's reference: a frozen copy of the policy GSPO starts from (after the warm start).
        reference = copy.deepcopy(model).eval().requires_grad_(False) if config.kl_coef > 0 else None
        model, optimizer, scheduler = prepare_policy(
            accelerator,
            model,
            make_optimizer,
            make_scheduler,
            sharding=config.sharding,
            mixed_precision=config.mixed_precision,
            max_grad_norm=config.max_grad_norm,
        )
        if is_sharded(model):
            policy = self.load_policy()  # the sampler's unsharded copy: gets the gathered weights after each step
        else:
            policy.model = accelerator.unwrap_model(model)
        learner = GSPOLearner(
            model,
            optimizer,
            accelerator,
            pad_token_id=renderer.tokenizer.pad_token_id,
            scheduler=scheduler,
            seed=config.seed + self.rank,
            ref_model=reference,
            config=LearnerConfig.from_settings(config),
        )
        accelerator.register_for_checkpointing(learner)
        step = 0
        if run_state["phase"] == "gspo":
            step = load_checkpoint(accelerator, resume_from)["step"]
            accelerator.print(f"resumed from {resume_from} at step {step}")

        sampler_folder = out / f"sampler-{self.rank}"
        sampler = self.sampler(policy, sampler_folder)
        self.refresh_sampler(sampler, model, policy, sampler_folder)
        rollout = RolloutConfig(
            group_size=config.group_size,
            max_turns=self.limits["max_turns"],
            max_context=self.limits["max_context"],
            history=config.history,
            env_call_timeout_s=config.env_call_timeout_s or None,
            env_budget_s=config.env_budget_s or None,
            sampler_timeout_s=config.sampler_timeout_s or None,
            requeue_limit=config.requeue_limit,
            sampling=SamplingParams(
                temperature=config.temperature,
                top_p=config.top_p,
                top_k=config.top_k,
                max_new_tokens=self.limits["max_new_tokens"],
            ),
        )
        runner = RolloutRunner(self.make_env, sampler, renderer, rollout, env_id=config.env_id)
        evaluate = self.evaluation is not None and accelerator.is_main_process
        evaluation = self.evaluation(config, out / "eval", rollout) if evaluate else None
        logger = MetricsLogger(out, self.hparams, resume_step=step, enabled=accelerator.is_main_process)
        success = [row["success"] for row in self.previous_metrics()[:step]]  # the stop rule's history
        rules = [f"after {config.steps} steps (--steps)"]
        if config.stop_success is not None:
            rules.append(f"at a {SMOOTHING}-step mean success >= {config.stop_success} (--stop-success)")
        if config.max_minutes:
            rules.append(f"after {config.max_minutes:g} minutes (--max-minutes)")
        accelerator.print(f"GSPO: stops {', '.join(rules[1:] + rules[:1])}, whichever comes first")
        stopped = self.stop_rule(success, step)
        producer = RolloutProducer(
            runner,
            self.plan,
            batch=config.prompts_per_step,
            max_staleness=config.max_staleness,
            order=config.rollout_order,
            max_drops=config.max_drops,
            version=sampler.version,
            **self.producer_state(run_state, step),
        )
        self.step_started = time.perf_counter()
        try:
            while stopped is None:
                model.eval()  # the hf sampler may be the learner's own module (max_staleness 0)
                producer.set_version(sampler.version)  # admits what the staleness bound allows now
                groups, waits = producer.take()
                trajectories = [trajectory for group in groups for trajectory in group.trajectories]
                model.train()
                version, step = sampler.version, step + 1
                if config.trajectories_every and step % config.trajectories_every == 0:
                    (out / "trajectories").mkdir(parents=True, exist_ok=True)
                    write_jsonl(trajectories, out / "trajectories" / f"step_{step:06d}_rank{self.rank}.jsonl")
                if config.uncorrected_staleness():
                    accelerator.print(
                        f"warning: step {step} trains on rollouts up to {config.max_staleness} versions stale with "
                        f"{config.uncorrected_staleness()}, uncorrected (--allow-uncorrected-staleness)",
                        flush=True,
                    )
                learner_started = time.perf_counter()
                stats = learner.step(trajectories)
                self.refresh_sampler(sampler, model, policy, sampler_folder)
                learner_seconds = time.perf_counter() - learner_started
                # Rank 0 evaluates the updated weights; the other ranks go on and wait for it at the next update.
                # On the producer's event loop, beside the groups in flight: a backend serves one loop at a time.
                evaluated = evaluation(step, sampler, renderer, run=producer.run) if evaluation is not None else None
                shared = self.log_step(
                    logger,
                    step,
                    trajectories,
                    stats,
                    evaluated,
                    version=version,
                    waits=waits,
                    learner_seconds=learner_seconds,
                )
                success.append(shared["success"])
                stopped = self.stop_rule(success, step)
                saved = None
                if step % config.checkpoint_every == 0 or stopped is not None:  # the last step too: a rerun reports
                    saved = self.checkpoint(step, producer)
                self.testing_hooks("gspo", step)
                if stopped is None and self.stop_requested():
                    logger.close()
                    raise self.interrupted(f"GSPO (step {step})", saved or self.checkpoint(step, producer))
        finally:
            producer.close()  # the groups still in flight are not kept (a resume plays their prompts again)
        if sampler is not policy:
            close_backend(sampler)  # the in-process engine's processes; the final evaluation uses this process's model
        logger.close()
        summary = self.finish(policy, model, stopped, step)
        # A barrier first: a rank that destroys the process group while its last send of a collective (a gloo send
        # completes locally) is still unread aborts ('terminate called without an active exception').
        accelerator.wait_for_everyone()
        accelerator.end_training()
        return summary

    # --- the pieces of a run ------------------------------------------------------------------------------------

    def load_policy(self) -> HFPolicy:
        """The policy as the config loads it (recording its expert choices for ``routing_replay="rollout"``)."""
        config = self.config
        return HFPolicy.from_pretrained(
            config.policy,
            dtype=config.dtype,
            device=str(self.accelerator.device),
            attn_implementation=config.attn_implementation or None,
            seed=config.seed,
            record_routing=config.routing_replay == "rollout",
        )

    def warm_start(self, policy: HFPolicy, resume_from: Path | None, run_state: dict) -> None:
        """Imitate the env's (imperfect) demonstrator before GSPO; resumable, skipped once it has finished."""
        config, accelerator, out, model = self.config, self.accelerator, self.out, policy.model
        if run_state["phase"] == "gspo":
            return  # GSPO's checkpoint holds the weights
        progress = WarmStartProgress()
        if resume_from is not None:
            trainer_state, _ = load_warm_checkpoint(resume_from, model)
            progress.load_state_dict(trainer_state)
            accelerator.print(f"resumed from {resume_from} (warm-start step {progress.step})")
        if progress.step < config.warm_steps:
            demos = self.demonstrations(policy.renderer)
            self.warm_log["demonstrator_success"] = summarize(demos)["success"]

            def save(step: int) -> Path:
                return save_warm_checkpoint(
                    accelerator, out, step, model, progress.state_dict(), {"warm_log": self.warm_log}
                )

            def after_step(step: int, loss: float) -> bool:
                if config.warm_eval_every and step % config.warm_eval_every == 0:
                    model.eval()
                    result = self.evaluate(policy, EVAL_SEEDS[:64], temperature=1.0)
                    model.train()
                    self.warm_log["evals"].append({"step": step, "loss": loss, "success": result["success"]})
                    accelerator.print(
                        f"warm start step {step}/{config.warm_steps}: loss {loss:.3f} sampled success "
                        f"{result['success']:.2f}",
                        flush=True,
                    )
                elif step % 50 == 0:
                    accelerator.print(f"warm start step {step}/{config.warm_steps}: loss {loss:.3f}", flush=True)
                self.testing_hooks("warm", step)
                if self.stop_requested():
                    raise self.interrupted(f"the warm start (step {step} of {config.warm_steps})", save(step))
                if step % config.warm_checkpoint_every == 0 or step == config.warm_steps:
                    save(step)
                return False

            warm_start(
                model,
                demos,
                pad_token_id=policy.renderer.tokenizer.pad_token_id,
                steps=config.warm_steps,
                batch_size=config.warm_batch,
                lr=config.warm_lr,
                seed=config.seed,
                callback=after_step,
                progress=progress,
            )
        if accelerator.is_main_process:
            (out / "warm_start.json").write_text(json.dumps(self.warm_log))

    def demonstrations(self, renderer: Any) -> list:
        """The demonstrator's episodes: read from DIR/demonstrations.jsonl when an interrupted run wrote them
        (playing thousands of episodes again costs minutes), else played and written there."""
        config, path = self.config, self.out / "demonstrations.jsonl"
        if path.exists():
            demos = read_jsonl(path)
            if len(demos) == config.warm_demos:
                return demos
        demos = play_demonstrations(
            self.make_env,
            renderer,
            range(DEMO_SEED_BASE, DEMO_SEED_BASE + config.warm_demos),
            wrong_frac=config.warm_wrong_frac,
            seed=config.seed,
            env_id=config.env_id,
        )
        if self.accelerator.is_main_process:  # whole or not at all: another rank, or a rerun, may read it
            staging = path.with_name(f".{path.name}.tmp")
            write_jsonl(demos, staging)
            staging.rename(path)
        return demos

    def evaluate(self, policy: Any, seeds: range, *, temperature: float, save_to: Path | None = None) -> dict[str, Any]:
        """Success of ``policy`` on ``seeds`` of the held-out env (a fresh runner, no training): the env of
        ``final_eval_env_kwargs``, by default the training env's held-out split (a procedural env: its own, the
        seeds being disjoint from training's). ``save_to``: rank 0 writes the episodes there (JSONL)."""
        config = self.config
        kwargs, _ = final_eval_kwargs(config.env_id, config.env_kwargs, config.final_eval_env_kwargs)
        env_id, kwargs = resolve(bare_env_id(config.env_id), kwargs)
        rollout = RolloutConfig(
            group_size=1,
            max_turns=self.limits["max_turns"],
            max_context=self.limits["max_context"],
            env_call_timeout_s=config.env_call_timeout_s or None,  # the run's limits, as its training episodes
            env_budget_s=config.env_budget_s or None,
            sampler_timeout_s=config.sampler_timeout_s or None,
            sampling=SamplingParams(temperature=temperature, max_new_tokens=self.limits["max_new_tokens"]),
        )
        make_env = functools.partial(gym.make, env_id, disable_env_checker=True, **kwargs)
        episodes = RolloutRunner(make_env, policy, policy.renderer, rollout).run_sync(list(seeds), sampling_seed=12345)
        if save_to is not None and self.accelerator.is_main_process:
            save_to.parent.mkdir(parents=True, exist_ok=True)
            write_jsonl(episodes, save_to)
        return summarize(episodes)

    def sampler(self, policy: HFPolicy, folder: Path) -> Any:
        """The backend ``--backend`` names: the HF policy itself (it samples with the learner's module), or another
        backend loaded from ``folder`` (the weights and tokenizer written there)."""
        config = self.config
        if backend_class(config.backend).samples_with_learner_module:
            # Synchronous, it samples with the learner's own module; ahead of the learner it needs its own copy
            # (loaded here, given the learner's weights at each update).
            return policy if config.max_staleness == 0 else self.load_policy()
        save_weights(policy.model, folder)
        policy.renderer.tokenizer.save_pretrained(folder)
        return make_backend(
            str(folder),
            config.backend,
            **run_options(
                config.backend,
                seed=config.seed,
                server_urls=config.server_urls(),
                weight_transfer=config.weight_transfer,
            ),
        )

    def refresh_sampler(self, sampler: Any, model: Any, policy: HFPolicy, folder: Path) -> None:
        """Give the sampler the learner's current weights (gathered from the shards under FSDP2). Servers that fail
        the update (after the backend's second attempt) are retired and never serve a partial load; the run stops
        with an error naming them, unless ``allow_fewer_samplers`` says to train on with those that took it."""
        if is_sharded(model):
            load_sampler_weights(policy.model, full_state_dict(self.accelerator, model))  # a collective: every rank
            model = policy.model  # the unsharded copy: the sampler itself (hf), or what vLLM / the servers reload
        try:
            sync_weights(sampler, model, folder)
        except WeightUpdateFailed as exc:
            if not exc.serving or not self.config.allow_fewer_samplers:
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
            print(f"warning (rank {self.rank}, --allow-fewer-samplers): {exc}", file=sys.stderr, flush=True)

    def trained_with(self, renderer: Any) -> PolicySettings:
        """How to play the trained policy (DIR/final/agentgspo.json and each checkpoint's)."""
        config = self.config
        return PolicySettings(
            env_id=bare_env_id(config.env_id),
            env_kwargs=config.env_kwargs,
            chat={"end_of_turn": renderer.tokenizer.convert_ids_to_tokens(renderer.end_of_turn_id)},
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
            **self.limits,
        )

    def producer_state(self, run_state: dict[str, Any], step: int) -> dict[str, Any]:
        """Where this rank's rollouts resume: the checkpoint's producer state, else the data position of ``step``
        (a checkpoint written before rollouts had a producer: every position before it trained). A checkpoint
        written before the producer kept its trained ranges counts every position neither next nor pending as
        trained."""
        saved = run_state.get("producer")
        state = dict(saved[self.rank]) if saved else {"next_index": step * self.config.prompts_per_step}
        if "trained" not in state:
            before = set(range(state["next_index"])) - set(state.get("pending", ()))
            state["trained"] = to_ranges(before)
        return state

    def plan(self, index: int) -> tuple[int, int, int]:
        """Data position ``index`` of this process -> (env seed, group id, sampling seed): position i of step k's
        batch plays prompt TRAIN_SEED_BASE + (k x world + rank) x prompts_per_step + i (every rank its own
        prompts), sampled with seed x 1_000_003 + k, whenever it runs."""
        per_step = self.config.prompts_per_step
        step, position = divmod(index, per_step)
        seed = TRAIN_SEED_BASE + (step * self.world + self.rank) * per_step + position
        return seed, index, self.config.seed * 1_000_003 + step

    def log_step(
        self,
        logger: MetricsLogger,
        step: int,
        trajectories: list,
        stats: dict[str, Any],
        evaluated: dict[str, float] | None,
        *,
        version: int,
        waits: dict[str, float],
        learner_seconds: float,
    ) -> dict[str, float]:
        """One line of metrics.jsonl (and the console) for a step; returns the rollout metrics shared by all ranks.

        Staleness, per trajectory: the learner's version minus the oldest version that sampled one of its turns
        (``staleness_mean``, ``staleness_max``, and ``staleness_hist``: trajectories per value); ``version_span``:
        its newest minus its oldest turn version (> 0 when a weight update fell inside the episode). Busy shares:
        of the step's wall time, the learner's and the sampler's (what overlapping removes is the idle rest)."""
        batch = summarize(trajectories)
        shared = rollout_metrics_over_ranks(self.accelerator, batch)  # over the episodes trained on, all ranks
        spans = [(min(t.turn_versions), max(t.turn_version_ends)) for t in trajectories if t.turn_versions]
        staleness = [version - oldest for oldest, _ in spans] or [0]
        now = time.perf_counter()
        wall, self.step_started = now - self.step_started, now  # this step's wall time, rollouts included
        evaluated = evaluated or {}
        row = {
            **shared,
            **stats,
            "rollout_seconds": waits["rollout_wait_seconds"],
            "tokens_mean": batch["tokens_mean"],
            "samples": len(trajectories),
            "stop_reasons": batch["stop_reasons"],
            "staleness_mean": sum(staleness) / len(staleness),
            "staleness_max": max(staleness),
            "staleness_hist": dict(sorted(collections.Counter(staleness).items())),
            "version_span_max": max((newest - oldest for oldest, newest in spans), default=0),
            "dropped_groups": waits["dropped_groups"],
            "trained_beyond_staleness": waits["trained_beyond_staleness"],
            "step_seconds": wall,
            "learner_busy_frac": min(learner_seconds / wall, 1.0) if wall > 0 else 0.0,
            "sampler_busy_frac": min(waits["sampler_busy_seconds"] / wall, 1.0) if wall > 0 else 0.0,
            "elapsed_s": time.perf_counter() - self.started,
            **evaluated,
        }
        logger.log(step, row)
        shown = "".join(f" {name} {value:.3f}" for name, value in evaluated.items())
        self.accelerator.print(
            f"step {step}/{self.config.steps}: reward {shared['reward_mean']:.3f} success "
            f"{shared['success']:.3f} excluded {shared['excluded_frac']:.2f} "
            f"loss {stats.get('loss', 0.0):.4f} clip_seq {stats.get('clip_frac_seq', 0.0):.2f} "
            f"({waits['rollout_wait_seconds']:.1f} s rollout){shown}",
            flush=True,
        )
        return shared

    def checkpoint(self, step: int, producer: RolloutProducer) -> Path:
        """A GSPO checkpoint (every rank's state; the warm start's log; the rollouts' data positions; how to play
        it)."""
        # The producer's state: every rank's own (a collective).
        state = {"warm_log": self.warm_log, "producer": gather_object([producer.state()])}
        path = save_checkpoint(self.accelerator, self.out, step, state)
        if self.accelerator.is_main_process:
            write_policy_settings(path, self.trained_with(self.renderer))
        return path

    def stop_rule(self, success: list[float], step: int) -> str | None:
        """Why GSPO stops after ``step`` (``None``: it goes on): the success target, the step limit or the time cap."""
        config = self.config
        if config.stop_success is not None and len(success) >= SMOOTHING:
            smoothed = moving_average(success, SMOOTHING)[-1]
            if smoothed >= config.stop_success:
                return (
                    f"the {SMOOTHING}-step mean success reached {smoothed:.2f} >= {config.stop_success} "
                    f"(--stop-success) at GSPO step {step}"
                )
        if step >= config.steps:
            return f"it ran the most GSPO steps, {config.steps} (--steps)"
        minutes = (time.perf_counter() - self.started) / 60
        if config.max_minutes and minutes > config.max_minutes:
            return f"the time cap, {config.max_minutes:g} minutes (--max-minutes), passed at GSPO step {step}"
        return None

    def stop_requested(self) -> bool:
        """Whether any rank received a stop signal (every rank must stop at the same step)."""
        local = self.signals.signum is not None
        if self.world == 1:
            return local
        flags = self.accelerator.reduce(torch.tensor([float(local)], device=self.accelerator.device), reduction="sum")
        return bool(flags.item() > 0)

    def testing_hooks(self, phase: str, step: int) -> None:
        """The testing aids: SIGKILL after GSPO step ``kill_after_step``; wait for a signal at
        ``wait_for_interrupt_at``."""
        if phase == "gspo" and step == self.config.kill_after_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.config.wait_for_interrupt_at == f"{phase}:{step}":
            if self.accelerator.is_main_process:
                (self.out / INTERRUPT_MARKER).write_text(f"{phase}:{step}")
                print(f"waiting for SIGINT/SIGTERM after {phase}:{step} (--wait-for-interrupt-at)", flush=True)
            arrived = threading.Event()
            while self.signals.signum is None:  # the handler runs between waits; each wait is bounded
                arrived.wait(0.05)

    def previous_metrics(self) -> list[dict]:
        """The rows of DIR/metrics.jsonl (a resumed run's steps so far)."""
        path = self.out / "metrics.jsonl"
        return read_metrics(path) if path.exists() else []

    def finish(self, policy: HFPolicy, model: Any, stopped: str, step: int) -> dict[str, Any]:
        """The final policy, evaluation, plot and summary; every rank returns rank 0's summary."""
        config, accelerator, out = self.config, self.accelerator, self.out
        model.eval()
        final_eval = None
        if config.final_eval_episodes:
            seeds = EVAL_SEEDS[: config.final_eval_episodes]
            kwargs, held_out_by = final_eval_kwargs(config.env_id, config.env_kwargs, config.final_eval_env_kwargs)
            sampled = self.evaluate(policy, seeds, temperature=1.0, save_to=out / "final_eval" / "sampled.jsonl")
            greedy = self.evaluate(policy, seeds, temperature=0.0, save_to=out / "final_eval" / "greedy.jsonl")
            final_eval = {
                "sampled": sampled["success"],
                "greedy": greedy["success"],
                "episodes": len(seeds),
                # What was evaluated: the env's kwargs, its split ("test": held-out rows; None: all of that env's
                # tasks), what holds them out ("split", "seeds" disjoint from training's, or the "env_kwargs" given).
                "env_kwargs": kwargs,
                "split": kwargs.get("split"),
                "held_out_by": held_out_by,
                "seeds": [seeds.start, seeds.stop],
            }
        # Each rank's full weights (under FSDP2 the sampler's unsharded copy, refreshed after the last step).
        local = sum(p.detach().double().abs().sum() for p in policy.model.parameters())
        checksums = accelerator.gather(torch.stack([local.to(accelerator.device)])).tolist()  # equal when in sync
        self.save_final(model, policy.renderer)
        summary = None
        if accelerator.is_main_process:
            metrics = self.previous_metrics()
            summary = {
                "stopped": stopped,
                "steps": step,
                "seconds": time.perf_counter() - self.started,
                "reward_mean": [row["reward_mean"] for row in metrics],
                "success": [row["success"] for row in metrics],
                "final_eval": final_eval,
                "warm_start": self.warm_log,  # the demonstrators' success and the warm start's evaluations
                "parameter_checksums": checksums,
            }
            shown = (
                f"\nfinal eval success: sampled {final_eval['sampled']:.2f}, greedy {final_eval['greedy']:.2f}"
                if final_eval
                else ""
            )
            plot_training(
                metrics,
                out / "reward.png",
                warm_start=self.warm_log["evals"],
                demonstrator_success=self.warm_log["demonstrator_success"],
                window=SMOOTHING,
                target=config.stop_success,
                title=f"GSPO on {config.env_id}{shown}",
            )
            (out / SUMMARY).write_text(json.dumps(summary))
            _report(out, summary)
        # Every rank returns rank 0's numbers (so all exit with one status), only once its files are written.
        return broadcast_object_list([summary], from_process=0)[0]

    def save_final(self, model: Any, renderer: Any) -> None:
        """The trained policy as a ``save_pretrained`` folder (full weights) with its tokenizer and settings."""
        accelerator, folder = self.accelerator, self.out / "final"
        state = full_state_dict(accelerator, model, all_ranks=False)  # a collective under FSDP2 / DeepSpeed
        if not accelerator.is_main_process:
            return
        base = accelerator.unwrap_model(model)
        # One copy of tied tensors (lm_head tied to the embedding): named_parameters lists each tensor once.
        stored = {name for name, _ in base.named_parameters()} | {name for name, _ in base.named_buffers()}
        state = {name: tensor for name, tensor in state.items() if name in stored}
        with no_transformers_progress_bars():
            base.save_pretrained(folder, state_dict=state)
            renderer.tokenizer.save_pretrained(folder)
        write_policy_settings(folder, self.trained_with(renderer))


def _report(out: Path, summary: dict[str, Any]) -> None:
    """The last lines: why it stopped, the numbers and where each output is."""
    print(f"stopped: {summary.get('stopped')}", flush=True)
    success, final_eval = summary.get("success") or [], summary.get("final_eval")
    first = f" (first GSPO step: {success[0]:.2f})" if success else ""
    if final_eval:
        what = {  # what held the evaluated tasks out (a summary written before splits says nothing)
            "split": f" (the env's held-out split {final_eval.get('split')!r})",
            "seeds": " (seeds disjoint from training's)",
            "env_kwargs": " (the env of --final-eval-env-kwargs)",
        }.get(final_eval.get("held_out_by"), "")
        print(
            f"final eval on {final_eval['episodes']} held-out prompts: sampled success {final_eval['sampled']:.2f}, "
            f"greedy {final_eval['greedy']:.2f}{first}; {summary['seconds']:.0f} s{what}"
        )
    else:
        print(f"reward per step {[round(r, 3) for r in summary.get('reward_mean', [])]}; {summary['seconds']:.0f} s")
    print(f"outputs in {out}/:")
    for name, what in (
        ("final/", "the trained policy (save_pretrained; agentgspo.json: the env and limits it was trained with)"),
        ("summary.json", "these numbers"),
        ("final_eval/", "the final evaluation's episodes, sampled.jsonl and greedy.jsonl (agentgspo view FILE)"),
        ("metrics.jsonl", "one line per GSPO step"),
        ("reward.png", "the training curves"),
        ("trajectories/", "the episodes of every --trajectories-every steps (agentgspo view FILE)"),
        ("tensorboard/", f"TensorBoard events: tensorboard --logdir {out / 'tensorboard'}"),
        ("checkpoints/", "the last checkpoints"),
        ("config.json", "the settings of this run"),
    ):
        print(f"  {name:<16} {what}")
    print(f"play it: agentgspo rollout --policy {out / 'final'} --out {out / 'rollout'}", flush=True)


if __name__ == "__main__":
    exit_process(
        run_recipe(
            TrainConfig,
            smoke=SMOKE,
            command="python -m agentgspo.training.train",
            description="One GSPO run; every setting is a flag (see --help).",
        )
    )
