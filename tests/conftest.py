"""Shared fixtures: the tiny policy's folder and renderer, and a tiny model warm-started on oracle demonstrations.

The warm start is the slowest thing in the suite (~10 s on two cores), so it is built once per session.
"""

from __future__ import annotations

import pytest

#: Modules that run as one unit of work on one pytest-xdist worker (pyproject.toml runs the suite with
#: ``-n 2 --dist loadscope``). Every other module is a unit of its own, so its module-scoped fixtures (an engine,
#: servers) start once.
SHARED_UNITS = {
    # vLLM engines and servers (~3 GB and both cores each) and the Ray cluster: one such module at a time, and the
    # fleet's two Ray modules on one cluster (tests/fleet/conftest.py starts it once per worker).
    "vllm-and-ray": (
        "tests/policy/test_policy_server.py",
        "tests/training/test_async_faults.py",
        "tests/policy/test_vllm_engine.py",
        "tests/policy/test_weight_transfer.py",
        "tests/eval/test_vllm_backends.py",
        "tests/fleet/test_ray.py",
        "tests/fleet/test_job.py",
    ),
    # one strict site build per session, laid out through the checkout's own build/docs-src (tests/docs/conftest.py)
    "docs": ("tests/docs/",),
}


def unit_of_work(nodeid: str) -> str:
    """The unit of work of the test ``nodeid``: its shared unit's name, or its module's path."""
    path = nodeid.split("::", 1)[0]
    return next((name for name, prefixes in SHARED_UNITS.items() if path.startswith(prefixes)), path)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without xdist, never called
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` with :func:`unit_of_work` as the scope (xdist's own ``loadgroup`` marks do not reach
    the scheduler under pytest 9, whose node ids are no longer the ``_nodeid`` xdist rewrites)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_work(nodeid)

    return UnitScheduling(config, log)


@pytest.fixture(scope="session")
def tiny_path():
    """Folder of the embedded tiny policy (built on first use, cached across runs)."""
    from agentgspo.models.tiny import tiny_policy_path

    return tiny_policy_path()


@pytest.fixture(scope="session")
def tokenizer(tiny_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_path)


@pytest.fixture(scope="session")
def renderer(tokenizer):
    from agentgspo.core.chat import ChatRenderer

    return ChatRenderer(tokenizer)


# 40 AdamW steps of 32 oracle demonstrations at lr 3e-3 take ~10 s and are enough for the tiny model to write
# <tool_call> blocks on most turns (measured: 7 of 8 sampled episodes called the tool, ~1.0 nats/token left).
WARM_START_STEPS = 40


@pytest.fixture(scope="session")
def warm_model(tiny_path, renderer, tokenizer):
    """The tiny MoE after a brief supervised warm start on Calculator-v0 oracle episodes (eval mode, fp32)."""
    import torch
    from transformers import AutoModelForCausalLM

    from agentgspo.envs.calculator import CalculatorEnv
    from agentgspo.training.sft import play_demonstrations, warm_start

    demos = play_demonstrations(CalculatorEnv, renderer, range(64))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    warm_start(
        model,
        demos,
        pad_token_id=tokenizer.pad_token_id,
        steps=WARM_START_STEPS,
        batch_size=32,
        lr=3e-3,
        lr_schedule="constant",
    )
    return model.eval()
