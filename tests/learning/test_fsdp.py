"""FSDP2 (``fully_shard``) on 2 CPU ranks under gloo: the sharded learner makes the single-process update, keeps the
ranks in step whatever each holds, gives the sampler full weights, and resumes exactly after a kill.

accelerate's ``--use_fsdp`` falls back to DDP without a GPU, so the workers run under ``accelerate launch --multi_gpu``
(2 gloo processes) and shard the policy with :func:`agentgspo.learning.sharding.shard_policy`, which applies
``fully_shard`` on the process group accelerate set up. The single-process reference runs in the test process.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from agentgspo.training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from agentgspo.learning.learner import GSPOLearner, LearnerConfig
from agentgspo.learning.preparation import compute_dtype_name
from agentgspo.learning.sharding import (
    full_state_dict,
    is_sharded,
    load_sampler_weights,
    save_full_weights,
    shard_policy,
    sharded_mixed_precision,
)
from agentgspo.core.trajectory import Trajectory

from launch_support import LAUNCH  # tests/launch_support.py

STEPS = 3
# Each scenario: rollout batch -> (rank 0's trajectories, rank 1's); whole groups of 4 stay on one rank.
SPLITS = {"unequal": (8, 4), "one_rank_empty": (12, 0)}
# SGD at lr 1 moves each parameter by its gradient, so the update error is the gradient error: the FSDP2 and single
# process gradients agree to fp32 summation order (max error <= 1e-4 x the largest change). AdamW divides by
# sqrt(v) + eps: a round-off d in a near-zero gradient entry moves that entry by up to lr * d / eps. With the default
# eps 1e-8 and d ~ 1e-9 that is 1e-4, the tolerance itself (measured: 1.14e-4 on another machine); eps 1e-6 bounds it
# at 1e-6, a hundredth of the tolerance, while a sharding bug (a shard's gradient or moment lost or doubled) moves
# entries by about lr = 1e-3. The tolerance is absolute, a tenth of one step at lr 1e-3.
OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=1.0),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-3, eps=1e-6),
}
SGD_RELATIVE_TOLERANCE = 1e-4
ADAMW_TOLERANCE = 1e-4


def _rollout(step: int) -> list[Trajectory]:
    """12 trajectories in 3 groups of 4 with mixed rewards, lengths 13-31 tokens (ids < the tiny vocabulary)."""
    rng = random.Random(step)
    out = []
    for i in range(12):
        t = Trajectory(group_id=i // 4, sample_id=i % 4)
        t.append_forced([rng.randrange(3, 100) for _ in range(10)])
        sampled = [rng.randrange(3, 100) for _ in range(rng.randrange(3, 22))]
        t.append_sampled(sampled, [-4.0] * len(sampled))
        t.reward = float(rng.random() < 0.5) if i % 4 else float(step % 2)  # never all-equal: slot 0 differs
        out.append(t)
    for group in range(3):  # make sure every group has both rewards
        members = out[4 * group : 4 * group + 4]
        if len({t.reward for t in members}) == 1:
            members[0].reward = 1.0 - members[0].reward
    return out


def _policy():
    from transformers import AutoModelForCausalLM

    from agentgspo.models.tiny import tiny_policy_path

    return AutoModelForCausalLM.from_pretrained(tiny_policy_path())


def _config(**overrides) -> LearnerConfig:
    # No router aux loss: the load-balancing loss of a micro-batch is not additive over rows, so a different split
    # into micro-batches (one process vs two) changes it; everything else is a sum over trajectories.
    return LearnerConfig(
        **{
            "minibatches": 1,
            "micro_batch_tokens": 64,
            "memory_estimate": False,
            "router_aux_loss_coef": 0.0,
            **overrides,
        }
    )


# ------------------------------------------------------------------------------------------------- the 2 workers


def _worker(out_dir: str, mode: str) -> None:
    """Run under ``accelerate launch`` with 2 processes (modes: ``train``, ``kill``, ``resume``)."""
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    out = Path(out_dir)

    def shard(make_optimizer=OPTIMIZERS["adamw"], **config):
        torch.manual_seed(0)
        model, optimizer = shard_policy(accelerator, _policy(), make_optimizer)
        return model, optimizer, GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=_config(**config))

    if mode == "train":
        for name, (first, second), kind in [(n, s, k) for n, s in SPLITS.items() for k in OPTIMIZERS]:
            name = f"{name}-{kind}"
            model, optimizer, learner = shard(OPTIMIZERS[kind])
            assert is_sharded(model) and learner.lockstep
            steps = []
            for step in range(STEPS):
                everything = _rollout(step)
                mine = everything[:first] if rank == 0 else everything[first : first + second]
                steps.append(learner.step(mine)["optimizer_steps"])
                accelerator.reduce(torch.ones(1), reduction="sum")  # a collective after the step, as recipes have
            state = full_state_dict(accelerator, model)  # every rank gets the full weights
            sampler = _policy()  # an unsharded copy for rollouts
            load_sampler_weights(sampler, state)
            batch = torch.tensor([[5, 6, 7, 8, 9, 10]])
            with torch.no_grad():
                sharded_logits = model(input_ids=batch).logits
                sampler_logits = sampler(input_ids=batch).logits
            if rank == 0:
                torch.save({k: v.detach().cpu() for k, v in state.items()}, out / f"{name}.pt")
            if name == "unequal-adamw":
                save_full_weights(accelerator, model, out / "hf-checkpoint")  # what a vLLM reload reads
            Path(out, f"{name}.rank{rank}.json").write_text(
                json.dumps(
                    {
                        "optimizer_steps": steps,
                        "sampler_logit_error": (sharded_logits - sampler_logits).abs().max().item(),
                        "shard_numel": sum(p.to_local().numel() for p in model.parameters()),
                        "full_numel": sum(p.numel() for p in model.parameters()),
                        "state_keys": sorted(state) == sorted(_policy().state_dict()),
                    }
                )
            )
        # bf16 compute (FSDP2 MixedPrecisionPolicy): fp32 master shards, and no fp32 [B, T, V] tensor anywhere.
        from test_precision import Float32VocabRows, long_trajectories

        torch.manual_seed(0)
        model, optimizer = shard_policy(accelerator, _policy(), OPTIMIZERS["adamw"], mixed_precision="bf16")
        learner = GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=_config(micro_batch_tokens=4096))
        before = [p.detach().to_local().clone() for p in model.parameters()]
        with Float32VocabRows(model.config.vocab_size) as recorder:
            metrics = learner.step(long_trajectories(seed=rank))
        Path(out, f"bf16.rank{rank}.json").write_text(
            json.dumps(
                {
                    "fp32_vocab_rows": recorder.rows,
                    "compute_dtype": compute_dtype_name(accelerator, model),
                    "unsharded_mixed_precision": sharded_mixed_precision(_policy()),
                    "optimizer_steps": metrics["optimizer_steps"],
                    "batch_rows": sum(len(t.token_ids) - 1 for t in long_trajectories(seed=rank)),
                    "master_dtypes": sorted({str(p.dtype) for p in model.parameters()}),
                    "moved": max(
                        (p.detach().to_local() - b).abs().max().item() for p, b in zip(model.parameters(), before)
                    ),
                }
            )
        )
        return

    # kill / resume: 4 rollout steps of 4 minibatches each (paper §5.1), a checkpoint after step 2.
    model, optimizer, learner = shard(minibatches=4, micro_batch_tokens=96)
    learner.generator.manual_seed(10 + rank)  # each rank its own shuffling stream, as the quickstart seeds them
    accelerator.register_for_checkpointing(learner)
    start = 0
    if mode == "resume":
        start = load_checkpoint(accelerator, latest_checkpoint(out / mode.replace("resume", "kill")))["step"]
    for step in range(start, 4):
        everything = _rollout(step)
        learner.step(everything[:8] if rank == 0 else everything[8:])
        if step + 1 == 2 and mode in ("kill", "uninterrupted"):
            save_checkpoint(accelerator, out / mode, step + 1, {})
            if mode == "kill":
                accelerator.wait_for_everyone()
                os.kill(os.getpid(), signal.SIGKILL)  # both ranks die right after the checkpoint
    state = full_state_dict(accelerator, model)
    if rank == 0:
        torch.save({k: v.detach().cpu() for k, v in state.items()}, out / f"{mode}.pt")


def _launch(out: Path, mode: str, *, timeout: int = 300) -> tuple[int, str]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{Path(__file__).resolve().parents[1]}:{os.environ.get('PYTHONPATH', '')}",
        "OMP_NUM_THREADS": "1",
    }
    launcher = subprocess.Popen(
        [*LAUNCH, __file__, str(out), mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        log = launcher.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:  # a deadlock between the ranks; SIGTERM makes the launcher end its workers
        launcher.terminate()
        log = f"timed out (deadlock?) after {timeout} s\n" + launcher.communicate(timeout=60)[0]
    return launcher.returncode, log[-6000:]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp")
    code, log = _launch(out, "train")
    return out, code, log


def _single_process_reference(kind: str, steps: int = STEPS) -> dict[str, torch.Tensor]:
    """The same rollouts, all 12 trajectories in one process (no sharding)."""
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = _policy()
    optimizer = OPTIMIZERS[kind](model.parameters())
    model, optimizer = accelerator.prepare(model, optimizer)
    learner = GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=_config())
    for step in range(steps):
        learner.step(_rollout(step))
    return {k: v.detach().clone() for k, v in accelerator.unwrap_model(model).state_dict().items()}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("split", sorted(SPLITS))
def test_fsdp2_on_two_ranks_equals_the_single_process_update(trained, split, kind):
    """8 and 4 trajectories per rank, or all 12 on rank 0 and none on rank 1: after STEPS GSPO steps the sharded
    parameters equal the single-process run on the same 12 trajectories (fp32; tolerances above). The ranks run the
    same number of forwards/backwards (else gloo deadlocks or errors)."""
    out, code, log = trained
    name = f"{split}-{kind}"
    if not (out / f"{name}.pt").exists():
        pytest.fail(f"the FSDP2 workers did not finish (exit {code}):\n{log}")
    sharded = torch.load(out / f"{name}.pt")
    reference = _single_process_reference(kind)
    initial = _policy().state_dict()
    assert sorted(sharded) == sorted(reference)
    error = max((sharded[k] - reference[k]).abs().max().item() for k in reference)
    moved = max((reference[k] - initial[k]).abs().max().item() for k in reference)
    print(f"{name}: max |FSDP2 - single process| = {error:.3g}, largest change {moved:.3g}")
    assert error <= (SGD_RELATIVE_TOLERANCE * moved if kind == "sgd" else ADAMW_TOLERANCE), (name, error, moved)
    assert moved > 10 * ADAMW_TOLERANCE  # not vacuous: the weights moved
    for rank in (0, 1):
        result = json.loads((out / f"{name}.rank{rank}.json").read_text())
        assert result["optimizer_steps"] == [1] * STEPS


def test_fsdp2_parameters_are_sharded_and_the_sampler_gets_full_weights(trained):
    """Each rank stores about half of every parameter; full_state_dict gathers all of it on every rank, with the
    unsharded model's keys, a sampler loaded from it computes the sharded model's logits, and save_full_weights
    writes them as a Hugging Face checkpoint (what vLLM reloads)."""
    out, code, log = trained
    results = [out / f"unequal-adamw.rank{rank}.json" for rank in (0, 1)]
    if not all(path.exists() for path in results):
        pytest.fail(f"the FSDP2 workers did not finish (exit {code}):\n{log}")
    for path in results:
        result = json.loads(path.read_text())
        assert result["shard_numel"] <= 0.6 * result["full_numel"]
        assert result["state_keys"] and result["sampler_logit_error"] <= 1e-5
    # The Hugging Face checkpoint the main process wrote holds the same full weights.
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(out / "hf-checkpoint").state_dict()
    gathered = torch.load(out / "unequal-adamw.pt")
    for name, tensor in gathered.items():
        assert torch.equal(saved[name], tensor), name


def test_fsdp2_bf16_keeps_fp32_master_shards_and_no_fp32_logits(trained):
    """shard_policy(mixed_precision="bf16"): layers are gathered and computed in bf16, the sharded parameters the
    optimizer updates stay fp32, and no op of the step (forward, loss, backward, metrics) makes an fp32 tensor with
    more than one log-prob chunk (512 rows) of the vocabulary, while a micro-batch holds > 1000 tokens."""
    from agentgspo.objective.logprobs import DEFAULT_CHUNK_SIZE

    out, code, log = trained
    for rank in (0, 1):
        path = out / f"bf16.rank{rank}.json"
        if not path.exists():
            pytest.fail(f"the FSDP2 workers did not finish (exit {code}):\n{log}")
        result = json.loads(path.read_text())
        assert result["optimizer_steps"] == 1 and result["moved"] > 0
        assert result["master_dtypes"] == ["torch.float32"]
        assert result["compute_dtype"] == "bf16" and result["unsharded_mixed_precision"] == "no"  # fp32 weights
        assert result["batch_rows"] > 2 * DEFAULT_CHUNK_SIZE
        assert result["fp32_vocab_rows"] <= DEFAULT_CHUNK_SIZE, result


@pytest.mark.slow
def test_fsdp2_kill_and_resume_is_exact(tmp_path):
    """Both ranks are SIGKILLed right after the step-2 checkpoint; a new launch resumes from it and its parameters
    after step 4 equal an uninterrupted run's bit for bit (sharded model and AdamW state through
    torch.distributed.checkpoint, each rank's shuffling generator through the learner's state)."""
    code, log = _launch(tmp_path, "uninterrupted")
    assert code == 0, log
    code, log = _launch(tmp_path, "kill")
    assert code != 0 and latest_checkpoint(tmp_path / "kill") is not None, log
    assert not (tmp_path / "kill.pt").exists()
    code, log = _launch(tmp_path, "resume")
    assert code == 0, log
    uninterrupted, resumed = torch.load(tmp_path / "uninterrupted.pt"), torch.load(tmp_path / "resume.pt")
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), name


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
