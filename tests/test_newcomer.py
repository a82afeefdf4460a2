"""What a new user meets outside the commands themselves: importing the package from the folder that holds a clone
named ``agentgspo``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """
import gymnasium as gym
import agentgspo
from agentgspo.environments.env_checker import play

env = gym.make("agentgspo/Calculator-v0")
print("reward", play(env, env.unwrapped.oracle, seed=0)[0], agentgspo.ChatEnv.__module__)
"""


def test_a_script_beside_a_clone_named_agentgspo_imports_the_real_package(tmp_path):
    """Run from the clone's parent folder, ``import agentgspo`` finds the clone's root folder first (the script's
    folder leads sys.path); it must still be the package, not an empty namespace package."""
    (tmp_path / "agentgspo").symlink_to(REPO, target_is_directory=True)  # a clone named agentgspo
    (tmp_path / "script.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "reward 1.0 agentgspo.environments.env"
