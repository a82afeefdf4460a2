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
- no system prompt in the env (the demonstrations teach the format) to halve the tokens per episode.

Launch:
    CPU:          agentgspo quickstart --out runs/quickstart      (or: python recipes/quickstart.py --out ...)
    2 processes:  accelerate launch --multi_gpu --num_processes 2 recipes/quickstart.py --out runs/q2
                  (on CPU this runs DDP over gloo; each rank plays its own prompts)
    1 GPU:        accelerate launch recipes/quickstart.py --out runs/q --device cuda
Resume: run the same command again; it continues from the newest checkpoint in --out.
Outputs: DIR/metrics.jsonl, DIR/reward.png, DIR/final/ (save_pretrained), DIR/checkpoints/, DIR/tensorboard/.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from tqdm import tqdm
from transformers import get_scheduler

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from agentgspo.learner import GSPOLearner, LearnerConfig
from agentgspo.metrics import MetricsLogger, moving_average, plot_training, read_metrics
from agentgspo.policy.base import SamplingParams
from agentgspo.policy.hf import HFPolicy
from agentgspo.rollout import RolloutConfig, RolloutRunner, summarize
from agentgspo.sft import play_demonstrations, warm_start

EVAL_SEEDS = range(0, 256)  # held out: training prompts start at TRAIN_SEED_BASE
TRAIN_SEED_BASE = 1_000_000
DEMO_SEED_BASE = 9_000_000


@dataclass
class QuickstartConfig:
    """Every setting of the quickstart (logged to DIR/config.json at start)."""

    out: str = "runs/quickstart"  # run folder
    seed: int = 0  # model init, data order and sampling
    device: str = "cpu"  # "cpu" or "cuda"
    env_id: str = "agentgspo/Calculator-v0"  # any registered env with `oracle` and `wrong` policies (the demonstrator)
    env_kwargs: str = '{"system_prompt": null}'  # JSON keyword arguments of gymnasium.make
    kill_after_step: int = 0  # testing exact resume: SIGKILL this process right after that step (0: never)
    # Supervised warm start on an imperfect demonstrator's transcripts (loss on assistant tokens only).
    demos: int = 8192  # demonstration episodes (from 512 the copy skill is memorised by position, not learned)
    demo_wrong_frac: float = 0.6  # share of them played by the env's `wrong` policy (the rest by its oracle)
    warm_lr: float = 3e-3
    warm_batch: int = 64
    warm_steps: int = 500  # AdamW steps: the copy skill appears near step 220 and is exact (any length) by ~450
    warm_eval_every: int = 50  # SFT steps between evals of sampled success on 64 held-out prompts (for the plot)
    # GSPO.
    steps: int = 400  # most GSPO steps
    prompts_per_step: int = 16  # per process
    group_size: int = 8  # G samples per prompt
    lr: float = 1e-4
    warmup_steps: int = 8  # optimizer steps of linear LR warm-up
    minibatches: int = 4  # paper §5.1
    eps_low: float = 3e-4  # paper §5.1
    eps_high: float = 4e-4
    logp_old: str = "sampler"  # see the docstring
    temperature: float = 1.0
    max_new_tokens: int = 24  # a tool call is 20 tokens, an answer under 10: a longer turn is already wrong
    stop_success: float = 0.95  # stop once the 10-step moving average of success reaches this
    max_minutes: float = 9.0  # GSPO stops once the command has run this long (the final eval adds ~15 s)
    checkpoint_every: int = 25
    eval_episodes: int = 256


def parse_config() -> QuickstartConfig:
    """Command-line flags, one per config field."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    return QuickstartConfig(**vars(parser.parse_args()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per :class:`QuickstartConfig` field."""
    for field in dataclasses.fields(QuickstartConfig):
        parser.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, type=type(field.default),
                            default=field.default)


def evaluate(make_env, policy, renderer, *, seeds, temperature: float, max_new_tokens: int) -> dict:
    """Success of the policy on ``seeds`` (a fresh runner, no training)."""
    config = RolloutConfig(group_size=1, max_turns=3, max_context=256,
                           sampling=SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens))
    return summarize(RolloutRunner(make_env, policy, renderer, config).run_sync(list(seeds), sampling_seed=12345))


