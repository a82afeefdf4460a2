"""Quickstart: teach the tiny MoE policy to use a calculator tool with GSPO, on CPU, in minutes.

What it does: build the embedded tiny Qwen3-MoE (~0.75M params, 4 experts top-2, character tokenizer), warm-start it
by imitating an imperfect demonstrator on `agentgspo/Calculator-v0` (the env's oracle in 40% of the episodes, its
`wrong` policy, which answers without the tool, in 60%), then train it with GSPO on its own multi-turn rollouts
(turn 1: a `calculate` tool call; the tool's reply is masked out of the loss; turn 2: `<answer>N</answer>`; reward 1
for the right value) until the 10-step mean success reaches 0.95. Imitation alone settles at the demonstrator's
0.4: what GSPO adds beyond it is the policy's own doing.

Why an imperfect demonstrator (measured on these 2 cores): imitating the oracle until success reaches 0.3-0.5 and
then running GSPO plateaus at 0.80-0.85, because a tiny model stopped that early copies the tool's result by a fixed
offset learned from the five-digit results (84% of the questions): every four-digit result fails, every sample of
it alike, so GSPO's groups carry no signal there. Imitating the mixed demonstrator to convergence (8,192 episodes,
LR decayed to 0; from 512 episodes the copy stays positional) teaches an exact copy of any length in the tool-using
episodes, and GSPO's job becomes the agent's decision: use the tool. Measured, seeds 0-2: first GSPO step 0.40-0.42,
final sampled success 0.94-0.95 (greedy 1.00), 197-218 s for the whole command.

Deviations from the paper (arXiv 2507.18071), all for a 2-core CPU:
- a supervised warm start first: a random 0.75M-param model never emits a well-formed tool call by chance;
- logp_old is the sampler's log-prob (paper §5.4) instead of a recomputation: the sampler is the same fp32 model,
  so the two agree to ~1e-7 (logged as `sampler_logprob_gap` when recomputing) and a forward pass is saved;
- no system prompt in the env (the demonstrations teach the format) to halve the tokens per episode; the trained
  policy records it (``final/agentgspo.json``), so `agentgspo rollout --policy DIR/final` plays it the same way.

Launch:
    CPU:          agentgspo quickstart --out runs/quickstart      (or: python recipes/quickstart.py --out ...)
    2 processes:  accelerate launch --multi_gpu --num_processes 2 recipes/quickstart.py --out runs/q2
                  (on CPU this runs DDP over gloo; each rank plays its own prompts)
    1 GPU:        accelerate launch recipes/quickstart.py --out runs/q --device cuda
Interrupt (Ctrl-C or SIGTERM): the run finishes its step, saves a checkpoint (warm start included) and exits
130/143 with the command that resumes it: the same command again. A folder holding a run with other settings is
refused; a finished run's folder reports its results at once. Resume is exact (state, data order, RNG streams):
measured with --logp-old recompute, a run interrupted in the warm start and in GSPO ends with the uninterrupted
run's parameters bit for bit; with the default sampler log-probs, whose float round-off depends on which episodes
share a sampling batch (timing), two runs agree to round-off amplified by training (1.2e-3 after 31 steps).
Outputs: DIR/metrics.jsonl, DIR/reward.png, DIR/final/ (save_pretrained, and agentgspo.json: env and limits it was
trained with), DIR/final_eval.json, DIR/checkpoints/, DIR/tensorboard/.
"""

from __future__ import annotations

import os
import sys
import argparse
import dataclasses
import json
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, set_seed
from tqdm import tqdm
from transformers import get_scheduler

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.training.checkpoint import (latest_checkpoint, load_checkpoint, load_warm_checkpoint, read_run_state,
                                  save_checkpoint, save_warm_checkpoint)
from agentgspo.learning.learner import GSPOLearner, LearnerConfig
from agentgspo.training.metrics import (MetricsLogger, moving_average, plot_training, read_metrics,
                                    rollout_metrics_over_ranks)
