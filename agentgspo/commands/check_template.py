"""`agentgspo check-template TOKENIZER_PATH`: is the chat template prefix-preserving across turns?"""

from __future__ import annotations

import argparse
import json

from agentgspo.core.chat import check_template
from agentgspo.models.tiny import tiny_policy_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `check-template`."""
    parser.add_argument("tokenizer", metavar="TOKENIZER_PATH", help="folder with tokenizer files, or 'tiny'")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Render the scripted conversation turn by turn; exit status 1 if some turn is not a prefix of the next."""
    from pathlib import Path

    from transformers import AutoTokenizer

    path = args.tokenizer
    if path == "tiny":
        path = tiny_policy_path()
    if not Path(path).is_dir():
        # ValueError: cli.main prints it on stderr (stdout is for the result, JSON with --json) and exits 2.
        raise ValueError(f"{args.tokenizer!r} is not a folder; pass a tokenizer saved with save_pretrained")
    result = check_template(AutoTokenizer.from_pretrained(path))
    if args.json:
        print(json.dumps({"prefix_preserving": result.prefix_preserving, "turns": result.turns}))
    else:
        for turn in result.turns:
            status = "ok  " if turn["prefix"] else "FAIL"
            line = f"{status} assistant turn {turn['turn']} is a token prefix of the next rendering"
            if not turn["prefix"]:
                line += (
                    f": differs at token {turn['first_difference']}: sampled {turn['sampled']!r} vs "
                    f"re-rendered {turn['re_rendered']!r}"
                )
            print(line)
        verdict = (
            "prefix-preserving"
            if result.prefix_preserving
            else (
                "NOT prefix-preserving: re-rendering rewrites earlier turns (e.g. drops <think> blocks); train on the "
                "sampled ids (the default, history='as_sampled') or train each turn in the context the template "
                "renders for it (RolloutConfig(history='split_turns'); a recipe's --history split_turns)"
            )
        )
        print(f"template: {verdict}")
    return 0 if result.prefix_preserving else 1
