"""GSPO on agentgspo/Search-v0: a real MoE checkpoint learns to answer 2-hop questions by searching a knowledge
base (BM25) and combining what it finds.

Deviations from the paper (GSPO, arXiv 2507.18071), which trains Qwen3-30B-A3B on single-turn math and code:
- multi-turn: a `search` tool over a BM25 index (in process, or `{"retriever": "http://HOST:PORT"}` for an
  `agentgspo search-server`); results are context (loss mask 0); only the policy's own turns are trained;
- the reward is exact match of the normalised answer (`{"reward": "f1"}`: token F1), no format or length reward;
- the questions and knowledge base are the env's synthetic built-in ones (`corpus` / `questions` for your own);
- the learning rate (1e-6), batch (16 prompts x 8 samples per GPU) and lengths are our choices (TrainConfig in
  agentgspo/training/train.py); the paper's clip range and 4 minibatches per rollout batch (§5.1) are kept; logp_old is
  recomputed.

Launch (the policy is a hub id resolved offline from the local cache: `huggingface-cli download
Qwen/Qwen3-30B-A3B` first; memory per GPU: `agentgspo estimate-memory --model-config qwen3-30b-a3b --gpus 8
--activation-checkpointing`):
    8 GPUs, FSDP2:  accelerate launch --config_file recipes/accelerate/fsdp2_8gpu.yaml recipes/gspo_search.py \\
                        --out runs/search --backend vllm
    several nodes:  accelerate launch --config_file recipes/accelerate/fsdp2_multinode.yaml --machine_rank $RANK \\
                        --main_process_ip $MASTER recipes/gspo_search.py --out runs/search --backend vllm
    1 GPU:          accelerate launch --config_file recipes/accelerate/1gpu.yaml recipes/gspo_search.py \\
                        --out runs/search-small --policy Qwen/Qwen3-0.6B --backend hf
    CPU smoke:      python recipes/gspo_search.py --smoke --out runs/search-smoke
                    (the tiny policy; the suite runs it)
Settings: `--config my.yaml` (a mapping of the fields below), then any `--flag` (`--help` lists them all).
Interrupt (Ctrl-C / SIGTERM): it finishes the step, checkpoints and prints the command that resumes.
Outputs: DIR/metrics.jsonl (one line per step), DIR/final/ (save_pretrained + agentgspo.json), DIR/summary.json,
DIR/trajectories/ (every 10th step's episodes: `agentgspo view FILE --tokenizer DIR/final`), DIR/checkpoints/,
DIR/tensorboard/.
"""

from __future__ import annotations

from agentgspo.training.train import Recipe, exit_process, run_recipe

SEARCH = Recipe(
    command="python recipes/gspo_search.py",
    # This recipe's defaults over TrainConfig's; every other setting keeps TrainConfig's default.
    # --env-kwargs: Search-v0's keyword arguments: e.g. {"retriever": "http://127.0.0.1:8001"}.
    defaults=dict(
        out="runs/search",
        env_id="agentgspo/Search-v0",
        max_new_tokens=2048,
        max_context=12288,  # Qwen3 thinks before it answers
        activation_checkpointing=True,  # long episodes at 30B
    ),
    description=" ".join(__doc__.split("\n\n")[0].split()),
)

if __name__ == "__main__":
    exit_process(run_recipe(SEARCH))
