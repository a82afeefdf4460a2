"""`agentgspo sandbox-server`: serve the sandbox and judge over HTTP for the remote backend.

    AGENTGSPO_SANDBOX_TOKEN=secret agentgspo sandbox-server --host 0.0.0.0 --port 8910 --backend local
Clients: ``judge(..., backend=get_sandbox("remote", endpoints=["http://HOST:8910"], token="secret"))``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from agentgspo.cli import port_number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `agentgspo sandbox-server`."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8910, help="TCP port (default 8910)")
    parser.add_argument(
        "--token",
        default=os.environ.get("AGENTGSPO_SANDBOX_TOKEN", ""),
        help="bearer token clients must send (default $AGENTGSPO_SANDBOX_TOKEN); required",
    )
    parser.add_argument("--backend", choices=["local", "docker"], default="local", help="sandbox used by the server")
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=max(1, os.cpu_count() or 1),
        help="requests executed at once (default: CPU count)",
    )
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=512.0,
        help="largest request body accepted, in MB (default 512; larger ones get 413)",
    )


def run(args: argparse.Namespace) -> int:
    """Start the server; returns when it stops."""
    try:
        import uvicorn

        from agentgspo.sandboxes.server import create_app
    except ImportError as exc:
        print(
            f"agentgspo sandbox-server needs the server extras ({exc}): pip install 'agentgspo[server]'",
            file=sys.stderr,
        )
        return 2
    if not args.token:
        print("agentgspo sandbox-server: a token is required (--token or AGENTGSPO_SANDBOX_TOKEN)", file=sys.stderr)
        return 2
    try:
        app = create_app(
            args.token, backend=args.backend, max_concurrency=args.max_concurrency, max_body_mb=args.max_body_mb
        )
        sock = _listen(args.host, args.port)
    except (ValueError, OSError, RuntimeError) as exc:  # SandboxUnavailable is a RuntimeError
        print(f"agentgspo sandbox-server: {exc}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"agentgspo sandbox-server: listening on http://{shown}:{port} (backend {args.backend}; clients: "
        f"AGENTGSPO_SANDBOX_URLS=http://{shown}:{port} and the same AGENTGSPO_SANDBOX_TOKEN)",
        flush=True,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free one), bound before the line saying where it is."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(2048)
    return sock
