"""DeepSpeed ZeRO-2/3 through accelerate, as far as it runs on CPU.

accelerate (1.15) sets DeepSpeed up only over GPU-like backends: on CPU one DeepSpeed process runs (its engine,
ZeRO partitioning and checkpoints are real), while several processes are joined by DeepSpeed but each is told by
accelerate that it is process 0 of 1. So here: one process checks that the learner's gradient accumulation goes
through accelerate's boundary (DeepSpeed steps once per minibatch, not per micro-batch: the update equals the plain
single-process one) and that a resume from an accelerate/DeepSpeed checkpoint is exact; two processes check that the
learner refuses to run, naming what is missing. Multi-GPU ZeRO runs use recipes/accelerate/deepspeed_zero3_8gpu.yaml.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("deepspeed") is None,
        reason="DeepSpeed is not installed (pip install 'agentgspo[deepspeed]')",
    ),
]

STEPS = 4
SAVE_AFTER = 2


def _launch(out: Path, mode: str, stage: int, processes: int = 1, timeout: int = 400) -> tuple[int, str]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{Path(__file__).resolve().parents[1]}:{os.environ.get('PYTHONPATH', '')}",
        "OMP_NUM_THREADS": "1",
    }
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--use_deepspeed",
        "--zero_stage",
        str(stage),
        "--gradient_clipping",
        "1.0",
        "--zero3_save_16bit_model",
        "true",
        "--num_processes",
        str(processes),
        "--num_machines",
        "1",
        "--main_process_port",  # 0: a free port, never one another test's launch holds
        "0",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        __file__,
        str(out),
        mode,
    ]
    launcher = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log = launcher.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        launcher.terminate()
        log = f"timed out after {timeout} s\n" + launcher.communicate(timeout=60)[0]
    return launcher.returncode, log[-6000:]


def _worker(out_dir: str, mode: str) -> None:
    """Under ``accelerate launch --use_deepspeed``: ``train`` (STEPS steps, checkpoint after SAVE_AFTER), ``resume``
    (from that checkpoint to STEPS) or ``refuse`` (2 processes: the learner must raise)."""
    from accelerate import Accelerator

    from agentgspo.training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
    from agentgspo.learning.learner import GSPOLearner
    from agentgspo.learning.sharding import full_state_dict, shard_policy
    from test_fsdp import OPTIMIZERS, _config, _policy, _rollout

    accelerator = Accelerator()
    out = Path(out_dir)
    torch.manual_seed(0)
    if mode == "refuse":
        try:
            shard_policy(accelerator, _policy(), OPTIMIZERS["adamw"])
        except RuntimeError as error:
            Path(out, f"refused.{os.environ['RANK']}.txt").write_text(str(error))
        return
    config = _config()  # several micro-batches
    model, optimizer = shard_policy(accelerator, _policy(), OPTIMIZERS["adamw"], max_grad_norm=config.max_grad_norm)
    learner = GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=config)
    accelerator.register_for_checkpointing(learner)
    start = load_checkpoint(accelerator, latest_checkpoint(out))["step"] if mode == "resume" else 0
    for step in range(start, STEPS):
        learner.step(_rollout(step))
        if step + 1 == SAVE_AFTER and mode == "train":
            save_checkpoint(accelerator, out, step + 1, {})
    state = full_state_dict(accelerator, model)
    torch.save({k: v.detach().cpu().float() for k, v in state.items()}, out / f"{mode}.pt")
    Path(out, f"{mode}.json").write_text(
        json.dumps({"engine_steps": model.global_steps, "engine": type(model).__name__})
    )


def _reference() -> dict[str, torch.Tensor]:
    from test_fsdp import _single_process_reference

    return _single_process_reference("adamw", steps=STEPS)


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_steps_once_per_minibatch_and_resumes_exactly(tmp_path, stage):
    """ZeRO-2 / ZeRO-3 (one CPU process): STEPS rollouts of one minibatch each, several micro-batches each, make
    exactly STEPS engine steps and the plain single-process update (AdamW; tolerance as in test_fsdp); a new launch
    resumed from the checkpoint after step SAVE_AFTER ends with the same parameters bit for bit."""
    from test_fsdp import ADAMW_TOLERANCE

    code, log = _launch(tmp_path, "train", stage)
    assert code == 0, log
    result = json.loads((tmp_path / "train.json").read_text())
    assert result["engine"] == "DeepSpeedEngine" and result["engine_steps"] == STEPS
    trained, reference = torch.load(tmp_path / "train.pt"), _reference()
    error = max((trained[k] - reference[k]).abs().max().item() for k in reference)
    print(f"ZeRO-{stage}: max |DeepSpeed - single process| = {error:.3g}")
    assert error <= ADAMW_TOLERANCE
    code, log = _launch(tmp_path, "resume", stage)
    assert code == 0, log
    resumed = torch.load(tmp_path / "resume.pt")
    for name, tensor in trained.items():
        assert torch.equal(resumed[name], tensor), name


def test_deepspeed_on_several_cpu_processes_is_refused_with_the_reason(tmp_path):
    code, log = _launch(tmp_path, "refuse", 2, processes=2)
    messages = [path.read_text() for path in sorted(tmp_path.glob("refused.*.txt"))]
    assert len(messages) == 2, log
    for message in messages:
        assert "DeepSpeed runs 2 processes but accelerate sees 1" in message and "needs a GPU" in message


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
