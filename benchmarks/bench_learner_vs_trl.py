"""Learner step throughput: our ``GSPOLearner.step`` vs TRL's ``GRPOTrainer`` loss path, side by side, one run.

    python benchmarks/bench_learner_vs_trl.py                 # 5 timed repeats after 1 warm-up, tiny MoE
    python benchmarks/bench_learner_vs_trl.py --repeats 9 --hidden-size 256 --threads 2

TRL is optional: ``pip install "torch==2.13.0" trl`` on a CPU-only machine (the pin keeps pip from pulling a CUDA
build), or ``pip install -e ".[bench]"``. Without it the script says so and exits with code 2.

What both sides do on every repeat (the same rollout batch, same weights at start, same settings):
  - the tiny Qwen3-MoE policy (``agentgspo.models.tiny``; ``--hidden-size`` / ``--layers`` build a larger one), fp32,
    one copy per side, each with its own ``torch.optim.AdamW`` (same lr, no weight decay);
  - 64 synthetic trajectories in 8 groups of 8 (each group shares a prompt of 20-40 tokens, mask 0; completions
    of 80-110 tokens, mask 1; 100-150 tokens in all), random rewards, the same group advantages (unbiased std);
  - log_p_old recomputed with one no-grad forward over the batch (TRL does this whenever
    ``gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0``, here 1 % 4);
  - 4 minibatches of 16 sequences = 4 optimizer steps, one forward/backward each (no accumulation), grad-norm
    clipping at 1.0, the router load-balancing loss (coef 0.01, the model config's) and the token entropy metric;
  - GSPO: sequence-level ratio (mean log-ratio over trained tokens), eps 3e-4 / 4e-4, per-sequence mean
    (TRL: ``importance_sampling_level="sequence"``, ``loss_type="grpo"``, ``beta=0``).

Ours runs ``GSPOLearner.step`` end to end (collation, length buckets, metrics) twice: with its default settings
(the routing-volatility metric on, ``volatility_rows=16``: its choices before and after the first update are read
during the logp_old recompute and the second minibatch's forward, plus one no-grad forward of 16 rows after the
last update; TRL has no such metric), and with the metric off (``volatility_rows=0``). Both take the first update's
logp_old from its own forward (``first_logp_old="forward"``, the default): on the old policy's weights it is the
recompute's value, so ours scores 3 of the 4 minibatches where TRL scores 4.
TRL runs what its ``_generate_and_score_completions`` + ``training_step`` do after generation and rewards: pad
prompts (left) and completions (right), score log_p_old, shuffle, split into 4, then per slice
``compute_loss`` + ``accelerator.backward`` + clip + ``optimizer.step``. Generation and reward scoring are not
timed on either side. Micro-batches: TRL forwards 16 rows padded to max prompt + max completion; ours length-buckets
with ``micro_batch_tokens = 16 x longest trajectory``, so none of its forwards is larger than TRL's.

Throughput = real (non-padding) tokens of the rollout batch / wall seconds of the whole learner step; medians over
the repeats, the sides taking turns within each repeat (who goes first rotates) so machine noise hits all; the ratio
is the median of the per-repeat ratios, printed for the default settings (the target: >= 1.5x) and with the metric
off; beside them, the same from process CPU seconds (one intra-op thread: less disturbed than wall time by other
jobs on a shared machine). TRL's completion is one span after the prompt: a multi-turn trajectory (tool output
inside the completion) needs TRL's ``tool_mask``; ours takes any 0/1 mask.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from agentgspo.objective.terms import GSPO_EPS

GROUPS, GROUP_SIZE, MINIBATCHES = 8, 8, 4
LR = 1e-5
TARGET = 1.5  # ours (default settings) / TRL throughput the learner is held to (issue 46)
EPS_LOW, EPS_HIGH = GSPO_EPS  # paper §5.1, on both sides


def parse_args() -> argparse.Namespace:
    """The command-line settings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed learner steps per side (after warm-up)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed learner steps per side first")
    parser.add_argument("--hidden-size", type=int, default=None, help="build a tiny MoE of this width instead")
    parser.add_argument("--layers", type=int, default=3, help="layers when --hidden-size is given")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on a shared 2-core machine 2 OpenMP threads were "
        "25x slower, 4.3 s vs 0.16 s per fwd+bwd, when other jobs held the cores)",
    )
    return parser.parse_args()


def load_policy(args: argparse.Namespace):
    """The policy folder and its tokenizer (the cached tiny policy, or one built with the requested width)."""
    from transformers import AutoTokenizer

    from agentgspo.models.tiny import build_tiny_policy, tiny_policy_path

    if args.hidden_size is None:
        path = tiny_policy_path()
    else:
        path = build_tiny_policy(
            Path(tempfile.mkdtemp(prefix="bench-tiny-")), hidden_size=args.hidden_size, num_layers=args.layers
        )
    return path, AutoTokenizer.from_pretrained(path)


