"""GSPO on agentgspo/CodeForces-v0: a real MoE checkpoint learns competitive programming: run code on custom input
and on the statement's samples, then submit to a judge with hidden tests, checkers and interactors.

Deviations from the paper (GSPO, arXiv 2507.18071), which trains Qwen3-30B-A3B on single-turn math and code:
- multi-turn: tools `run`, `run_samples` and `submit` (Python or C++17, bubblewrap sandbox; verdicts are context,
  loss mask 0), up to 3 submissions; only the policy's own turns are trained, the whole episode is one sequence;
- the reward is 1.0 for an accepted submission, else 0.0 (`--env-kwargs '{"partial_credit": true}'`: the fraction
  of hidden tests passed); a judge error is never charged to the model (the episode is left out of the update);
- the problems are the project's problem set (`{"data_files": "builtin"}`; an open-r1/codeforces .parquet, a
  Kattis/ICPC package folder or the five starter problems with `null`), not the paper's data;
- the learning rate (1e-6), batch (16 prompts x 8 samples per GPU) and lengths are our choices (TrainConfig in
  agentgspo/training/train.py); the paper's clip range and 4 minibatches per rollout batch (§5.1) are kept; logp_old is
  recomputed.

Launch (the policy is a hub id resolved offline from the local cache: `huggingface-cli download
Qwen/Qwen3-30B-A3B` first; memory per GPU: `agentgspo estimate-memory --model-config qwen3-30b-a3b --gpus 8
--activation-checkpointing`):
    8 GPUs, FSDP2:  accelerate launch --config_file recipes/accelerate/fsdp2_8gpu.yaml recipes/gspo_codeforces.py \\
                        --out runs/codeforces --backend vllm
    several nodes:  accelerate launch --config_file recipes/accelerate/fsdp2_multinode.yaml --machine_rank $RANK \\
                        --main_process_ip $MASTER recipes/gspo_codeforces.py --out runs/codeforces --backend vllm
    1 GPU:          accelerate launch --config_file recipes/accelerate/1gpu.yaml recipes/gspo_codeforces.py \\
                        --out runs/codeforces-small --policy Qwen/Qwen3-0.6B --backend hf
    CPU smoke:      python recipes/gspo_codeforces.py --smoke --out runs/codeforces-smoke
                    (the tiny policy; the suite runs it)
Settings: `--config my.yaml` (a mapping of the fields below), then any `--flag` (`--help` lists them all).
Interrupt (Ctrl-C / SIGTERM): it finishes the step, checkpoints and prints the command that resumes.
Held-out evaluation: the problems of `--held-out` (8 of the set, 900 to 2400) are CodeForces-v0's held-out split
(env keyword `held_out`): training plays split "train" (every other problem), and they are played every
`--eval-every` steps as `agentgspo eval` plays them: `eval/pass@1` in metrics.jsonl, the attempts (resumable) and
their summary in DIR/eval/step_N/ (`agentgspo view DIR/eval/step_N/results.jsonl` shows them); with
`--final-eval-episodes N` the final evaluation plays split "test", the same problems (DIR/summary.json says so).
Outputs: DIR/metrics.jsonl (one line per step), DIR/final/ (save_pretrained + agentgspo.json), DIR/summary.json,
DIR/trajectories/ (every 10th step's episodes: `agentgspo view FILE --tokenizer DIR/final`), DIR/checkpoints/,
DIR/tensorboard/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgspo.core.settings import setting
from agentgspo.eval.hook import EvalHook
from agentgspo.training.train import SMOKE, Recipe, TrainConfig, exit_process, run_recipe

# Held out of training and evaluated during it: one problem per rating band of the set, an interactive one among them.
HELD_OUT = [
    "002-fence-painting",
    "006-three-divisors",
    "010-convoy-trucks",
    "019-mountain-peak",
    "024-one-free-ride",
    "030-rotating-lanterns",
    "033-heavy-trucks",
    "040-caravan-split",
]


@dataclass
class CodeforcesConfig(TrainConfig):
    """GSPO on CodeForces-v0: :class:`agentgspo.training.train.TrainConfig`'s settings and a held-out set evaluated
    during training (this recipe's defaults: :data:`CODEFORCES`)."""

    held_out: list = setting(
        HELD_OUT,
        "problem ids never trained on and evaluated every --eval-every steps: CodeForces-v0's held-out split "
        "(its held_out keyword; [] : the env's own rule, a hash of the id)",
    )
    eval_every: int = setting(
        25,
        "GSPO steps between evaluations on the held-out problems: pass@1 goes to "
        "metrics.jsonl as eval/pass@1, each attempt to DIR/eval/step_N/ (0: none)",
        at_least=0,
    )
    eval_samples: int = setting(
        4, "attempts per held-out problem at each evaluation (pass@1 is their mean)", at_least=1
    )

    def __post_init__(self) -> None:
        self.env_kwargs = self.split_env_kwargs()  # before the base checks: they judge the final evaluation's split
        super().__post_init__()
        if self.eval_every and not self.held_out:
            raise ValueError(
                "eval_every without held-out problems would evaluate on training problems: give "
                "--held-out '[\"ID\", ...]' or --eval-every 0"
            )

    def split_env_kwargs(self) -> dict[str, Any]:
        """``env_kwargs`` with ``held_out`` as the env's held-out ids (training then plays split "train", the final
        evaluation split "test"); the same ids given in both places are fine, different ones an error."""
        given = self.env_kwargs.get("held_out")
        if not self.held_out:
            return dict(self.env_kwargs)
        if given is not None and list(given) != list(self.held_out):
            raise ValueError(
                f"held_out: --held-out {list(self.held_out)} and --env-kwargs' held_out {list(given)} differ; give "
                "the ids once, with --held-out"
            )
        return {**self.env_kwargs, "held_out": list(self.held_out)}


def held_out_evaluation(config: CodeforcesConfig, out: Path, rollout: Any) -> Any | None:
    """``agentgspo eval`` of the sampler on the held-out problems every ``eval_every`` steps (pass@1): this recipe's
    evaluation (:data:`agentgspo.training.train.Evaluation`)."""
    if not config.eval_every:
        return None
    other = {k: v for k, v in config.env_kwargs.items() if k not in ("data_files", "exclude", "held_out", "split")}
    return EvalHook(
        out,
        problems=config.env_kwargs.get("data_files"),
        held_out=config.held_out,
        every=config.eval_every,
        samples=config.eval_samples,
        ks=(1,),
        config=rollout,
        env_kwargs=other,
        seed=config.seed,
    )


CODEFORCES = Recipe(
    command="python recipes/gspo_codeforces.py",
    config_class=CodeforcesConfig,
    # This recipe's defaults over CodeforcesConfig's; --env-kwargs: CodeForces-v0's keyword arguments (data_files:
    # "builtin" is the project's problem set; partial_credit).
    defaults=dict(
        out="runs/codeforces",
        env_id="agentgspo/CodeForces-v0",
        env_kwargs={"data_files": "builtin"},
        max_turns=8,  # runs, sample checks, up to 3 submissions
        max_context=32768,  # statements and verdicts are long
        activation_checkpointing=True,  # long episodes at 30B
    ),
    # --smoke plays the five starter problems (short statements), one held out and evaluated after each step.
    smoke={**SMOKE, "env_kwargs": {}, "held_out": ["9000C"], "eval_every": 1, "eval_samples": 1},
    description=" ".join(__doc__.split("\n\n")[0].split()),
    evaluation=held_out_evaluation,
)

if __name__ == "__main__":
    exit_process(run_recipe(CODEFORCES))
