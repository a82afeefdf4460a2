"""Does asynchronous GSPO learn as the synchronous loop does? The quickstart at max_staleness 0, 1 and 2.

Per seed, the quickstart's warm start runs once (its policy saved with one GSPO step at learning rate 0, which
changes nothing, as the MoE study does); from it, GSPO runs with the quickstart's settings and ``--logp-old
recompute`` at S = 0 (the synchronous loop), S = 1 and S = 2 with the decoupled objective (behaviour_correction
``tis``, the default when S > 0), and S = 2 uncorrected two ways: ``S2-uncorrected`` (behaviour_correction
``none``: the ratio against the learner's recomputed old log-probs, no behaviour weight) and ``S2-sampler``
(``none`` with ``--logp-old sampler``: the ratio clipped against the stale sampler's own log-probs, the setup of verl
issue 7356); both uncorrected variants need ``allow_uncorrected_staleness``, as any run does. Reported per run:
why it stopped, the GSPO steps to the stop, wall seconds, the final sampled and greedy
success, the mean clip fraction of the sequences over all minibatches and over each step's first minibatch (before any
update of the step: staleness alone), and the behaviour KL. Runs already in OUT/results.json are kept, not run again (an
interrupted benchmark resumes).

    python benchmarks/bench_async_learning.py --seeds 0,1,2 --out runs/async_learning
    python benchmarks/bench_async_learning.py --seeds 0 --steps 6 --warm-steps 20 --out /tmp/al   # a quick check
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

VARIANTS = {  # name -> settings over the quickstart's
    "S0": dict(max_staleness=0),
    "S1": dict(max_staleness=1),
    "S2": dict(max_staleness=2),
    # Known to learn slowly: each needs the explicit opt-in, as a user's run would.
    "S2-uncorrected": dict(max_staleness=2, behaviour_correction="none", allow_uncorrected_staleness=True),
    "S2-sampler": dict(max_staleness=2, logp_old="sampler", allow_uncorrected_staleness=True),
}


def warm_policy(seed: int, args: argparse.Namespace, out: Path) -> str:
    """The quickstart's warm start for ``seed``, saved as a policy folder (run once, reused)."""
    from agentgspo.recipes.quickstart import QUICKSTART
    from agentgspo.training.train import train

    folder = out / f"warm-s{seed}"
    if not (folder / "final").exists():
        warm = QUICKSTART.config(out=str(folder), seed=seed, steps=1, lr=0.0, warmup_steps=0, stop_success=None,
                                 warm_steps=args.warm_steps, final_eval_episodes=0, max_minutes=0.0)  # fmt: skip
        train(warm, QUICKSTART)
    return str(folder / "final")


def run(name: str, seed: int, policy: str, args: argparse.Namespace, out: Path) -> dict:
    """One GSPO run of ``name`` from the warm policy; its numbers."""
    from agentgspo.recipes.quickstart import QUICKSTART
    from agentgspo.training.train import train

    folder = out / f"{name}-s{seed}"
    summary = train(QUICKSTART.config(
        out=str(folder), seed=seed, policy=policy, warm_demos=0, warm_steps=0, steps=args.steps, max_minutes=0.0,
        **{"logp_old": "recompute", **VARIANTS[name]},
    ), QUICKSTART)  # fmt: skip
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return {
        "variant": name, "seed": seed, "stopped": summary["stopped"], "steps": summary["steps"],
        "seconds": sum(r["step_seconds"] for r in rows), "sampled": summary["final_eval"]["sampled"],
        "greedy": summary["final_eval"]["greedy"],
        "clip_frac_seq": statistics.mean(r.get("clip_frac_seq", 0.0) for r in rows),
        # The first minibatch of a step, before any update of that step: its ratio is 1 against a recomputed old
        # policy, so what clips there is staleness alone (the verl 7356 effect when against the sampler).
        "mb0_clip_frac_seq": statistics.mean(r.get("mb0_clip_frac_seq", 0.0) for r in rows),
        "behaviour_kl": statistics.mean(r.get("behaviour_kl", 0.0) for r in rows),
    }  # fmt: skip


def main() -> None:
    """Every variant for every seed; a table of the means over seeds and every run as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/async_learning")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=400, help="most GSPO steps (the stop rule ends most runs)")
    parser.add_argument("--warm-steps", type=int, default=500, help="the quickstart's warm start")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    out = Path(args.out)
    saved = out / "results.json"
    results = json.loads(saved.read_text()) if saved.exists() else []
    for seed in map(int, args.seeds.split(",")):
        policy = warm_policy(seed, args, out)
        for name in args.variants.split(","):
            if any(r["variant"] == name and r["seed"] == seed for r in results):
                continue  # measured already
            results.append(run(name, seed, policy, args, out))
            saved.write_text(json.dumps(results, indent=1))
    keys = ("steps", "seconds", "sampled", "greedy", "clip_frac_seq", "mb0_clip_frac_seq", "behaviour_kl")
    print("| variant | seeds | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for name in args.variants.split(","):
        rows = [r for r in results if r["variant"] == name and str(r["seed"]) in args.seeds.split(",")]
        mean = [statistics.mean(r.get(key, float("nan")) for r in rows) for key in keys]
        print(f"| {name} | {len(rows)} | " + " | ".join(f"{value:.3g}" for value in mean) + " |")


if __name__ == "__main__":
    main()