def make_trajectories(vocab: int, pad_id: int, seed: int):
    """64 trajectories: 8 groups of 8 sharing a prompt (mask 0), each with its own completion (mask 1)."""
    from agentgspo.core.trajectory import Trajectory

    rng = random.Random(seed)
    ids = [i for i in range(vocab) if i != pad_id]
    trajectories = []
    for group in range(GROUPS):
        prompt = rng.choices(ids, k=rng.randint(20, 40))
        for sample in range(GROUP_SIZE):
            completion = rng.choices(ids, k=rng.randint(80, 110))
            t = Trajectory(group_id=group, sample_id=sample, reward=rng.random())  # distinct rewards: A != 0
            t.append_forced(prompt)
            t.append_sampled(completion, [-rng.uniform(3.0, 6.0) for _ in completion])
            trajectories.append(t)
    return trajectories


# ----------------------------------------------------------------------------------------------------------- ours


def make_ours(path, pad_id: int, max_len: int, volatility_rows: int):
    """Our side: a fresh copy of the policy and a :class:`GSPOLearner`; returns its step on a list of trajectories."""
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from agentgspo.learning.learner import GSPOLearner, LearnerConfig

    accelerator = Accelerator(cpu=True)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    model, optimizer = accelerator.prepare(model, optimizer)
    config = LearnerConfig(
        objective="gspo",
        eps_low=EPS_LOW,
        eps_high=EPS_HIGH,
        minibatches=MINIBATCHES,
        micro_batch_tokens=16 * max_len,
        logp_old="recompute",
        max_grad_norm=1.0,
        volatility_rows=volatility_rows,
    )
    learner = GSPOLearner(model, optimizer, accelerator, pad_token_id=pad_id, config=config)
    return lambda trajectories: learner.step(trajectories)


# ----------------------------------------------------------------------------------------------------------- TRL


