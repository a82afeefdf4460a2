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
  so the two agree to ~1e-7 (logged as `sampler_logprob_gap` when recomputing) and a forward pass is saved
  (`--logp-old auto`, the default: with `--max-staleness S > 0` it recomputes, the decoupled objective's pi_prox);
- no system prompt in the env (the demonstrations teach the format) to halve the tokens per episode; the trained
  policy records it (``final/agentgspo.json``), so `agentgspo rollout --policy DIR/final` plays it the same way.

The loop is the library's, :func:`agentgspo.training.train.train`, the one every recipe runs; this file is the
quickstart's settings (its defaults over :class:`~agentgspo.training.train.TrainConfig`'s, as data) and one call.

Launch:
    CPU:          agentgspo quickstart --out runs/quickstart      (or: python recipes/quickstart.py --out ...)
    2 processes:  accelerate launch --multi_gpu --num_processes 2 recipes/quickstart.py --out runs/q2
                  (on CPU this runs DDP over gloo; each rank plays its own prompts)
    1 GPU:        accelerate launch recipes/quickstart.py --out runs/q --device cuda
Settings: `--help` lists every one; `--config my.yaml` reads a mapping of them; `--smoke` is a seconds-long size.
Interrupt (Ctrl-C or SIGTERM): the run finishes its step, saves a checkpoint (warm start included) and exits
130/143 with the command that resumes it: the same command again. A folder holding a run with other settings is
refused; a finished run's folder reports its results at once. Resume is exact (state, data order, RNG streams):
measured with --logp-old recompute, a run interrupted in the warm start and in GSPO ends with the uninterrupted
run's parameters bit for bit; with the default sampler log-probs, whose float round-off depends on which episodes
share a sampling batch (timing), two runs agree to round-off amplified by training (1.2e-3 after 31 steps).
Outputs: DIR/metrics.jsonl, DIR/reward.png, DIR/final/ (save_pretrained, and agentgspo.json: env and limits it was
trained with), DIR/summary.json (with the final evaluation), DIR/checkpoints/, DIR/tensorboard/, DIR/trajectories/.
Exit status: 0 when the final sampled success reaches 0.9, 1 below, 130/143 when interrupted, 2 for bad input.
"""

from __future__ import annotations

from typing import Any

from agentgspo.training.train import Recipe, exit_process, run_recipe

COMMAND = "agentgspo quickstart"

# The quickstart's defaults over TrainConfig's (every other setting keeps TrainConfig's default).
DEFAULTS: dict[str, Any] = dict(
    out="runs/quickstart",
    policy="tiny",
    backend="hf",
    device="cpu",
    env_id="agentgspo/Calculator-v0",
    env_kwargs={"system_prompt": None},  # the demonstrations teach the format
    max_turns=0,
    max_context=0,  # the env's registered budget
    max_new_tokens=24,  # a tool call is 20 ids, an answer under 10: a longer turn is already wrong
    # Warm start: imitate the mixed demonstrator to convergence (the copy skill appears near step 220, exact by ~450).
    warm_demos=8192,
    warm_wrong_frac=0.6,
    warm_steps=500,
    warm_batch=64,
    warm_lr=3e-3,
    warm_eval_every=50,
    # GSPO: the paper's clip band and 4 minibatches (TrainConfig's), a learning rate for a 0.75M-param model.
    steps=400,
    lr=1e-4,
    warmup_steps=8,
    synchronous_logp_old="sampler",  # --logp-old auto: the sampler's at S = 0, recomputed when stale (S > 0)
    stop_success=0.95,
    max_minutes=9.0,  # the final evaluation adds ~15 s
    final_eval_episodes=256,
)

# --smoke: seconds on CPU (the suite's size): a short warm start, two GSPO steps of four prompts.
SMOKE: dict[str, Any] = dict(
    warm_demos=16,
    warm_steps=3,
    warm_batch=8,
    warm_eval_every=2,
    steps=2,
    prompts_per_step=2,
    group_size=4,
    final_eval_episodes=4,
    checkpoint_every=1,
)


def reached_the_target(summary: dict[str, Any]) -> bool:
    """Whether the final sampled success reached 0.9 (the exit status: 0 if so, else 1); with the final evaluation
    turned off (``--final-eval-episodes 0``) there is no target to miss: 0."""
    final = summary.get("final_eval")
    return final is None or final["sampled"] >= 0.9


QUICKSTART = Recipe(
    command=COMMAND,
    defaults=DEFAULTS,
    smoke=SMOKE,
    description=__doc__.split("\n")[0],
    succeeded=reached_the_target,
)


def main(argv: list[str] | None = None) -> int:
    """Parse the flags (``argv``: the command line by default), train, and return the exit status."""
    return run_recipe(QUICKSTART, argv)


if __name__ == "__main__":
    exit_process(main())
