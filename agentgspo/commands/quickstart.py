"""`agentgspo quickstart --out DIR`: the main job, `recipes/quickstart.py` (read it top to bottom)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recipe's flags (one per field of its config, each with its help text)."""
    from agentgspo.recipes.quickstart import add_arguments as recipe_arguments

    recipe_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Train; exit status 0 when the final sampled success reaches 0.9, 1 below, 128 + the signal's number (130
    for Ctrl-C, 143 for SIGTERM) when interrupted after saving a checkpoint."""
    from agentgspo.recipes.quickstart import QuickstartConfig, main
    from agentgspo.training.run_folder import RunInterrupted

    try:
        final = main(QuickstartConfig(**vars(args)))
    except RunInterrupted as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_status
    return 0 if final["sampled"] >= 0.9 else 1
