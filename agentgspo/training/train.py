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

import copy
import dataclasses
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, gather_object, set_seed
from transformers import get_scheduler

from agentgspo.environments.registry import make, resolve
from agentgspo.learning.config import LearnerConfig
from agentgspo.learning.learner import GSPOLearner
from agentgspo.learning.sharding import (
    is_sharded,
    prepare_policy,
)
from agentgspo.core.sampling import SamplingParams
from agentgspo.policy.factory import close_backend
from agentgspo.policy.hf import HFPolicy
from agentgspo.policy.loading import resolve_checkpoint
from agentgspo.policy.policy_settings import PolicySettings, write_policy_settings
from agentgspo.rollouts.producer import RolloutProducer, to_ranges
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
from agentgspo.core.trajectory import write_jsonl
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
    step_metrics,
)
from agentgspo.training.run_folder import RunInterrupted, StopSignals, check_run_folder
from agentgspo.core.settings import flags_of, resumable_settings, resume_command
from agentgspo.training.config import (
    INTERRUPT_MARKER,
    SMOKE,
    SMOOTHING,
    TrainConfig,
    bare_env_id,
    episode_limits,
)
from agentgspo.training.final import evaluate, final_evaluation, report, save_final
from agentgspo.training.recipe import Evaluation, Recipe
from agentgspo.training.sampler import make_sampler, refresh_sampler
from agentgspo.training.sft import WarmStartProgress, cached_demonstrations, play_demonstrations, warm_start

__all__ = [
    "TrainConfig",
    "SMOKE",
    "Evaluation",
    "Recipe",
    "TRAIN",
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
SUMMARY = "summary.json"

#: The command line of ``python -m agentgspo.training.train``: TrainConfig's own defaults.
TRAIN = Recipe(
    command="python -m agentgspo.training.train", description="One GSPO run; every setting is a flag (see --help)."
)


def run_recipe(recipe: Recipe, argv: list[str] | None = None) -> int:
    """A recipe's command line: its settings from ``argv`` (:func:`agentgspo.core.settings.load_config`: flags over
    ``--config`` over ``--smoke`` over the recipe's defaults), then :func:`run_config`; bad settings give one line and
    exit status 2."""
    try:
        config = recipe.load(argv)
    except ValueError as exc:
        print(f"{recipe.command}: error: {exc}", file=sys.stderr)
        return 2
    return run_config(config, recipe)


def run_config(config: TrainConfig, recipe: Recipe = TRAIN) -> int:
    """:func:`train` and its exit status: 0 done (and ``recipe.succeeded(summary)`` when given, else 1), 130/143
    interrupted after a checkpoint, 2 for bad input, with one line, not a traceback, for an interruption or bad
    input."""
    try:
        summary = train(config, recipe)
    except RunInterrupted as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt as exc:
        print(f"interrupted: {exc or 'stopped without saving'}", file=sys.stderr)
        return 130
    except (ValueError, LookupError, FileNotFoundError) as exc:
        print(f"{recipe.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0 if recipe.succeeded is None or recipe.succeeded(summary) else 1


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


def train(config: TrainConfig, recipe: Recipe = TRAIN) -> dict[str, Any]:
    """Run GSPO as ``config`` says (see the module docstring), as part of ``recipe`` (its command and defaults name
    the resume command; its evaluation, if any, runs during training); returns the summary written to
    DIR/summary.json (the same on every rank). Raises :class:`~agentgspo.training.run_folder.RunInterrupted` after
    a checkpoint on SIGINT/SIGTERM and ``RunFolderMismatch`` for a folder holding a run with other settings."""
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
        command=recipe.command,
        ignore=resumable_settings(type(config)),
        flag_of=flags_of(type(config)),
        defaults=json.loads(json.dumps(dataclasses.asdict(type(config)(**recipe.defaults)), default=str)),
    )
    if (out / SUMMARY).exists():
        summary = json.loads((out / SUMMARY).read_text())
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"{out} holds a finished run: nothing to do (pass another --out to train again).")
            report(out, summary)
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
        return _Run(config, recipe, accelerator, out, hparams, signals, started).run()


class _Run:
    """One run's state: the pieces :func:`train` builds, then the loop (:meth:`run`)."""

    def __init__(
        self,
        config: TrainConfig,
        recipe: Recipe,
        accelerator: Accelerator,
        out: Path,
        hparams: dict,
        signals: StopSignals,
        started: float,
    ):
        self.config, self.recipe, self.accelerator, self.out, self.hparams = config, recipe, accelerator, out, hparams
        self.signals, self.started = signals, started
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
            f"with: {resume_command(self.config, self.recipe.command, self.recipe.defaults)}",
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
        sampler = make_sampler(config, policy, sampler_folder, self.load_policy)
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
        evaluate = self.recipe.evaluation is not None and accelerator.is_main_process
        evaluation = self.recipe.evaluation(config, out / "eval", rollout) if evaluate else None
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
                    result = evaluate(policy, config, self.limits, EVAL_SEEDS[:64], temperature=1.0)
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
        """The demonstrator's episodes, kept in DIR/demonstrations.jsonl (a rerun reads them back)."""
        seeds = range(DEMO_SEED_BASE, DEMO_SEED_BASE + self.config.warm_demos)
        return cached_demonstrations(
            self.out / "demonstrations.jsonl",
            lambda: play_demonstrations(
                self.make_env,
                renderer,
                seeds,
                wrong_frac=self.config.warm_wrong_frac,
                seed=self.config.seed,
                env_id=self.config.env_id,
            ),
            count=len(seeds),
            write=self.accelerator.is_main_process,
        )

    def refresh_sampler(self, sampler: Any, model: Any, policy: HFPolicy, folder: Path) -> None:
        """The learner's weights into the sampler (:func:`agentgspo.training.sampler.refresh_sampler`)."""
        refresh_sampler(
            sampler,
            model,
            policy,
            folder,
            accelerator=self.accelerator,
            allow_fewer_samplers=self.config.allow_fewer_samplers,
        )

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
        """One line of metrics.jsonl (and the console) for a step (:func:`agentgspo.training.metrics.step_metrics`:
        staleness, busy shares); returns the rollout metrics shared by all ranks."""
        batch = summarize(trajectories)
        shared = rollout_metrics_over_ranks(self.accelerator, batch)  # over the episodes trained on, all ranks
        now = time.perf_counter()
        wall, self.step_started = now - self.step_started, now  # this step's wall time, rollouts included
        evaluated = evaluated or {}
        row = {
            **shared,
            **stats,
            **step_metrics(
                trajectories, batch, version=version, waits=waits, learner_seconds=learner_seconds, wall=wall
            ),
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
            seeds, folder = EVAL_SEEDS[: config.final_eval_episodes], out / "final_eval"
            final_eval = final_evaluation(
                policy, config, self.limits, seeds, folder if accelerator.is_main_process else None
            )
        # Each rank's full weights (under FSDP2 the sampler's unsharded copy, refreshed after the last step).
        local = sum(p.detach().double().abs().sum() for p in policy.model.parameters())
        checksums = accelerator.gather(torch.stack([local.to(accelerator.device)])).tolist()  # equal when in sync
        save_final(accelerator, model, policy.renderer, out / "final", self.trained_with(policy.renderer))
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
            report(out, summary)
        # Every rank returns rank 0's numbers (so all exit with one status), only once its files are written.
        return broadcast_object_list([summary], from_process=0)[0]


if __name__ == "__main__":
    exit_process(run_recipe(TRAIN))