from agentgspo.policy.base import SamplingParams
from agentgspo.policy.hf import HFPolicy
from agentgspo.policy.factory import backend_class, make_backend, run_options
from agentgspo.policy.weight_sync import save_weights, sync_weights
from agentgspo.policy.policy_settings import PolicySettings, write_policy_settings
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
from agentgspo.training.run_folder import RunInterrupted, StopSignals, check_run_folder
from agentgspo.training.sft import WarmStartProgress, play_demonstrations, warm_start

EVAL_SEEDS = range(0, 256)  # held out: training prompts start at TRAIN_SEED_BASE
TRAIN_SEED_BASE = 1_000_000
DEMO_SEED_BASE = 9_000_000
SMOOTHING = 10  # steps in the moving average of the stopping rule (and the plot)
COMMAND = "agentgspo quickstart"
FINAL_EVAL = "final_eval.json"
INTERRUPT_MARKER = "waiting-for-interrupt"  # written by --wait-for-interrupt-at (testing)


def _setting(default: Any, help: str, type: Any = None) -> Any:  # noqa: A002 -- argparse's names
    return field(default=default, metadata={"help": help, "type": type})


@dataclass
class QuickstartConfig:
    """Every setting of the quickstart (saved to DIR/config.json at start; a rerun must match it to resume)."""

    out: str = _setting("runs/quickstart", "run folder: checkpoints, metrics, plot and the trained policy go here")
    seed: int = _setting(0, "seed of the model init, data order and sampling")
    device: str = _setting("cpu", "'cpu' or 'cuda'")
    backend: str = _setting("hf", "who samples the rollouts: 'hf' (this process's model), 'vllm' (a vLLM engine in "
                                  "this process) or 'server' (--server-url); vllm and server get the weights after "
                                  "each GSPO step")
    server_url: str = _setting("", "comma-separated base URLs of `agentgspo serve-policy` servers (--backend "
                                   "server); they read the weights from DIR/sampler-RANK/ (a shared file system)")
    env_id: str = _setting("agentgspo/Calculator-v0", "registered env id with `oracle` and `wrong` policies "
                                                       "(the demonstrator)")
    env_kwargs: str = _setting('{"system_prompt": null}', "JSON keyword arguments of the env (no system prompt: the "
                                                          "demonstrations teach the format)")
    # Supervised warm start on an imperfect demonstrator's transcripts (loss on assistant tokens only).
    demos: int = _setting(8192, "demonstration episodes (from 512 the copy skill is memorised by position, not "
                                "learned)")
    demo_wrong_frac: float = _setting(0.6, "share of the demonstrations played by the env's `wrong` policy (the "
                                           "rest by its oracle)")
    warm_lr: float = _setting(3e-3, "warm start learning rate (linearly decayed to 0)")
    warm_batch: int = _setting(64, "demonstrations per warm-start step")
    warm_steps: int = _setting(500, "warm-start AdamW steps (the copy skill appears near step 220, exact by ~450)")
    warm_eval_every: int = _setting(50, "warm-start steps between evals of sampled success on 64 held-out prompts "
                                        "(for the plot)")
    warm_checkpoint_every: int = _setting(100, "warm-start steps between checkpoints (an interruption saves one "
                                               "too)")
    # GSPO.
    steps: int = _setting(400, "most GSPO steps")
    prompts_per_step: int = _setting(16, "prompts per GSPO step, per process")
    group_size: int = _setting(8, "samples per prompt (the group GSPO's advantages compare)")
    lr: float = _setting(1e-4, "GSPO learning rate")
    warmup_steps: int = _setting(8, "optimizer steps of linear LR warm-up")
    minibatches: int = _setting(4, "optimizer steps per rollout batch (paper §5.1)")
    eps_low: float = _setting(3e-4, "lower clip range of the sequence ratio (paper §5.1)")
    eps_high: float = _setting(4e-4, "upper clip range of the sequence ratio (paper §5.1)")
    logp_old: str = _setting("sampler", "'sampler': the sampler's log-probs as the old policy's (see the "
                                        "docstring); 'recompute': a forward pass")
    temperature: float = _setting(1.0, "sampling temperature of the rollouts")
    max_new_tokens: int = _setting(24, "ids per assistant turn (a tool call is 20, an answer under 10: a longer "
                                       "turn is already wrong)")
    max_turns: int | None = _setting(None, "assistant turns per episode (default: the env's budget)", int)
    max_context: int | None = _setting(None, "ids per episode (default: the env's budget)", int)
    stop_success: float = _setting(0.95, f"stop once the {SMOOTHING}-step mean success reaches this")
    max_minutes: float = _setting(9.0, "time cap: GSPO stops once the command has run this many minutes (the "
                                       "final eval adds ~15 s)")
    checkpoint_every: int = _setting(10, "GSPO steps between checkpoints (an interruption saves one too)")
    eval_episodes: int = _setting(256, "held-out prompts of the final evaluation")
    kill_after_step: int = _setting(0, "testing exact resume: SIGKILL this process right after that GSPO step "
                                       "(0: never)")
    wait_for_interrupt_at: str = _setting("", "testing interruption: after warm-start step N ('warm:N') or GSPO "
                                              f"step N ('gspo:N'), write DIR/{INTERRUPT_MARKER} and wait for "
                                              "SIGINT/SIGTERM")


