"""GSPO on agentgspo/Code-v0: a real MoE checkpoint learns to write Python functions that pass hidden tests, with a
sandboxed interpreter to try code first.

Deviations from the paper (GSPO, arXiv 2507.18071), which trains Qwen3-30B-A3B on single-turn math and code:
- multi-turn: the policy may run code in a bubblewrap sandbox (the tool's output is context, loss mask 0) before it
  answers with its solution; only its own turns are trained, the whole episode is one sequence;
- the reward is 1.0 when every assertion of the problem's hidden `check` passes (envs/code.py), else 0.0; no
  format or length reward;
- the problems are the env's built-in set (`--env-kwargs '{"problems": "my.jsonl"}'` for your own);
- the learning rate (1e-6), batch (16 prompts x 8 samples per GPU) and lengths are our choices (TrainConfig in
  agentgspo/training/train.py); the paper's clip range and 4 minibatches per rollout batch (§5.1) are kept; logp_old is
  recomputed.

Launch (the policy is a hub id resolved offline from the local cache: `huggingface-cli download
Qwen/Qwen3-30B-A3B` first; memory per GPU: `agentgspo estimate-memory --model-config qwen3-30b-a3b --gpus 8
--activation-checkpointing`):
    8 GPUs, FSDP2:  accelerate launch --config_file recipes/accelerate/fsdp2_8gpu.yaml recipes/gspo_code.py \\
                        --out runs/code --backend vllm
    several nodes:  accelerate launch --config_file recipes/accelerate/fsdp2_multinode.yaml --machine_rank $RANK \\
                        --main_process_ip $MASTER recipes/gspo_code.py --out runs/code --backend vllm
    1 GPU:          accelerate launch --config_file recipes/accelerate/1gpu.yaml recipes/gspo_code.py \\
                        --out runs/code-small --policy Qwen/Qwen3-0.6B --backend hf
    CPU smoke:      python recipes/gspo_code.py --smoke --out runs/code-smoke      (the tiny policy; the suite runs it)
Settings: `--config my.yaml` (a mapping of the fields below), then any `--flag` (`--help` lists them all).
Interrupt (Ctrl-C / SIGTERM): it finishes the step, checkpoints and prints the command that resumes.
Outputs: DIR/metrics.jsonl (one line per step), DIR/final/ (save_pretrained + agentgspo.json), DIR/summary.json,
DIR/trajectories/ (every 10th step's episodes: `agentgspo view FILE --tokenizer DIR/final`), DIR/checkpoints/,
DIR/tensorboard/.
"""

from __future__ import annotations

from agentgspo.training.train import Recipe, exit_process, run_recipe

CODE = Recipe(
    command="python recipes/gspo_code.py",
    # This recipe's defaults over TrainConfig's; every other setting keeps TrainConfig's default.
    # --env-kwargs: Code-v0's keyword arguments: e.g. {"sandbox": "docker"}.
    defaults=dict(
        out="runs/code",
        env_id="agentgspo/Code-v0",
        activation_checkpointing=True,  # long episodes at 30B
    ),
    description=" ".join(__doc__.split("\n\n")[0].split()),
)

if __name__ == "__main__":
    exit_process(run_recipe(CODE))
