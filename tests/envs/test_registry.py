"""Every registered env passes ``check_env``, in process and through ``agentgspo check-env``."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.env_checker import check_env
from agentgspo.registry import registered_ids

EXPECTED_IDS = {"agentgspo/Calculator-v0", "agentgspo/Math-v0", "agentgspo/Search-v0", "agentgspo/Code-v0",
                "agentgspo/CodeForces-v0"}


def test_the_bundled_envs_are_registered():
    assert EXPECTED_IDS <= set(registered_ids())


@pytest.mark.parametrize("env_id", registered_ids())
def test_check_env(env_id):
    env = gym.make(env_id)
    try:
        check_env(env)
    finally:
        env.close()


def test_check_env_cli_passes_for_every_bundled_env():
    done = subprocess.run([sys.executable, "-m", "agentgspo.cli", "check-env", *sorted(EXPECTED_IDS)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(line.split()[-1] for line in done.stdout.splitlines() if line.startswith("ok ")) == \
        sorted(EXPECTED_IDS), done.stdout
