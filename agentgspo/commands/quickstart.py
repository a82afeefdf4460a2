"""`agentgspo quickstart --out DIR`: the main job, `recipes/quickstart.py` (read it top to bottom)."""

from __future__ import annotations

import argparse

from agentgspo.core.settings import add_settings, config_from_args
from agentgspo.recipes.quickstart import QUICKSTART
from agentgspo.training.train import run_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recipe's settings: ``--smoke``, ``--config FILE.yaml`` and one flag per setting, each with its help."""
    add_settings(parser, QUICKSTART.config_class, QUICKSTART.defaults)


def run(args: argparse.Namespace) -> int:
    """Train; exit status 0 when the final sampled success reaches 0.9, 1 below, 128 + the signal's number (130
    for Ctrl-C, 143 for SIGTERM) when interrupted after saving a checkpoint, 2 for bad input."""
    config = config_from_args(
        QUICKSTART.config_class, vars(args), defaults=QUICKSTART.defaults, smoke=dict(QUICKSTART.smoke)
    )
    return run_config(config, QUICKSTART)