def main(config: QuickstartConfig | None = None) -> dict:
    """Run the quickstart; returns the final evaluation."""
    config = config or parse_config()
    started = time.perf_counter()
    accelerator = Accelerator(cpu=config.device == "cpu")
    set_seed(config.seed)  # same init on every rank
    out = Path(config.out)
    rank, world = accelerator.process_index, accelerator.num_processes
    env_kwargs = json.loads(config.env_kwargs)

    def make_env() -> gym.Env:
        return gym.make(config.env_id, disable_env_checker=True, **env_kwargs)

    # Policy and sampler: the sampler shares the trainer's weights (colocated), so no weight sync is needed.
    policy = HFPolicy.from_pretrained("tiny", device=str(accelerator.device), seed=config.seed)
    renderer, model = policy.renderer, policy.model
    pad_token_id = renderer.tokenizer.pad_token_id

    # Warm start, unless resuming (a checkpoint holds the warm-started and GSPO-trained weights).
    resume_from = latest_checkpoint(out)
    warm_log: dict = {"demonstrator_success": None, "evals": []}
    if resume_from is None:
        demos = play_demonstrations(make_env, renderer, range(DEMO_SEED_BASE, DEMO_SEED_BASE + config.demos),
                                    wrong_frac=config.demo_wrong_frac, seed=config.seed, env_id=config.env_id)
        warm_log["demonstrator_success"] = summarize(demos)["success"]

        def eval_warm_start(step: int, loss: float) -> bool:
            if step % config.warm_eval_every:
                return False
            model.eval()
            result = evaluate(make_env, policy, renderer, seeds=EVAL_SEEDS[:64], temperature=1.0,
                              max_new_tokens=config.max_new_tokens)
            model.train()
            warm_log["evals"].append({"step": step, "loss": loss, "success": result["success"]})
            if accelerator.is_main_process:
                print(f"warm start step {step}: loss {loss:.3f} sampled success {result['success']:.2f}")
            return False

        warm_start(model, demos, pad_token_id=pad_token_id, steps=config.warm_steps,
                   batch_size=config.warm_batch, lr=config.warm_lr, seed=config.seed, callback=eval_warm_start)
        if accelerator.is_main_process:
            out.mkdir(parents=True, exist_ok=True)
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
    if resume_from is not None:
        start_step = load_checkpoint(accelerator, resume_from)["step"]
        if (out / "warm_start.json").exists():
            warm_log = json.loads((out / "warm_start.json").read_text())
        accelerator.print(f"resumed from {resume_from} at step {start_step}")

    logger = MetricsLogger(out, {"recipe": "quickstart", "world_size": world, **dataclasses.asdict(config)},
                           resume_step=start_step if resume_from else None, enabled=accelerator.is_main_process)
    runner = RolloutRunner(make_env, policy, renderer, RolloutConfig(
        group_size=config.group_size, max_turns=3, max_context=256,
        sampling=SamplingParams(temperature=config.temperature, max_new_tokens=config.max_new_tokens)),
        env_id=config.env_id)

    history = [m["success"] for m in _previous_metrics(out, start_step)]
    bar = tqdm(range(start_step, config.steps), initial=start_step, total=config.steps, desc="GSPO",
               disable=not accelerator.is_main_process)
    for step in bar:
        # Data position = step: every rank plays its own disjoint prompts, the same after a resume.
        first = TRAIN_SEED_BASE + (step * world + rank) * config.prompts_per_step
        rollout_started = time.perf_counter()
        model.eval()
        trajectories = runner.run_sync(range(first, first + config.prompts_per_step),
                                       sampling_seed=config.seed * 1_000_003 + step)
        model.train()
        rollout_seconds = time.perf_counter() - rollout_started
        stats = learner.step(trajectories)
        batch = summarize(trajectories)
        # Rewards and success over all ranks (every rank must take the same stopping decision).
        shared = accelerator.reduce(torch.tensor([batch["reward_mean"], batch["success"]],
                                                 device=accelerator.device), reduction="mean").tolist()
        metrics = {"reward_mean": shared[0], "success": shared[1], **stats,
                   "rollout_seconds": rollout_seconds, "tokens_mean": batch["tokens_mean"],
                   "stop_reasons": batch["stop_reasons"], "elapsed_s": time.perf_counter() - started}
        logger.log(step + 1, metrics)
        history.append(shared[1])
        bar.set_postfix(reward=f"{shared[0]:.2f}", clip_seq=f"{stats.get('clip_frac_seq', 0):.2f}",
                        loss=f"{stats.get('loss', 0):.4f}", vol=f"{stats.get('routing_volatility', 0):.3f}")
        if (step + 1) % config.checkpoint_every == 0:
            save_checkpoint(accelerator, out, step + 1, {"phase": "gspo"})
        if step + 1 == config.kill_after_step:
            os.kill(os.getpid(), signal.SIGKILL)
        smoothed = moving_average(history, 10)[-1]
        out_of_time = (time.perf_counter() - started) / 60 > config.max_minutes
        if (len(history) >= 10 and smoothed >= config.stop_success) or out_of_time:
            break
    bar.close()

    # Final evaluation on held-out prompts, the policy saved for any backend, and the plot.
    model.eval()
    final = {
        "sampled": evaluate(make_env, policy, renderer, seeds=EVAL_SEEDS[: config.eval_episodes], temperature=1.0,
                            max_new_tokens=config.max_new_tokens)["success"],
        "greedy": evaluate(make_env, policy, renderer, seeds=EVAL_SEEDS[: config.eval_episodes], temperature=0.0,
                           max_new_tokens=config.max_new_tokens)["success"],
        "seconds": time.perf_counter() - started,
        "parameter_checksums": _gathered_checksums(accelerator, model),
    }
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save_pretrained(out / "final")
        renderer.tokenizer.save_pretrained(out / "final")
        metrics = _previous_metrics(out, None)
        plot_training(metrics, out / "reward.png", warm_start=warm_log["evals"],
                      demonstrator_success=warm_log["demonstrator_success"],
                      title=f"GSPO on {config.env_id}\nfinal eval success: sampled {final['sampled']:.2f}, "
                            f"greedy {final['greedy']:.2f}")
        (out / "final_eval.json").write_text(json.dumps(final))
        print(json.dumps({"first_step_success": metrics[0]["success"] if metrics else None, **final}))
    logger.close()
    accelerator.end_training()
    return final


def _gathered_checksums(accelerator: Accelerator, model) -> list[float]:
    """Sum of |param| (float64) of each rank's copy: equal on every rank when the ranks stayed in sync."""
    local = sum(p.detach().double().abs().sum() for p in accelerator.unwrap_model(model).parameters())
    return accelerator.gather(torch.stack([local.to(accelerator.device)])).tolist()


def _previous_metrics(out: Path, up_to: int | None) -> list[dict]:
    path = out / "metrics.jsonl"
    rows = read_metrics(path) if path.exists() else []
    return [r for r in rows if up_to is None or r["step"] <= up_to]


if __name__ == "__main__":
    main()
