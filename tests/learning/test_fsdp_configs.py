"""The accelerate config files under recipes/accelerate/ parse and validate as accelerate launch configs, and their
FSDP2 settings reach accelerate's FSDP plugin (the GPU path of agentgspo.learning.sharding)."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
from accelerate.commands.launch import _validate_launch_command, launch_command_parser

CONFIGS = Path(__file__).resolve().parents[2] / "recipes" / "accelerate"
EXPECTED = {  # file -> (distributed setting, processes, machines)
    "1gpu.yaml": ("none", 1, 1),
    "fsdp2_8gpu.yaml": ("fsdp2", 8, 1),
    "fsdp2_multinode.yaml": ("fsdp2", 16, 2),
    "deepspeed_zero3_8gpu.yaml": ("zero3", 8, 1),
}


def _validated(name: str):
    """``accelerate launch --config_file FILE train.py`` as accelerate parses and validates it (no launch)."""
    args = launch_command_parser().parse_args(["--config_file", str(CONFIGS / name), "train.py"])
    return _validate_launch_command(args)[0]


def test_every_config_file_is_listed():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_parses_as_an_accelerate_launch_config(name):
    kind, processes, machines = EXPECTED[name]
    args = _validated(name)
    assert (args.num_processes, args.num_machines, args.mixed_precision) == (processes, machines, "bf16")
    assert bool(args.use_fsdp) == (kind == "fsdp2") and bool(args.use_deepspeed) == kind.startswith("zero")
    if kind == "fsdp2":
        assert str(args.fsdp_version) == "2" and args.fsdp_state_dict_type == "SHARDED_STATE_DICT"
    if kind == "zero3":
        assert int(args.zero_stage) == 3


@pytest.mark.parametrize("name", ["fsdp2_8gpu.yaml", "fsdp2_multinode.yaml"])
def test_fsdp2_settings_reach_accelerates_plugin_and_name_the_qwen3_moe_layer(name):
    """The launcher's environment builds an FSDP2 plugin that shards each Qwen3MoeDecoderLayer, the class the
    Qwen3-MoE model itself declares unsplittable (what shard_policy wraps on CPU)."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    from transformers import Qwen3MoeForCausalLM

    args = _validated(name)
    # Port 0: a free one. On rank 0 accelerate refuses a multi-node launch whose port is taken, and another test's
    # launch may hold 29500 (the file's port) right now; the port plays no part in the plugin's settings.
    args.main_process_port = 0
    env = prepare_multi_gpu_env(args)
    with mock.patch.dict(os.environ, env):
        plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    assert plugin.transformer_cls_names_to_wrap == ["Qwen3MoeDecoderLayer"]
    assert plugin.transformer_cls_names_to_wrap[0] in Qwen3MoeForCausalLM._no_split_modules
