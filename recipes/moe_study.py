"""MoE RL study: GSPO vs GRPO, with and without Routing Replay, router loss on and off, on a tiny MoE (CPU).

The claims under test (GSPO, arXiv 2507.18071): GRPO on an MoE needs Routing Replay, GSPO does not (§4.3); GSPO clips
about two orders of magnitude more (sequences ~0.15 vs GRPO's tokens ~0.0013) yet learns faster (§5.1, Fig. 2);
about 10% of (token, layer) expert choices change after each update (§4.3).

What it runs, per seed: a tiny Qwen3-MoE with twice the quickstart's experts by default (``--layers`` 3 layers,
``--experts`` 8, top ``--top-k`` 2; with 4 layers of 8 experts the warm start had not learned the demonstrations'
tool call after 500 of 600 steps, loss 0.35) is warm-started for 800 steps on ``agentgspo/Calculator-v0``'s imperfect
demonstrator (the quickstart's setup: a tool call, then the answer; RL has to teach the tool's use). That policy
is the start of every variant, each one run of :func:`agentgspo.training.train.train`:

    gspo            objective gspo, eps 3e-4 / 4e-4 (paper §5.1)
    grpo            objective grpo, eps 0.2 / 0.27
    grpo_replay     grpo + routing_replay="old_policy" (the paper's Routing Replay)
    gspo_replay     gspo + routing_replay="old_policy"
    gspo_no_aux     gspo with the router load-balancing loss off (the others keep the model's 0.01)

then one measurement of the sampler/trainer log-prob gap after an update, with and without the sampler's routing
replayed (R3). Outputs under ``--out``: ``runs/VARIANT-sSEED/metrics.jsonl`` (one line per step, the learner's
metrics), ``table.json`` and ``table.md`` (per variant, mean over seeds), ``gap.json``, and the figures
``reward.png``, ``clip.png``, ``volatility.png``.

Launch (one command):   python recipes/moe_study.py --out runs/moe_study          (default size)
                        python recipes/moe_study.py --smoke --out runs/moe_smoke  (the suite's size)
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from agentgspo.objective.batching import collate, forward, logprobs_from_logits
from agentgspo.learning.learner import GSPOLearner, LearnerConfig
from agentgspo.core.sampling import SamplingParams
from agentgspo.policy.hf import HFPolicy
from agentgspo.environments.registry import make
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner
from agentgspo.models.routing_replay import batch_replay, decode_routing, replay_routing
from agentgspo.models.tiny import build_tiny_policy
from agentgspo.training.metrics import read_metrics
from agentgspo.training.train import Recipe, TrainConfig, train

STUDY = Recipe(command="python recipes/moe_study.py")  # its runs' resume command (each run's settings in full)

VARIANTS: dict[str, dict[str, Any]] = {  # each objective with its own clip band (LearnerConfig's, paper §5.1)
    "gspo": dict(objective="gspo"),
    "grpo": dict(objective="grpo"),
    "grpo_replay": dict(objective="grpo", routing_replay="old_policy"),
    "gspo_replay": dict(objective="gspo", routing_replay="old_policy"),
    "gspo_no_aux": dict(objective="gspo", router_aux_loss_coef=0.0),
}
SIZES = {  # default: the size meant for one command within an hour on 2 free cores; smoke: the suite's
    "default": dict(seeds=3, steps=30, prompts=8, group=8, demos=8192, warm_steps=800, layers=3, experts=8, top_k=2),
    "smoke": dict(seeds=1, steps=2, prompts=2, group=2, demos=16, warm_steps=2, layers=2, experts=4, top_k=2),
}
ENV_ID = "agentgspo/Calculator-v0"
COLLAPSE_DROP = 0.5  # a run collapsed when its success ends below half its best (3-step means)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The study's flags (``--help`` lists them); ``--smoke`` picks the suite's size, flags override a size."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/moe_study", help="folder of the runs, table and figures")
    parser.add_argument("--smoke", action="store_true", help="the suite's size (seconds per run)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {list(VARIANTS)}")
    for name, value in SIZES["default"].items():
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            default=None,
            help=f"override the size's {name} (default size: {value})",
        )
    parser.add_argument("--lr", type=float, default=1e-4, help="RL learning rate (the quickstart's)")
    args = parser.parse_args(argv)
    size = SIZES["smoke" if args.smoke else "default"]
    for name, value in size.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    unknown = set(args.variants.split(",")) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}; expected a subset of {list(VARIANTS)}")
    return args


def _config(args: argparse.Namespace, out: Path, policy: str, seed: int, **overrides: Any) -> Any:
    return TrainConfig(
        **{
            **dict(
                out=str(out),
                seed=seed,
                policy=policy,
                backend="hf",
                device="cpu",
                activation_checkpointing=False,
                env_id=ENV_ID,
                env_kwargs={"system_prompt": None},
                max_turns=0,
                max_new_tokens=24,
                max_context=0,
                steps=args.steps,
                prompts_per_step=args.prompts,
                group_size=args.group,
                lr=args.lr,
                warmup_steps=4,
                logp_old="recompute",
                checkpoint_every=max(args.steps, 1),
            ),
            **overrides,
        }
    )


def warm_policy(args: argparse.Namespace, out: Path, seed: int) -> str:
    """The shared start of a seed's variants: the tiny MoE, warm-started on the demonstrator (train.py's warm
    start, then one GSPO step at learning rate 0, which changes nothing); returns its ``final/`` folder."""
    final = out / f"warm-s{seed}" / "final"
    if final.exists():
        return str(final)
    base = build_tiny_policy(
        out / f"base-s{seed}", seed=seed, num_layers=args.layers, num_experts=args.experts, experts_per_token=args.top_k
    )
    train(
        _config(
            args,
            out / f"warm-s{seed}",
            str(base),
            seed,
            steps=1,
            lr=0.0,
            warmup_steps=0,
            warm_demos=args.demos,
            warm_wrong_frac=0.6,
            warm_steps=args.warm_steps,
            warm_batch=64,
        )
    )
    return str(final)


def measure_gap(policy: str, args: argparse.Namespace, seed: int) -> dict[str, float]:
    """Sampler/trainer log-prob gap on one sampled batch after one GRPO update (the minibatches of one step), with
    the trainer's forward routed live and routed as the sampler recorded (R3)."""
    import torch
    from accelerate import Accelerator

    torch.manual_seed(seed)
    sampler = HFPolicy.from_pretrained(policy, seed=seed, record_routing=True)
    runner = RolloutRunner(
        lambda: make(ENV_ID, system_prompt=None),
        sampler,
        sampler.renderer,
        RolloutConfig(
            group_size=args.group,
            max_turns=2,
            max_context=512,
            sampling=SamplingParams(temperature=1.0, max_new_tokens=24),
        ),
        env_id=ENV_ID,
    )
    trajectories = runner.run_sync(
        range(7_000_000 + seed * 1000, 7_000_000 + seed * 1000 + args.prompts), sampling_seed=seed
    )
    trainer = HFPolicy.from_pretrained(policy).model
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(trainer.parameters(), lr=args.lr)
    trainer, optimizer = accelerator.prepare(trainer, optimizer)
    learner = GSPOLearner(
        trainer,
        optimizer,
        accelerator,
        pad_token_id=sampler.renderer.tokenizer.pad_token_id,
        config=LearnerConfig(objective="grpo", memory_estimate=False),
    )
    stats = learner.step(trajectories)
    batch = collate(trajectories, sampler.renderer.tokenizer.pad_token_id)
    replay = batch_replay([decode_routing(t.routed_experts) for t in trajectories], batch.input_ids.shape[1])
    gaps = {}
    with torch.no_grad():
        for name in ("live", "replayed"):
            with replay_routing(trainer, replay) if name == "replayed" else torch.no_grad():
                logp = logprobs_from_logits(forward(trainer, batch).logits, batch.input_ids)
            gaps[f"gap_{name}"] = float((logp - batch.sampler_logprobs).abs()[batch.loss_mask].mean())
    return {
        **gaps,
        "routing_volatility": stats.get("routing_volatility", float("nan")),
        "tokens": int(batch.loss_mask.sum()),
    }