# Settings that do not change what the run computes: a rerun may change them and still resume.
RESUMABLE_WITH_OTHER = ("out", "max_minutes", "checkpoint_every", "warm_checkpoint_every", "kill_after_step",
                        "wait_for_interrupt_at")


def flag(name: str) -> str:
    """The command-line flag of config field ``name``."""
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per :class:`QuickstartConfig` field, with its help text and default."""
    for spec in dataclasses.fields(QuickstartConfig):
        kind = spec.metadata.get("type") or type(spec.default)
        parser.add_argument(flag(spec.name), dest=spec.name, type=kind, default=spec.default,
                            help=f"{spec.metadata['help']} (default: {spec.default})")


def parse_config(argv: list[str] | None = None) -> QuickstartConfig:
    """Command-line flags, one per config field."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    return QuickstartConfig(**vars(parser.parse_args(argv)))


def resume_command(config: QuickstartConfig) -> str:
    """The command that continues this run: the flags that differ from the defaults (testing ones left out)."""
    import shlex

    defaults = QuickstartConfig()
    parts = [flag("out"), config.out]
    for spec in dataclasses.fields(QuickstartConfig):
        value = getattr(config, spec.name)
        if (spec.name not in ("out", "kill_after_step", "wait_for_interrupt_at")
                and value != getattr(defaults, spec.name)):
            parts += [flag(spec.name), value if isinstance(value, str) else json.dumps(value)]
    return " ".join([COMMAND, *map(shlex.quote, parts)])


def evaluate(make_env, policy, renderer, *, seeds, temperature: float, max_new_tokens: int, max_turns: int,
             max_context: int) -> dict:
    """Success of the policy on ``seeds`` (a fresh runner, no training)."""
    config = RolloutConfig(group_size=1, max_turns=max_turns, max_context=max_context,
                           sampling=SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens))
    return summarize(RolloutRunner(make_env, policy, renderer, config).run_sync(list(seeds), sampling_seed=12345))


