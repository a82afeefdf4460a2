"""The memory estimate: exact parameter counts from a meta-device model, activation formulas checked against what
autograd really saves, the estimate-memory command, and the learner printing it at start."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from agentgspo.objective.logprobs import token_logprobs
from agentgspo.learning.memory import GIB, estimate_memory, load_model_config, measure_saved_activation_bytes


def _small_moe_config(**overrides):
    from transformers import AutoConfig

    values = dict(
        vocab_size=2048,
        hidden_size=128,
        intermediate_size=256,
        moe_intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_experts=8,
        num_experts_per_tok=2,
        tie_word_embeddings=False,
    )
    values.update(overrides)
    return AutoConfig.for_model("qwen3_moe", **values)


def test_qwen3_30b_a3b_preset_has_the_published_parameter_count():
    """The preset builds on the meta device (no memory) and counts 30.5B parameters, as the model card states."""
    estimate = estimate_memory("qwen3-30b-a3b", processes=8, sharding="fsdp2")
    assert 30.4e9 < estimate.parameters < 30.6e9
    assert estimate.optimizer_bytes == pytest.approx(8 * estimate.parameters / 8)  # AdamW m, v in fp32, sharded /8


def test_parameter_count_equals_a_real_model():
    from transformers import AutoModelForCausalLM

    config = _small_moe_config()
    real = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    assert estimate_memory(config, processes=1).parameters == real


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_formula_matches_what_autograd_saves(dtype, checkpointing):
    """Bytes autograd saves for the backward of a forward + fp32 log-probs on a small Qwen3-MoE (bf16 weights stand
    for FSDP2's bf16 compute) are within 10% of the estimate (measured here: 0.3-2.5% apart)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = _small_moe_config()
    model = AutoModelForCausalLM.from_config(config)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    tokens = 1024
    ids = torch.randint(0, config.vocab_size, (2, tokens // 2))

    def run():
        logits = model(input_ids=ids, use_cache=False).logits
        return token_logprobs(logits[:, :-1], ids[:, 1:]).sum()

    measured = measure_saved_activation_bytes(model, run)
    estimate = estimate_memory(
        config, processes=1, micro_batch_tokens=tokens, compute_dtype=dtype, activation_checkpointing=checkpointing
    )
    bytes_per_value = 2 if dtype == "bf16" else 4
    # The forward saves the layers' activations (not the recomputed layer, which lives only in the backward) and
    # the logits the log-prob backward needs.
    expected = estimate.activation_bytes - estimate.recompute_bytes + bytes_per_value * tokens * config.vocab_size
    assert expected == pytest.approx(measured, rel=0.10)


def test_sharding_divides_model_states():
    """FSDP2 and ZeRO-3 split the fp32 masters, gradients and AdamW state over the processes; DDP replicates them."""
    config = _small_moe_config(num_hidden_layers=8)
    ddp = estimate_memory(config, processes=8, sharding="ddp")
    fsdp2 = estimate_memory(config, processes=8, sharding="fsdp2")
    zero3 = estimate_memory(config, processes=8, sharding="zero3")
    assert ddp.optimizer_bytes == 8 * ddp.parameters
    assert fsdp2.optimizer_bytes == zero3.optimizer_bytes == ddp.parameters
    assert fsdp2.parameter_bytes < ddp.parameter_bytes / 2 and zero3.gradient_bytes == ddp.parameters / 2
    assert fsdp2.activation_bytes == ddp.activation_bytes  # activations do not shard


def test_load_model_config_accepts_a_folder_or_a_file_and_names_the_presets(tmp_path):
    config = _small_moe_config()
    config.save_pretrained(tmp_path)
    assert load_model_config(str(tmp_path)).hidden_size == 128
    assert load_model_config(str(tmp_path / "config.json")).num_experts == 8
    with pytest.raises(ValueError, match="qwen3-30b-a3b"):
        load_model_config("no-such-model")


def _cli(capsys, *args) -> subprocess.CompletedProcess:
    """`agentgspo estimate-memory ARGS` in this process: the console script's own ``main`` (a process per call cost
    ~4 s of imports), its exit status, stdout and stderr."""
    from agentgspo.cli import main

    capsys.readouterr()
    try:
        status = main(["estimate-memory", *args])
    except SystemExit as exit:  # argparse's refusals
        status = exit.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, status, out, err)


@pytest.mark.slow
def test_estimate_memory_command_for_qwen3_30b_a3b_on_8_gpus(capsys):
    """The sharded-training page's numbers (docs/tutorials/sharded.md): Qwen3-30B-A3B on 8 x 80 GB under FSDP2 fits
    with activation checkpointing at 8192 tokens per micro-batch and does not without it (exit status 1 when it does
    not fit)."""
    base = ["--model-config", "qwen3-30b-a3b", "--gpus", "8", "--gpu-memory-gb", "80", "--sharding", "fsdp2"]
    fits = _cli(capsys, *base, "--activation-checkpointing", "--json")
    assert fits.returncode == 0, fits.stderr
    result = json.loads(fits.stdout)
    assert result["fits"] is True and result["sharding"] == "fsdp2" and result["processes"] == 8
    assert result["optimizer_gib"] == pytest.approx(8 * result["parameters"] / 8 / GIB, abs=0.01)
    plain = _cli(capsys, *base)
    assert plain.returncode == 1 and "does NOT fit in 80 GiB" in plain.stdout
    # The page shows the tool's own output, and quotes the run without checkpointing.
    readme = (Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "sharded.md").read_text()
    assert _cli(capsys, *base, "--activation-checkpointing").stdout.strip() in readme
    activations = next(line for line in plain.stdout.splitlines() if "activations" in line).split()[-2]
    total = next(line for line in plain.stdout.splitlines() if "total" in line).split()[1]
    assert f"take {activations} GiB" in readme and f"needs {total} GiB per GPU" in readme
    for line in ("parameters", "gradients", "optimizer state", "activations per micro-batch"):
        assert line in plain.stdout
    bad = _cli(capsys, "--model-config", "no-such-model")
    assert bad.returncode == 2 and "qwen3-30b-a3b" in bad.stderr


def test_learner_prints_the_estimate_at_start(capsys):
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from agentgspo.learning.learner import GSPOLearner
    from agentgspo.models.tiny import tiny_policy_path

    model = AutoModelForCausalLM.from_pretrained(tiny_policy_path())
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters())
    model, optimizer = accelerator.prepare(model, optimizer)
    GSPOLearner(model, optimizer, accelerator, pad_token_id=0)
    printed = capsys.readouterr().out
    assert "memory estimate per process" in printed and "activations per micro-batch (8192 tokens)" in printed
