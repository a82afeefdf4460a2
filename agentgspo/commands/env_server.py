"""`agentgspo env-server`: serve a registered env over OpenEnv's protocol, for remote runners and other trainers.

    agentgspo env-server --env agentgspo/CodeForces-v0 --port 8000 --max-concurrent-envs 256

Clients: ``agentgspo rollout --env http://HOST:8000`` (and ``--env-id http://HOST:8000`` in the recipes), or
OpenEnv's own ``GenericEnvClient(base_url="http://HOST:8000")`` with ``{"message": TEXT}`` actions. One env per
WebSocket session (OpenEnv's rule); a connection beyond ``--max-concurrent-envs`` is refused with OpenEnv's
``CAPACITY_REACHED`` (our client retries it). ``GET /health`` answers while it serves; on SIGINT/SIGTERM uvicorn
shuts down gracefully (every session's env closed), then exits by the signal, as uvicorn does. Needs the
``openenv`` extra (its own venv beside vLLM: docs/envs.md).
"""

from __future__ import annotations

import argparse
import json
import sys

from agentgspo.cli import port_number
from agentgspo.commands.sandbox_server import listen_socket


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `agentgspo env-server`."""
    parser.add_argument("--env", required=True, help="registered env id, e.g. agentgspo/Calculator-v0")
    parser.add_argument("--env-kwargs", default="{}", help="JSON keyword arguments of the env (every session's)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8000, help="TCP port (default 8000; 0: any free one)")
    parser.add_argument(
        "--max-concurrent-envs",
        type=int,
        default=256,
        help="episodes (WebSocket sessions, one env each) served at once; more are refused until one ends "
        "(default 256)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; returns 0 then, 2 for bad input or a missing extra."""
    try:
        import uvicorn

        from agentgspo.environments.interop.openenv_server import create_env_app
    except ImportError as exc:
        print(
            f"agentgspo env-server needs the openenv extra ({exc}): pip install 'agentgspo[openenv]' "
            "(in a venv without vLLM or verifiers 0.4: docs/envs.md, 'Other ecosystems')",
            file=sys.stderr,
        )
        return 2
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as exc:
        print(
            f"agentgspo env-server: --env-kwargs is not JSON ({exc}): pass an object like '{{\"k\": 1}}'",
            file=sys.stderr,
        )
        return 2
    if not isinstance(env_kwargs, dict) or args.max_concurrent_envs < 1:
        print(
            "agentgspo env-server: --env-kwargs must be a JSON object and --max-concurrent-envs >= 1",
            file=sys.stderr,
        )
        return 2
    app = create_env_app(args.env, env_kwargs, max_concurrent_envs=args.max_concurrent_envs)
    try:
        sock = listen_socket(args.host, args.port)
    except OSError as exc:
        print(f"agentgspo env-server: cannot listen on {args.host}:{args.port} ({exc})", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"agentgspo env-server: {args.env} on http://{shown}:{port} (OpenEnv WebSocket at /ws, at most "
        f"{args.max_concurrent_envs} episodes at once; clients: agentgspo rollout --env http://{shown}:{port})",
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", ws_max_size=64 * 2**20, timeout_graceful_shutdown=10)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