def _mean(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return sum(values) / len(values) if values else float("nan")


def summarize_run(rows: list[dict[str, Any]]) -> dict[str, float]:
    """One run's numbers: success at the start and end (3-step means), the mean clip fractions, volatility, gap,
    and whether it collapsed (ended below half its best 3-step mean success after reaching 0.2)."""
    success = [r["success"] for r in rows]
    smooth = [_mean(success[max(0, i - 2) : i + 1]) for i in range(len(success))]
    best = max(smooth) if smooth else float("nan")
    return {
        "success_first": smooth[0] if smooth else float("nan"),
        "success_last": smooth[-1] if smooth else float("nan"),
        "success_best": best,
        "clip_frac_seq": _mean([r.get("clip_frac_seq", float("nan")) for r in rows]),
        "clip_frac_token": _mean([r.get("clip_frac_token", float("nan")) for r in rows]),
        "routing_volatility": _mean([r.get("routing_volatility", float("nan")) for r in rows]),
        "sampler_logprob_gap": _mean([r.get("sampler_logprob_gap", float("nan")) for r in rows]),
        "collapsed": float(bool(smooth) and best >= 0.2 and smooth[-1] < COLLAPSE_DROP * best),
    }


def make_table(runs: dict[str, list[list[dict[str, Any]]]]) -> dict[str, dict[str, float]]:
    """Per variant: each :func:`summarize_run` number as the mean over seeds, collapses summed, seeds counted."""
    table = {}
    for variant, seeds in runs.items():
        per_seed = [summarize_run(rows) for rows in seeds]
        table[variant] = {key: _mean([s[key] for s in per_seed]) for key in per_seed[0]}
        table[variant]["collapsed"] = sum(s["collapsed"] for s in per_seed)
        table[variant]["seeds"] = len(per_seed)
    return table


def table_markdown(table: dict[str, dict[str, float]]) -> list[str]:
    """The table's lines in Markdown (4 significant digits)."""
    columns = list(next(iter(table.values())))
    lines = ["| variant | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    return lines + [f"| {v} | " + " | ".join(f"{row[c]:.4g}" for c in columns) + " |" for v, row in table.items()]


def plot(out: Path, runs: dict[str, list[list[dict[str, Any]]]]) -> list[Path]:
    """reward.png (success vs step), clip.png (clip fractions), volatility.png: per variant, mean over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    for name, keys, ylabel in (
        ("reward", ["success"], "sampled success"),
        ("clip", ["clip_frac_seq", "clip_frac_token"], "clipped fraction"),
        ("volatility", ["routing_volatility"], "expert choices changed per update"),
    ):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for variant, seeds in runs.items():
            steps = min(len(rows) for rows in seeds)
            for key in keys:
                series = [_mean([rows[i].get(key, float("nan")) for rows in seeds]) for i in range(steps)]
                ax.plot(range(1, steps + 1), series, label=variant if len(keys) == 1 else f"{variant} {key[10:]}")
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        if name == "clip":
            ax.set_yscale("symlog", linthresh=1e-4)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        figures.append(path)
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the study (resumable per run: a finished run folder is read back, not rerun); returns the table."""
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    variants = args.variants.split(",")
    runs: dict[str, list[list[dict[str, Any]]]] = {v: [] for v in variants}
    gaps = []
    for seed in range(args.seeds):
        policy = warm_policy(args, out, seed)
        for variant in variants:
            folder = out / "runs" / f"{variant}-s{seed}"
            train(_config(args, folder, policy, seed, **VARIANTS[variant]), STUDY)
            runs[variant].append(read_metrics(folder / "metrics.jsonl"))
            shutil.rmtree(folder / "checkpoints", ignore_errors=True)  # the metrics and final/ are what the study keeps
        gaps.append({"seed": seed, **measure_gap(policy, args, seed)})
    table = make_table(runs)
    size = {k: getattr(args, k) for k in SIZES["default"]}
    (out / "table.json").write_text(json.dumps({"size": size, "variants": table}, indent=2))
    (out / "gap.json").write_text(json.dumps(gaps, indent=2))
    lines = table_markdown(table)
    (out / "table.md").write_text("\n".join(lines) + "\n")
    plot(out, runs)
    print("\n".join(lines))
    print("gap after one update (mean |logp_trainer - logp_sampler|):", json.dumps(gaps))
    return {"size": size, "variants": table, "gaps": gaps}


if __name__ == "__main__":
    main()
