"""`agentgspo quickstart --out DIR`: the main job, `recipes/quickstart.py` (read it top to bottom)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recipe's flags (one per field of its config)."""
    from agentgspo.recipes.quickstart import add_arguments as recipe_arguments

    recipe_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Train; exit status 0 when the final sampled success reaches 0.9."""
    from agentgspo.recipes.quickstart import QuickstartConfig, main

    final = main(QuickstartConfig(**vars(args)))
    return 0 if final["sampled"] >= 0.9 else 1