def _env_settings(config: QuickstartConfig) -> tuple[dict, int, int]:
    """The env's keyword arguments (checked against its constructor) and the episode limits (flags, else the env's
    budget, else the library defaults)."""
    import importlib

    from agentgspo.policy.policy_settings import LIMIT_DEFAULTS
    from agentgspo.environments.registry import check_env_kwargs, env_budget, make

    try:
        env_kwargs = json.loads(config.env_kwargs)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--env-kwargs must be a JSON object, got {config.env_kwargs!r} ({exc})") from None
    if not isinstance(env_kwargs, dict):
        raise ValueError(f"--env-kwargs must be a JSON object, got {config.env_kwargs!r}")
    module, _, env_id = config.env_id.rpartition(":")  # gymnasium's "module:id" form imports the module first
    if module:
        importlib.import_module(module)
    make(env_id, **env_kwargs).close()  # an unknown id or keyword: an error naming close matches, before any work
    check_env_kwargs(env_id, env_kwargs)
    budget = env_budget(env_id)
    max_turns = config.max_turns or (budget.max_turns if budget else LIMIT_DEFAULTS["max_turns"])
    max_context = config.max_context or (budget.max_context if budget else LIMIT_DEFAULTS["max_context"])
    return env_kwargs, max_turns, max_context


def _wait_for_interrupt(accelerator: Accelerator, out: Path, signals: StopSignals, where: str) -> None:
    """Testing aid (--wait-for-interrupt-at): write the marker file, then wait until a stop signal arrives."""
    if accelerator.is_main_process:
        (out / INTERRUPT_MARKER).write_text(where)
        print(f"waiting for SIGINT/SIGTERM after {where} (--wait-for-interrupt-at)", flush=True)
    arrived = threading.Event()
    while signals.signum is None:  # the handler runs between waits; each wait is bounded, never a fixed sleep
        arrived.wait(0.05)


def _stop_requested(accelerator: Accelerator, signals: StopSignals) -> bool:
    """Whether any rank received a stop signal (every rank must stop at the same step)."""
    local = signals.signum is not None
    if accelerator.num_processes == 1:
        return local
    flags = accelerator.reduce(torch.tensor([float(local)], device=accelerator.device), reduction="sum")
    return bool(flags.item() > 0)


def main(config: QuickstartConfig | None = None) -> dict:
    """Run the quickstart; returns the final evaluation. Raises :class:`RunInterrupted` (after a checkpoint) on
    SIGINT/SIGTERM and ``RunFolderMismatch`` for a folder holding a run with other settings."""
    config = config or parse_config()
    started = time.perf_counter()
    out = Path(config.out)
    world = int(os.environ.get("WORLD_SIZE", "1"))  # set by `accelerate launch` (and torchrun) on every rank
    hparams = {"recipe": "quickstart", "world_size": world, **dataclasses.asdict(config)}
    flags = {spec.name: flag(spec.name) for spec in dataclasses.fields(QuickstartConfig)}
    check_run_folder(out, hparams, command=COMMAND, flag_of=flags, ignore=RESUMABLE_WITH_OTHER,
                     defaults=dataclasses.asdict(QuickstartConfig()))
    if (out / FINAL_EVAL).exists():  # finished: say so at once, with its results
        final = json.loads((out / FINAL_EVAL).read_text())
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"{out} holds a finished run: nothing to do (pass another --out to train again).")
            _print_report(out, final)
        return final
    env_kwargs, max_turns, max_context = _env_settings(config)
    accelerator = Accelerator(cpu=config.device == "cpu")
    rank = accelerator.process_index
    if accelerator.num_processes != world:
        raise ValueError(f"WORLD_SIZE says {world} processes but accelerate started {accelerator.num_processes}; "
                         "launch with `accelerate launch` (or torchrun), which sets both")
    if accelerator.is_main_process:  # before any work: a rerun with other settings is refused from the start
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(hparams, indent=2, default=str))
    with StopSignals(announce=accelerator.is_main_process) as signals:
        return _train(config, accelerator, out, hparams, env_kwargs, max_turns, max_context, signals, started,
                      rank, world)


