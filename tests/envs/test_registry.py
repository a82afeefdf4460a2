"""Every registered env passes ``check_env``, in process and through ``agentgspo check-env``."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.environments.env_checker import check_env
from agentgspo.environments.registry import registered_ids

EXPECTED_IDS = {
    "agentgspo/Calculator-v0",
    "agentgspo/Math-v0",
    "agentgspo/Search-v0",
    "agentgspo/Code-v0",
    "agentgspo/CodeForces-v0",
}


def test_the_bundled_envs_are_registered():
    assert EXPECTED_IDS <= set(registered_ids())


@pytest.mark.parametrize("env_id", registered_ids())
def test_check_env(env_id):
    env = gym.make(env_id)
    try:
        check_env(env)
    finally:
        env.close()


@pytest.mark.slow
def test_check_env_cli_passes_for_every_bundled_env():
    done = subprocess.run(
        [sys.executable, "-m", "agentgspo.cli", "check-env", *sorted(EXPECTED_IDS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(line.split()[-1] for line in done.stdout.splitlines() if line.startswith("ok ")) == sorted(
        EXPECTED_IDS
    ), done.stdout


def test_every_bundled_env_registers_a_budget_that_fits():
    from agentgspo.environments.registry import EnvBudget, env_budget

    for env_id in EXPECTED_IDS:
        budget = env_budget(env_id)
        assert isinstance(budget, EnvBudget) and budget.max_new_tokens < budget.max_context, env_id
    with pytest.raises(ValueError, match="max_new_tokens"):
        EnvBudget(max_turns=2, max_new_tokens=512, max_context=256)


@pytest.mark.parametrize("env_id", sorted(EXPECTED_IDS))
def test_the_oracle_scores_one_through_rollout_with_default_flags(env_id, tmp_path, capsys):
    """No limit flags: the env's registered budget is enough for every episode of its oracle."""
    from agentgspo.cli import main

    assert (
        main(
            [
                "rollout",
                "--env",
                env_id,
                "--policy",
                "oracle",
                "--episodes",
                "6",
                "--group-size",
                "1",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["success"] == 1.0 and summary["stop_reasons"] == {"completed": 6}, summary
    assert "env budget" in err and "warning" not in err


def test_a_custom_env_registers_its_budget_and_rollout_uses_it(tmp_path, capsys):
    from agentgspo.cli import main
    from agentgspo.environments.registry import EnvBudget, register

    class Echo(agentgspo.ChatEnv):
        oracle = staticmethod(lambda messages: "x" * 30)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return [{"role": "user", "content": "say 30 x"}], {}

        def respond(self, action):
            return [], 1.0, True, False, {}

    register("test/Budgeted-v0", entry_point=Echo, budget=EnvBudget(max_turns=1, max_new_tokens=8, max_context=64))
    assert (
        main(
            [
                "rollout",
                "--env",
                "test/Budgeted-v0",
                "--policy",
                "oracle",
                "--episodes",
                "1",
                "--group-size",
                "1",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["stop_reasons"] == {"max_tokens": 1} and summary["settings"]["max_new_tokens"] == 8
    assert "raise --max-new-tokens" in summary["warnings"][0]


def test_make_names_a_wrong_keyword_and_the_accepted_ones():
    from agentgspo.environments.registry import make

    with pytest.raises(ValueError, match=r"accepts no keyword argument 'topk'\. Did you mean 'top_k'\?.*It accepts: "):
        make("agentgspo/Search-v0", topk=3)


def test_docs_list_each_bundled_envs_budget():
    from pathlib import Path

    from agentgspo.environments.registry import env_budget

    text = (Path(__file__).resolve().parents[2] / "docs" / "envs.md").read_text()
    for env_id in EXPECTED_IDS:
        budget = env_budget(env_id)
        row = f"| `{env_id}` | {budget.max_turns} | {budget.max_new_tokens} | {budget.max_context} |"
        assert row in text, row
