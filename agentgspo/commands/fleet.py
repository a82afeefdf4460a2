"""`agentgspo fleet up|status|down|run|submit FILE`: a supervised fleet of sampler replicas, sandbox servers and env
servers, and one command for a whole run (the fleet and the learner).

    agentgspo fleet up fleet.yaml       # returns once every part passed a probe; prints the manifest's path
    agentgspo fleet status fleet.yaml   # every part: status, URL, restarts, weights, last probe (1 unless all serve)
    agentgspo fleet down fleet.yaml     # stops everything, checks that no process is left
    agentgspo fleet run fleet.yaml -- agentgspo quickstart --backend server --server-url 'fleet:{manifest}' ...
                                        # up, the command (with the manifest), down; exits with the command's status
    agentgspo fleet submit fleet.yaml --address http://HEAD:8265 -- accelerate launch ... RECIPE.py ...
                                        # `fleet run` as a Ray job on the head node; follows its logs

The fleet file, the manifest clients read, the launchers and the one-command run: docs/fleet.md and
``agentgspo.fleet`` (``agentgspo.fleet.job`` for run and submit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from agentgspo.core.fleet_manifest import manifest_path, read_manifest
from agentgspo.fleet.control import fleet_down, fleet_status, fleet_up, prepare
from agentgspo.fleet.job import fleet_run, fleet_submit, missing_command
from agentgspo.fleet.supervisor import Supervisor

ACTIONS = ("up", "status", "down", "run", "submit")
#: Actions that take a command after `--`.
WITH_COMMAND = ("run", "submit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `agentgspo fleet` (the command of run and submit, after `--`, is split off by :func:`parse`)."""
    parser.usage = "agentgspo fleet [options] {%s} FILE [-- COMMAND ARGS...]" % ",".join(ACTIONS)
    parser.epilog = (
        "run and submit take the command to run after `--`; `{manifest}` in its arguments becomes the manifest's "
        "absolute path (also in $AGENTGSPO_FLEET_MANIFEST), e.g. agentgspo fleet run fleet.yaml -- agentgspo "
        "quickstart --backend server --server-url 'fleet:{manifest}'"
    )
    parser.add_argument(
        "action",
        choices=ACTIONS,
        help="start, describe or stop the fleet; run a command with the fleet up (run), or that as a Ray job (submit)",
    )
    parser.add_argument("file", help="the fleet file (YAML: docs/fleet.md)")
    parser.add_argument(
        "--manifest", default=None, help="the manifest's path (default: NAME.manifest.json beside the fleet file)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="up, run, submit: seconds to wait for every part (default 1800); down: for the supervisor (600)",
    )
    parser.add_argument(
        "--foreground",
        action="store_true",
        help="up: run the supervisor in this process until Ctrl-C (a container's or Ray job's main process)",
    )
    parser.add_argument(
        "--stray-grace",
        type=float,
        default=None,
        help="run, submit: seconds processes the command left running get before SIGTERM, and again before SIGKILL "
        "(default 10)",
    )
    parser.add_argument("--json", action="store_true", help="status: print the manifest itself")
    parser.add_argument(
        "--address",
        default=None,
        help="submit: the Ray dashboard (default: $RAY_API_SERVER_ADDRESS, $RAY_ADDRESS if an http URL, else "
        "http://127.0.0.1:8265)",
    )
    parser.add_argument(
        "--working-dir",
        default=None,
        help="submit: a folder Ray uploads and runs the job in (the fleet file must be inside it)",
    )
    parser.add_argument(
        "--no-wait", action="store_true", help="submit: print the job's id and return without following it"
    )
    parser.add_argument(
        "--stop-timeout",
        type=float,
        default=600.0,
        help="submit: seconds Ray lets the job's processes exit after `ray job stop` before killing them",
    )


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``: everything after the first `--` is the command of run and submit (``args.command``)."""
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    else:
        command = None
    args = parser.parse_args(argv)
    args.command = command
    if args.action in WITH_COMMAND and not command:
        parser.error(missing_command(args.action, args.file))
    if args.action not in WITH_COMMAND and command is not None:
        parser.error(f"fleet {args.action} takes no command after `--` (only run and submit do)")
    return args


def run(args: argparse.Namespace) -> int:
    """Run one action; 0 on success (status: every part serving; run: the command's status), 1 otherwise."""
    timeout = 1800.0 if args.timeout is None else args.timeout
    if args.action == "submit":
        return fleet_submit(
            args.file,
            args.command,
            address=args.address,
            working_dir=args.working_dir,
            wait=not args.no_wait,
            manifest=args.manifest,
            timeout_s=args.timeout,
            stop_timeout_s=args.stop_timeout,
            stray_grace_s=args.stray_grace,
        )
    manifest = Path(args.manifest) if args.manifest else manifest_path(args.file)
    if args.action == "run":
        return fleet_run(args.file, args.command, manifest, timeout_s=timeout, stray_grace_s=args.stray_grace)
    if args.action == "up" and args.foreground:
        spec, manifest = prepare(args.file, manifest)
        return asyncio.run(Supervisor(spec, args.file, manifest).run())
    if args.action == "up":
        return fleet_up(args.file, manifest, timeout_s=timeout)
    if args.action == "status":
        if args.json:
            print(json.dumps(read_manifest(manifest).dump(), indent=1))
            return 0
        code, table = fleet_status(manifest)
        print(table)
        return code
    return fleet_down(manifest, timeout_s=min(timeout, 600.0))