def _train(config: QuickstartConfig, accelerator: Accelerator, out: Path, hparams: dict, env_kwargs: dict,
           max_turns: int, max_context: int, signals: StopSignals, started: float, rank: int, world: int) -> dict:
    set_seed(config.seed)  # same init on every rank

    def make_env() -> gym.Env:
        return gym.make(config.env_id, disable_env_checker=True, **env_kwargs)

    def interrupted(where: str, checkpoint: Path) -> RunInterrupted:
        return RunInterrupted(signals.signum, f"{signals.name} during {where}: saved {checkpoint}. Resume with: "
                                              f"{resume_command(config)}")

    wait_phase, _, wait_step = config.wait_for_interrupt_at.partition(":")
    # Policy and sampler: the sampler shares the trainer's weights (colocated), so no weight sync is needed.
    policy = HFPolicy.from_pretrained("tiny", device=str(accelerator.device), seed=config.seed)
    renderer, model = policy.renderer, policy.model
    pad_token_id = renderer.tokenizer.pad_token_id
    limits = dict(max_new_tokens=config.max_new_tokens, max_turns=max_turns, max_context=max_context)

    resume_from = latest_checkpoint(out)
    run_state = read_run_state(resume_from) if resume_from is not None else {"phase": "warm_start", "step": 0}
    warm_log: dict = run_state.get("warm_log", {"demonstrator_success": None, "evals": []})
    if run_state["phase"] == "warm_start" and run_state["step"] < config.warm_steps:
        # Warm start (from its checkpoint when there is one): imitate the demonstrator.
        progress = WarmStartProgress()
        if resume_from is not None:
            trainer_state, _ = load_warm_checkpoint(resume_from, model)
            progress.load_state_dict(trainer_state)
            accelerator.print(f"resumed from {resume_from} (warm-start step {progress.step}); replaying the "
                              "demonstrations")
        demos = _demonstrations(config, accelerator, out, make_env, renderer)
        warm_log["demonstrator_success"] = summarize(demos)["success"]

        def save_warm(step: int) -> Path:
            return save_warm_checkpoint(accelerator, out, step, model, progress.state_dict(),
                                        {"warm_log": warm_log})

        def after_warm_step(step: int, loss: float) -> bool:
            if step % config.warm_eval_every == 0:
                model.eval()
                result = evaluate(make_env, policy, renderer, seeds=EVAL_SEEDS[:64], temperature=1.0, **limits)
                model.train()
                warm_log["evals"].append({"step": step, "loss": loss, "success": result["success"]})
                accelerator.print(f"warm start step {step}: loss {loss:.3f} sampled success {result['success']:.2f}")
            if wait_phase == "warm" and step == int(wait_step):
                _wait_for_interrupt(accelerator, out, signals, f"warm:{step}")
            if _stop_requested(accelerator, signals):
                raise interrupted(f"the warm start (step {step} of {config.warm_steps})", save_warm(step))
            if step % config.warm_checkpoint_every == 0 or step == config.warm_steps:
                save_warm(step)
            return False

        warm_start(model, demos, pad_token_id=pad_token_id, steps=config.warm_steps, batch_size=config.warm_batch,
                   lr=config.warm_lr, seed=config.seed, callback=after_warm_step, progress=progress)
        del demos
    elif run_state["phase"] == "warm_start":  # the warm start had finished: its weights start GSPO
        load_warm_checkpoint(resume_from, model)
        accelerator.print(f"resumed from {resume_from} (warm start done)")
    if accelerator.is_main_process:
        (out / "warm_start.json").write_text(json.dumps(warm_log))

    # Learner: AdamW, linear warm-up then constant LR, GSPO with the paper's clip band and 4 minibatches.
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    scheduler = get_scheduler("constant_with_warmup", optimizer, num_warmup_steps=config.warmup_steps)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    policy.model = accelerator.unwrap_model(model)
    learner = GSPOLearner(
        model, optimizer, accelerator, pad_token_id=pad_token_id, scheduler=scheduler, seed=config.seed + rank,
        config=LearnerConfig(objective="gspo", eps_low=config.eps_low, eps_high=config.eps_high,
                             minibatches=config.minibatches, logp_old=config.logp_old,
                             temperature=config.temperature),
    )
    accelerator.register_for_checkpointing(learner)
    start_step = 0
    if run_state["phase"] == "gspo":
        start_step = load_checkpoint(accelerator, resume_from)["step"]
        accelerator.print(f"resumed from {resume_from} at step {start_step}")

    logger = MetricsLogger(out, hparams, resume_step=start_step, enabled=accelerator.is_main_process)
    sampler = _sampler(config, policy, model, out / f"sampler-{rank}")
    runner = RolloutRunner(make_env, sampler, renderer, RolloutConfig(
        group_size=config.group_size, max_turns=max_turns, max_context=max_context,
        sampling=SamplingParams(temperature=config.temperature, max_new_tokens=config.max_new_tokens)),
        env_id=config.env_id)

    trained_with = PolicySettings(  # final/agentgspo.json and each checkpoint's: how to play this policy
        env_id=config.env_id.rpartition(":")[2], env_kwargs=env_kwargs,
        chat={"end_of_turn": renderer.tokenizer.convert_ids_to_tokens(renderer.end_of_turn_id)},
        max_turns=max_turns, max_new_tokens=config.max_new_tokens, max_context=max_context,
        temperature=config.temperature, top_p=1.0)

    def checkpoint(step: int) -> Path:
        path = save_checkpoint(accelerator, out, step, {"warm_log": warm_log})
        if accelerator.is_main_process:
            write_policy_settings(path, trained_with)
        return path

    history = [m["success"] for m in _previous_metrics(out, start_step)]
    accelerator.print(f"GSPO: stops at a {SMOOTHING}-step mean success >= {config.stop_success} (--stop-success), "
                      f"after {config.steps} steps (--steps) or {config.max_minutes:g} minutes (--max-minutes)")
    stopped = _stop_rule(config, history, start_step, started)
    bar = tqdm(total=config.steps, initial=start_step, desc="GSPO step", disable=not accelerator.is_main_process,
               bar_format="{desc} {n_fmt} [{elapsed}, {rate_fmt}{postfix}]")  # no ETA: it stops on success
    step = start_step
    while stopped is None:
        # Data position = step: every rank plays its own disjoint prompts, the same after a resume.
        first = TRAIN_SEED_BASE + (step * world + rank) * config.prompts_per_step
        rollout_started = time.perf_counter()
        model.eval()
        trajectories = runner.run_sync(range(first, first + config.prompts_per_step),
                                       sampling_seed=config.seed * 1_000_003 + step)
        model.train()
        rollout_seconds = time.perf_counter() - rollout_started
        stats = learner.step(trajectories)
        sync_weights(sampler, model, None if sampler is policy else out / f"sampler-{rank}")
        batch = summarize(trajectories)
        # Rewards and success over all ranks' trained episodes (every rank takes the same stopping decision).
        shared = rollout_metrics_over_ranks(accelerator, batch)
        metrics = {**shared, **stats,
                   "rollout_seconds": rollout_seconds, "tokens_mean": batch["tokens_mean"],
                   "stop_reasons": batch["stop_reasons"], "elapsed_s": time.perf_counter() - started}
        step += 1
        logger.log(step, metrics)
        history.append(shared["success"])
        bar.update(1)
        bar.set_postfix(reward=f"{shared['reward_mean']:.2f}", clip_seq=f"{stats.get('clip_frac_seq', 0):.2f}",
                        loss=f"{stats.get('loss', 0):.4f}", vol=f"{stats.get('routing_volatility', 0):.3f}")
        stopped = _stop_rule(config, history, step, started)
        saved = None
        if step % config.checkpoint_every == 0 or stopped is not None:  # the last step too: a rerun reports
            saved = checkpoint(step)
        if step == config.kill_after_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if wait_phase == "gspo" and step == int(wait_step):
            _wait_for_interrupt(accelerator, out, signals, f"gspo:{step}")
        if stopped is None and _stop_requested(accelerator, signals):
            bar.close()
            logger.close()
            raise interrupted(f"GSPO (step {step})", saved or checkpoint(step))
    bar.close()
    if sampler is not policy and hasattr(sampler, "close"):
        sampler.close()  # the in-process engine's processes; the final evaluation uses this process's model

    # Final evaluation on held-out prompts, the policy saved for any backend, and the plot.
    model.eval()
    seeds = EVAL_SEEDS[: config.eval_episodes]
    final = {
        "stopped": stopped,
        "steps": step,
        "sampled": evaluate(make_env, policy, renderer, seeds=seeds, temperature=1.0, **limits)["success"],
        "greedy": evaluate(make_env, policy, renderer, seeds=seeds, temperature=0.0, **limits)["success"],
        "eval_episodes": len(seeds),
        "seconds": time.perf_counter() - started,
        "parameter_checksums": _gathered_checksums(accelerator, model),
    }
    if accelerator.is_main_process:
        from agentgspo.policy.quiet import no_transformers_progress_bars

        with no_transformers_progress_bars():
            accelerator.unwrap_model(model).save_pretrained(out / "final")
            renderer.tokenizer.save_pretrained(out / "final")
        write_policy_settings(out / "final", trained_with)
        metrics = _previous_metrics(out, None)
        final["first_step_success"] = metrics[0]["success"] if metrics else None
        plot_training(metrics, out / "reward.png", warm_start=warm_log["evals"],
                      demonstrator_success=warm_log["demonstrator_success"], window=SMOOTHING,
                      target=config.stop_success,
                      title=f"GSPO on {config.env_id}\nfinal eval success: sampled {final['sampled']:.2f}, "
                            f"greedy {final['greedy']:.2f}")
        (out / FINAL_EVAL).write_text(json.dumps(final))
        _print_report(out, final)
    # Every rank returns rank 0's numbers (so all exit with one status) and only once its files are written: a rank
    # that exits first makes the launcher stop the others.
    final = broadcast_object_list([final], from_process=0)[0]
    logger.close()
    # A barrier first: a rank that destroys the process group while its last send (the broadcast above, a
    # gloo send completes locally) is still unread aborts ('terminate called without an active exception').
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return final


