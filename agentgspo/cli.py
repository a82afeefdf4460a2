"""The `agentgspo` console command.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int`` (and, when its
command line is more than argparse parses, ``parse(parser, argv) -> Namespace``: `fleet run FILE -- COMMAND`; such a
command is named in :data:`OWN_PARSERS`).
Only the chosen subcommand's module is imported, so `agentgspo judge --help` does not import torch.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys

from agentgspo import __version__

# name -> (module, one-line help). Modules are imported lazily.
COMMANDS: dict[str, tuple[str, str]] = {
    "check-env": ("agentgspo.commands.check_env", "run the Gymnasium contract checks on a registered env"),
    "check-template": ("agentgspo.commands.check_template", "check that a chat template is prefix-preserving"),
    "rollout": ("agentgspo.commands.rollout", "play episodes with a policy and write trajectories.jsonl"),
    "quickstart": ("agentgspo.commands.quickstart", "train the tiny MoE policy on Calculator-v0 on CPU"),
    "judge": ("agentgspo.commands.judge", "judge a solution on a problem package (Kattis, own, Polygon) or tests"),
    "validate-problems": (
        "agentgspo.commands.validate_problems",
        "check a problem set: references AC, wrong solutions rejected, generators deterministic",
    ),
    "sandbox-server": ("agentgspo.commands.sandbox_server", "serve the sandbox over HTTP for remote execution"),
    "env-server": ("agentgspo.commands.env_server", "serve a registered env over OpenEnv's protocol (remote envs)"),
    "search-server": ("agentgspo.commands.search_server", "serve a BM25 retriever over HTTP for Search-v0"),
    "eval": ("agentgspo.commands.eval", "evaluate an agent on CodeForces-style problems: pass@k, rating, report"),
    "serve-policy": ("agentgspo.commands.serve_policy", "serve a policy checkpoint with vLLM's OpenAI server"),
    "fleet": (
        "agentgspo.commands.fleet",
        "start, describe or stop a fleet of samplers, sandboxes and env servers; run a command (or a Ray job) with it",
    ),
    "estimate-memory": (
        "agentgspo.commands.estimate_memory",
        "estimate a training run's memory per GPU from a model config (no weights loaded)",
    ),
    "docs": ("agentgspo.commands.docs", "build the documentation site strictly into site/; --serve serves it locally"),
    "view": ("agentgspo.commands.view", "render trajectories.jsonl or an eval's results as a self-contained HTML page"),
}

#: Subcommands whose module parses its own command line with ``parse(parser, argv) -> Namespace`` (what follows
#: `fleet run FILE --` is the command to run, not options); every other one is ``parser.parse_args(argv)``.
OWN_PARSERS: frozenset[str] = frozenset({"fleet"})


def port_number(text: str) -> int:
    """argparse ``type`` of ``--port``: an int in [0, 65535] (0: any free port), else a usage error."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port in [0, 65535], got {text!r}")
    return port


def _top_level_help() -> str:
    lines = ["usage: agentgspo COMMAND [options]", "", "commands:"]
    width = max(map(len, COMMANDS))
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run `agentgspo COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agentgspo` command; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_top_level_help())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        print(__version__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        print(f"agentgspo: unknown command {name!r}.{hint}\n\n{_top_level_help()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"agentgspo {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = module.parse(parser, rest) if name in OWN_PARSERS else parser.parse_args(rest)
    try:
        return int(module.run(args) or 0)
    except (ValueError, LookupError, FileNotFoundError, NotADirectoryError, ImportError) as exc:
        # Bad input or a missing optional dependency: one clear line, no traceback (the message names the input or
        # the package, and the fix: our ImportErrors name the pip extra).
        print(f"agentgspo {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a second Ctrl-C: one line, not a traceback
        print(f"agentgspo {name}: interrupted{f': {exc}' if str(exc) else ''}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
