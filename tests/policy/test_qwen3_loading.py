"""Loading real checkpoints: a hub id resolved from a local Hugging Face cache (offline), a clear error when it is
not cached, the loading settings (dtype, device, attention implementation) and a tokenizer that gives text back."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from agentgspo.policy.hf import HFPolicy
from agentgspo.policy.loading import ROUND_TRIP_PROBE, load_tokenizer, resolve_checkpoint
from agentgspo.policy.loading import model_folder
from qwen3 import build_tiny_qwen3_moe, unpack_tokenizer

REPO_ID = "Qwen/Qwen3-Tiny-Test"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory):
    return build_tiny_qwen3_moe(tmp_path_factory.mktemp("qwen3-moe"))


def put_in_hub_cache(cache, repo_id, folder):
    """Lay ``folder`` out as huggingface_hub's cache does after a download: refs/main -> snapshots/<commit>/."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    shutil.copytree(folder, repo / "snapshots" / COMMIT)
    return repo / "snapshots" / COMMIT


@pytest.mark.slow
def test_a_hub_id_in_the_local_cache_loads_offline_with_the_chosen_settings(qwen3_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    snapshot = put_in_hub_cache(tmp_path / "hub", REPO_ID, qwen3_folder)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve_checkpoint(REPO_ID) == snapshot
    assert model_folder(REPO_ID) == snapshot  # what every command's --policy goes through
    policy = HFPolicy.from_pretrained(REPO_ID, dtype="bfloat16", device="cpu", attn_implementation="eager")
    assert {p.dtype for p in policy.model.parameters()} == {torch.bfloat16}
    assert policy.model.config._attn_implementation == "eager"
    assert policy.renderer.tokenizer.decode(policy.renderer.tokenizer.encode("<|im_end|>")) == "<|im_end|>"


def test_a_hub_id_that_is_not_cached_names_the_download_command_and_the_cache(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        resolve_checkpoint("Qwen/Qwen3-30B-A3B", cache_dir=tmp_path / "empty-cache")
    message = str(error.value)
    assert "huggingface-cli download Qwen/Qwen3-30B-A3B" in message
    assert "HF_HOME" in message and str(tmp_path / "empty-cache") in message


def test_a_local_folder_wins_over_a_hub_id_of_the_same_spelling(qwen3_folder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(qwen3_folder, tmp_path / "Qwen" / "Local")
    assert (
        resolve_checkpoint("Qwen/Local", cache_dir=tmp_path / "empty-cache").resolve()
        == (tmp_path / "Qwen" / "Local").resolve()
    )


@pytest.mark.parametrize(
    "setting, value, expected",
    [
        ("dtype", "float8", "expected one of float32, bfloat16, float16"),
        ("attn_implementation", "flash", "expected one of eager, sdpa"),
    ],
)
def test_bad_loading_settings_are_refused_naming_the_accepted_values(qwen3_folder, setting, value, expected):
    with pytest.raises(ValueError, match=expected):
        HFPolicy.from_pretrained(str(qwen3_folder), **{setting: value})


def test_the_qwen3_tokenizer_round_trips_text_even_when_its_config_names_another_class(tmp_path):
    """transformers 5 re-derives the pre-tokenizer from ``tokenizer_class``; a config naming LlamaTokenizerFast over
    Qwen3's byte-level BPE then loses the spaces. load_tokenizer keeps the file's own pipeline."""
    folder = unpack_tokenizer(tmp_path / "tok")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "LlamaTokenizerFast"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = load_tokenizer(folder)
    text = ROUND_TRIP_PROBE + " 你好, ünïcode <think>\n</think>"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