def _sampler(config: QuickstartConfig, policy: HFPolicy, model: Any, folder: Path) -> Any:
    """The rollout backend ``--backend`` names: the HF policy itself, or a vLLM engine or servers loaded with the
    current weights (written to ``folder``, with the tokenizer)."""
    if isinstance(policy, backend_class(config.backend)):
        return policy
    save_weights(model, folder)
    policy.renderer.tokenizer.save_pretrained(folder)
    sampler = make_backend(str(folder), config.backend, **run_options(
        config.backend, seed=config.seed, server_urls=[u for u in config.server_url.split(",") if u]))
    sync_weights(sampler, model, folder)  # servers may serve other weights; an engine reloads the same ones
    return sampler


def _demonstrations(config: QuickstartConfig, accelerator: Accelerator, out: Path, make_env, renderer) -> list:
    """The demonstrator's episodes: read from DIR/demonstrations.jsonl when an interrupted run wrote them (playing
    8,192 episodes again costs minutes), else played and written there."""
    from agentgspo.rollouts.trajectory import read_jsonl, write_jsonl

    path = out / "demonstrations.jsonl"
    if path.exists():
        demos = read_jsonl(path)
        if len(demos) == config.demos:
            return demos
    demos = play_demonstrations(make_env, renderer, range(DEMO_SEED_BASE, DEMO_SEED_BASE + config.demos),
                                wrong_frac=config.demo_wrong_frac, seed=config.seed, env_id=config.env_id)
    if accelerator.is_main_process:  # whole or not at all: another rank, or a rerun, may read it
        staging = path.with_name(f".{path.name}.tmp")
        write_jsonl(demos, staging)
        staging.rename(path)
    return demos