def make_trl(path, tokenizer, max_completion: int):
    """TRL's side: a fresh copy of the policy in a ``GRPOTrainer``; returns a step that runs its loss path on a list
    of trajectories."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import pad, shuffle_sequence_dict, split_tensor_dict

    from agentgspo.objective.advantages import group_advantages

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"),
        report_to=[],
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=16,
        gradient_accumulation_steps=1,
        steps_per_generation=MINIBATCHES,
        num_generations=GROUP_SIZE,
        num_iterations=1,
        importance_sampling_level="sequence",
        loss_type="grpo",
        epsilon=EPS_LOW,
        epsilon_high=EPS_HIGH,
        beta=0.0,
        learning_rate=LR,
        max_grad_norm=1.0,
        max_completion_length=max_completion,
        logging_steps=10**9,
        save_strategy="no",
        disable_dropout=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **kw: [0.0] * len(completions),
            args=config,
            train_dataset=Dataset.from_dict({"prompt": ["x"] * 64}),
            processing_class=tokenizer,
        )
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop, read by compute_loss
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    pad_id = tokenizer.pad_token_id

    def step(trajectories) -> dict[str, float]:
        # What _generate_and_score_completions does after generation: pad, advantages, score log_p_old.
        prompts, completions = [], []
        for t in trajectories:
            cut = t.loss_mask.index(1)
            prompts.append(torch.tensor(t.token_ids[:cut]))
            completions.append(torch.tensor(t.token_ids[cut:]))
        prompt_ids = pad(prompts, padding_value=pad_id, padding_side="left")  # [N, P]
        prompt_mask = pad([torch.ones_like(p) for p in prompts], padding_value=0, padding_side="left")  # [N, P]
        completion_ids = pad(completions, padding_value=pad_id, padding_side="right")  # [N, C]
        completion_mask = pad([torch.ones_like(c) for c in completions], padding_value=0)  # [N, C]
        rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float32)
        advantages, _ = group_advantages(rewards, GROUP_SIZE)  # [N], the same values ours uses
        with torch.no_grad():
            old, _, _ = trainer._get_per_token_logps_and_entropies(
                model,
                torch.cat([prompt_ids, completion_ids], 1),
                torch.cat([prompt_mask, completion_mask], 1),
                completion_ids.size(1),
                batch_size=config.per_device_train_batch_size,
            )  # [N, C]
        batch = {
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_ids,
            "completion_mask": completion_mask,
            "advantages": advantages.float(),
            "old_per_token_logps": old,
            "num_items_in_batch": completion_mask.sum(),
        }
        # training_step x 4: one optimizer step per slice (gradient_accumulation_steps=1).
        losses = []
        for inputs in split_tensor_dict(shuffle_sequence_dict(batch), MINIBATCHES):
            with trainer.compute_loss_context_manager():
                loss = trainer.compute_loss(model, inputs)
            trainer.accelerator.backward(loss)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
        return {"loss": sum(losses) / len(losses), "padded_tokens": prompt_ids.numel() + completion_ids.numel()}

    return step


# ----------------------------------------------------------------------------------------------------------- main


def main() -> int:
    """Time both sides on the same batch, alternating, and print the medians and the ratio; 2 without TRL."""
    args = parse_args()
    try:
        import trl  # noqa: F401
    except ImportError:
        print('TRL is not installed: pip install "torch==2.13.0" trl   (or: pip install -e ".[bench]")')
        return 2
    import transformers

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    path, tokenizer = load_policy(args)
    pad_id = tokenizer.pad_token_id
    vocab = transformers.AutoConfig.from_pretrained(path).vocab_size
    trajectories = make_trajectories(vocab, pad_id, args.seed)
    max_len = max(len(t.token_ids) for t in trajectories)
    max_completion = max(t.num_sampled_tokens for t in trajectories)
    real_tokens = sum(len(t.token_ids) for t in trajectories)
    trained_tokens = sum(t.num_sampled_tokens for t in trajectories)

    sides = {
        "ours, default (routing volatility on)": make_ours(path, pad_id, max_len, volatility_rows=16),
        "TRL GRPOTrainer (sequence, grpo)": make_trl(path, tokenizer, max_completion),
        "ours, routing volatility off": make_ours(path, pad_id, max_len, volatility_rows=0),
    }
    names = list(sides)
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
        f"{torch.get_num_threads()} threads; policy {path.name}; {len(trajectories)} trajectories "
        f"({GROUPS} groups of {GROUP_SIZE}), {real_tokens} tokens ({trained_tokens} trained), "
        f"{MINIBATCHES} optimizer steps per learner step",
        flush=True,
    )

    seconds: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}  # process CPU seconds: less hit by other jobs
    last: dict[str, dict] = {}
    for repeat in range(args.warmup + args.repeats):
        order = names[repeat % 3 :] + names[: repeat % 3]  # rotate who goes first
        elapsed: dict[str, float] = {}
        for name in order:
            started, started_cpu = time.perf_counter(), time.process_time()
            last[name] = sides[name](trajectories)
            elapsed[name] = time.perf_counter() - started
            if repeat >= args.warmup:
                seconds[name].append(elapsed[name])
                cpu[name].append(time.process_time() - started_cpu)
        print(
            f"repeat {repeat + 1}/{args.warmup + args.repeats}{' (warm-up)' if repeat < args.warmup else ''}: "
            + ", ".join(f"{n} {elapsed[n]:.2f}s" for n in names),
            flush=True,
        )

    default, theirs, probe_off = names
    print(f"\n{'side':<38} {'median s/step':>13} {'tokens/s':>10} {'min s':>7} {'max s':>7} {'median CPU s':>12}")
    for name in names:
        median = statistics.median(seconds[name])
        print(
            f"{name:<38} {median:>13.3f} {real_tokens / median:>10.0f} {min(seconds[name]):>7.3f} "
            f"{max(seconds[name]):>7.3f} {statistics.median(cpu[name]):>12.3f}"
        )
    print()
    for ours, target in ((default, TARGET), (probe_off, None)):
        ratios = [b / a for a, b in zip(seconds[ours], seconds[theirs])]  # TRL seconds / our seconds = our speed-up
        cpu_ratio = statistics.median(b / a for a, b in zip(cpu[ours], cpu[theirs]))
        ratio = statistics.median(ratios)
        verdict = "" if target is None else f"; target >= {target}x: {'met' if ratio >= target else 'NOT met'}"
        print(
            f"{ours} / TRL throughput (median of per-repeat ratios over {args.repeats} repeats): {ratio:.2f}x "
            f"(range {min(ratios):.2f}-{max(ratios):.2f}; in CPU seconds {cpu_ratio:.2f}x){verdict}"
        )
    from agentgspo.objective.batching import length_buckets

    lengths = [len(t.token_ids) for t in trajectories]
    ours_padded = sum(len(b) * max(lengths[i] for i in b) for b in length_buckets(lengths, 16 * max_len))
    print(
        f"padded tokens per pass over the batch (log_p_old scoring): TRL {last[theirs]['padded_tokens']} "
        f"(prompts left-, completions right-padded), ours {ours_padded} (length buckets); real {real_tokens}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
