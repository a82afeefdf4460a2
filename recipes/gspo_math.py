"""GSPO on agentgspo/Math-v0: a real MoE checkpoint learns to solve math problems with a sandboxed python tool.

Deviations from the paper (GSPO, arXiv 2507.18071), which trains Qwen3-30B-A3B on single-turn math and code:
- multi-turn: the policy may call a `python` tool (bubblewrap sandbox) before it answers in \\boxed{}; tool
  replies are context (loss mask 0), only the policy's own turns are trained, the whole episode is one sequence;
- the reward is binary correctness checked by math-verify; no format or length reward;
- the data is the env's ~30 built-in problems (`--env-kwargs '{"data_files": "my.jsonl"}'` for your own set);
- the learning rate (1e-6), batch (16 prompts x 8 samples per GPU) and lengths are our choices (TrainConfig in
  agentgspo/training/train.py); the paper's clip range and 4 minibatches per rollout batch (§5.1) are kept; logp_old is
  recomputed (no sampler/learner mismatch).

Launch (the policy is a hub id resolved offline from the local cache: `huggingface-cli download
Qwen/Qwen3-30B-A3B` first; memory per GPU: `agentgspo estimate-memory --model-config qwen3-30b-a3b --gpus 8
--activation-checkpointing`):
    8 GPUs, FSDP2:  accelerate launch --config_file recipes/accelerate/fsdp2_8gpu.yaml recipes/gspo_math.py \\
                        --out runs/math --backend vllm
    several nodes:  accelerate launch --config_file recipes/accelerate/fsdp2_multinode.yaml --machine_rank $RANK \\
                        --main_process_ip $MASTER recipes/gspo_math.py --out runs/math --backend vllm
    1 GPU:          accelerate launch --config_file recipes/accelerate/1gpu.yaml recipes/gspo_math.py \\
                        --out runs/math-small --policy Qwen/Qwen3-0.6B --backend hf
    CPU smoke:      python recipes/gspo_math.py --smoke --out runs/math-smoke      (the tiny policy; the suite runs it)
    tiny, learning: python recipes/gspo_math.py --smoke --out runs/math-tiny --steps 20 --warm-demos 256 \\
                        --warm-steps 300 --prompts-per-step 4 --group-size 8 --max-new-tokens 128 \\
                        --env-kwargs '{"sandbox": "none"}'
                    (a warm start on the env's mixed demonstrator, oracle or a wrong guess, then GSPO; measured
                    2026-12-01 on 2 cores: success of the 32 episodes per step 0.53 0.59 0.62 0.59 0.66 ... 0.72 0.81
                    0.75 0.84 0.81, 5-step means 0.60 -> 0.79, in 21 minutes with another job beside it)
Settings: `--config my.yaml` (a mapping of the fields below), then any `--flag` (`--help` lists them all).
Interrupt (Ctrl-C / SIGTERM): it finishes the step, checkpoints and prints the command that resumes.
Outputs: DIR/metrics.jsonl (one line per step), DIR/final/ (save_pretrained + agentgspo.json), DIR/summary.json,
DIR/trajectories/ (every 10th step's episodes: `agentgspo view FILE --tokenizer DIR/final`), DIR/checkpoints/,
DIR/tensorboard/.
"""

from __future__ import annotations

from agentgspo.training.train import Recipe, exit_process, run_recipe

MATH = Recipe(
    command="python recipes/gspo_math.py",
    # This recipe's defaults over TrainConfig's; every other setting keeps TrainConfig's default.
    # --env-kwargs: Math-v0's keyword arguments: e.g. {"data_files": "problems.jsonl"}.
    defaults=dict(
        out="runs/math",
        env_id="agentgspo/Math-v0",
        max_turns=4,  # tool calls, then the answer
        activation_checkpointing=True,  # long episodes at 30B
    ),
    description=" ".join(__doc__.split("\n\n")[0].split()),
)

if __name__ == "__main__":
    exit_process(run_recipe(MATH))