def _stop_rule(config: QuickstartConfig, history: list[float], step: int, started: float) -> str | None:
    """Why GSPO stops after ``step`` (``None``: it goes on): the success target, the step limit or the time cap."""
    if len(history) >= SMOOTHING:
        smoothed = moving_average(history, SMOOTHING)[-1]
        if smoothed >= config.stop_success:
            return (f"the {SMOOTHING}-step mean success reached {smoothed:.2f} >= {config.stop_success} "
                    f"(--stop-success) at GSPO step {step}")
    if step >= config.steps:
        return f"it ran the most GSPO steps, {config.steps} (--steps)"
    minutes = (time.perf_counter() - started) / 60
    if minutes > config.max_minutes:
        return f"the time cap, {config.max_minutes:g} minutes (--max-minutes), passed at GSPO step {step}"
    return None


def _print_report(out: Path, final: dict) -> None:
    """The last lines: why it stopped, the final numbers and where each output is."""
    first = final.get("first_step_success")
    first_text = f" (first GSPO step: {first:.2f})" if first is not None else ""
    print(f"stopped: {final.get('stopped')}", flush=True)
    print(f"final eval on {final.get('eval_episodes', '?')} held-out prompts: sampled success "
          f"{final['sampled']:.2f}, greedy {final['greedy']:.2f}{first_text}; {final['seconds']:.0f} s")
    print(f"outputs in {out}/:")
    for name, what in (("final/", "the trained policy (save_pretrained; agentgspo.json: the env and limits it was "
                                  "trained with)"),
                       ("final_eval.json", "these numbers"),
                       ("metrics.jsonl", "one line per GSPO step"),
                       ("reward.png", "the training curves"),
                       ("tensorboard/", f"TensorBoard events: tensorboard --logdir {out / 'tensorboard'}"),
                       ("checkpoints/", "the last checkpoints"),
                       ("config.json", "the settings of this run")):
        print(f"  {name:<16} {what}")
    print(f"play it: agentgspo rollout --policy {out / 'final'} --out {out / 'rollout'}", flush=True)


