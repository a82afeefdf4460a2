"""`agentgspo fleet up|status|down FILE`: a supervised fleet of sampler replicas, sandbox servers and env servers.

    agentgspo fleet up fleet.yaml       # returns once every part passed a probe; prints the manifest's path
    agentgspo fleet status fleet.yaml   # every part: status, URL, restarts, weights, last probe (1 unless all serve)
    agentgspo fleet down fleet.yaml     # stops everything, checks that no process is left

The fleet file, the manifest clients read and the launchers: docs/fleet.md and ``agentgspo.fleet``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `agentgspo fleet`."""
    parser.add_argument("action", choices=("up", "status", "down"), help="start, describe or stop the fleet")
    parser.add_argument("file", help="the fleet file (YAML: docs/fleet.md)")
    parser.add_argument(
        "--manifest", default=None, help="the manifest's path (default: NAME.manifest.json beside the fleet file)"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="up: seconds to wait for every part; down: for the supervisor"
    )
    parser.add_argument(
        "--foreground",
        action="store_true",
        help="up: run the supervisor in this process until Ctrl-C (a container's or Ray job's main process)",
    )
    parser.add_argument("--json", action="store_true", help="status: print the manifest itself")


def run(args: argparse.Namespace) -> int:
    """Run one action; 0 on success (status: every part serving), 1 otherwise."""
    from agentgspo.fleet.control import fleet_down, fleet_status, fleet_up
    from agentgspo.fleet.manifest import manifest_path, read_manifest

    manifest = Path(args.manifest) if args.manifest else manifest_path(args.file)
    if args.action == "up" and args.foreground:
        from agentgspo.fleet.control import prepare
        from agentgspo.fleet.supervisor import Supervisor

        spec, manifest = prepare(args.file, manifest)
        return asyncio.run(Supervisor(spec, args.file, manifest).run())
    if args.action == "up":
        return fleet_up(args.file, manifest, timeout_s=args.timeout)
    if args.action == "status":
        if args.json:
            print(json.dumps(read_manifest(manifest).dump(), indent=1))
            return 0
        code, table = fleet_status(manifest)
        print(table)
        return code
    return fleet_down(manifest, timeout_s=min(args.timeout, 600.0))
