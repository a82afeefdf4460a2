"""The quickstart recipe: a seconds-long smoke run, exact resume after SIGKILL, and two DDP ranks in sync."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[1]
PARITY = ["--env-id", "parity_env:agentgspo/Parity-v0", "--env-kwargs", "{}"]
SMALL = ["--demos", "16", "--warm-steps", "2", "--warm-batch", "8", "--warm-eval-every", "1000",
         "--prompts-per-step", "4", "--group-size", "4", "--max-new-tokens", "12", "--eval-episodes", "4",
         "--lr", "1e-3", "--warmup-steps", "0", "--stop-success", "2.0"]


def _run(args: list[str], *, launcher: list[str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'tests'}:{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1"}
    command = [*(launcher or [sys.executable]), str(REPO / "recipes" / "quickstart.py"), *args]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"{command} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "final" / "model.safetensors"))


def test_smoke_run_writes_metrics_plot_and_checkpoint(tmp_path):
    from agentgspo.recipes.quickstart import QuickstartConfig, main

    config = QuickstartConfig(out=str(tmp_path), demos=16, warm_steps=3, warm_batch=8, warm_eval_every=2,
                              steps=2, prompts_per_step=2, group_size=4, max_new_tokens=24, eval_episodes=4,
                              checkpoint_every=1)
    final = main(config)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for field in ("step", "reward_mean", "success", "clip_frac_seq", "clip_frac_token", "lr", "elapsed_s"):
        assert field in rows[0], field
    assert (tmp_path / "reward.png").stat().st_size > 10_000
    assert (tmp_path / "final" / "config.json").exists() and (tmp_path / "final" / "tokenizer.json").exists()
    assert (tmp_path / "checkpoints").is_dir() and json.loads((tmp_path / "config.json").read_text())["steps"] == 2
    assert 0.0 <= final["sampled"] <= 1.0


def test_gspo_steps_change_the_policy_and_log_losses(tmp_path):
    _run(["--out", str(tmp_path), "--steps", "2", *PARITY, *SMALL])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(r["optimizer_steps"] == 4 for r in rows)  # 4 minibatches per rollout batch (paper §5.1)
    assert all("loss" in r and "clip_frac_token" in r and "routing_volatility" in r for r in rows)


@pytest.mark.slow
def test_resume_after_sigkill_matches_an_uninterrupted_run(tmp_path):
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    common = ["--steps", "4", "--checkpoint-every", "2", *PARITY, *SMALL]
    _run(["--out", str(straight), *common])
    killed = _run(["--out", str(broken), *common, "--kill-after-step", "2"], check=False)
    assert killed.returncode == -9, killed.stderr[-2000:]  # really SIGKILLed after step 2's checkpoint
    assert not (broken / "final").exists()
    resumed = _run(["--out", str(broken), *common])
    assert "resumed from" in resumed.stdout + resumed.stderr
    a, b = _weights(straight), _weights(broken)
    initial = load_file(str(Path(_tiny_path()) / "model.safetensors"))
    moved = max((a[k].double() - initial[k].double()).abs().max().item() for k in a)
    assert moved > 1e-4, "the run did not train, so this test would prove nothing"
    # Tolerance: identical ids and RNG streams give identical arithmetic; allow float32 round-off only.
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6, msg=name)
    straight_rows = (straight / "metrics.jsonl").read_text().splitlines()
    broken_rows = (broken / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["reward_mean"] for r in straight_rows] == [json.loads(r)["reward_mean"] for r in broken_rows]


@pytest.mark.slow
def test_two_processes_keep_identical_parameters(tmp_path):
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    _run(["--out", str(tmp_path), "--steps", "2", *PARITY, *SMALL], launcher=launcher)
    final = json.loads((tmp_path / "final_eval.json").read_text())
    checksums = final["parameter_checksums"]
    assert len(checksums) == 2 and checksums[0] == checksums[1]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert json.loads((tmp_path / "config.json").read_text())["world_size"] == 2 and len(rows) == 2


def _tiny_path() -> Path:
    from agentgspo.tiny import tiny_policy_path

    return tiny_policy_path()
