"""`agentgspo view`: any trajectories.jsonl (rollout, training) or an eval's results as a self-contained HTML page,
each trajectory's tokens coloured by what the loss trains (mask 1) apart from prompts and tool outputs."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentgspo.eval.viewer import view_page


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `view`."""
    parser.add_argument("path", help="a trajectories.jsonl, an eval's results.jsonl, or a folder holding one")
    parser.add_argument(
        "--tokenizer",
        default="tiny",
        help="tokenizer that produced the ids ('tiny' or a model folder); eval results need none",
    )
    parser.add_argument("--out", default=None, help="HTML file to write (default: beside the input, .html)")


def run(args: argparse.Namespace) -> int:
    """Write the page and print its path."""
    source = Path(args.path)
    page = view_page(source, args.tokenizer)
    out = Path(args.out) if args.out else (source / "view.html" if source.is_dir() else source.with_suffix(".html"))
    out.write_text(page)
    print(out)
    return 0