def _gathered_checksums(accelerator: Accelerator, model) -> list[float]:
    """Sum of |param| (float64) of each rank's copy: equal on every rank when the ranks stayed in sync."""
    local = sum(p.detach().double().abs().sum() for p in accelerator.unwrap_model(model).parameters())
    return accelerator.gather(torch.stack([local.to(accelerator.device)])).tolist()


def _previous_metrics(out: Path, up_to: int | None) -> list[dict]:
    path = out / "metrics.jsonl"
    rows = read_metrics(path) if path.exists() else []
    return [r for r in rows if up_to is None or r["step"] <= up_to]


def run_from_command_line(argv: list[str] | None = None) -> int:
    """``python recipes/quickstart.py ...``: the exit status (0 on success >= 0.9, 130/143 when interrupted, 2 for
    bad input) with one line, not a traceback, for an interruption or bad input."""
    try:
        final = main(parse_config(argv))
    except RunInterrupted as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt as exc:
        print(f"interrupted: {exc or 'stopped without saving'}", file=sys.stderr)
        return 130
    except (ValueError, LookupError) as exc:
        print(f"quickstart: error: {exc}", file=sys.stderr)
        return 2
    return 0 if final["sampled"] >= 0.9 else 1


if __name__ == "__main__":
    status = run_from_command_line()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # Under a launcher every file is written and the process group destroyed by now; the interpreter's teardown
        # of torch's C++ threads has aborted a rank under load ('terminate called without an active exception',
        # SIGABRT after a finished run), which the launcher reports as a failure. Leave without that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
