"""`agentgspo sandbox-server`: serve the sandbox and judge over HTTP for the remote backend.

    AGENTGSPO_SANDBOX_TOKEN=secret agentgspo sandbox-server --host 0.0.0.0 --port 8910 --backend local
Clients: ``judge(..., backend=get_sandbox("remote", endpoints=["http://HOST:8910"], token="secret"))``.

With ``--compat-apis`` it also serves SandboxFusion's and Piston's APIs under ``/compat/SECRET`` (their clients send
no credentials: the secret in the path is theirs; docs/sandbox_apis.md):
    export AGENTGSPO_COMPAT_SECRET=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
    AGENTGSPO_SANDBOX_TOKEN=secret agentgspo sandbox-server --port 8910 --compat-apis
Clients: ``sandbox_fusion.set_endpoint("http://HOST:8910/compat/SECRET")``;
``PISTON_ENDPOINTS=http://HOST:8910/compat/SECRET/api/v2`` (open-r1).
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys

from agentgspo.cli import port_number
from agentgspo.sandboxes.compat_apis import DEFAULT_MAX_MEMORY_MB, DEFAULT_MAX_TIME_LIMIT_S
from agentgspo.sandboxes.server import create_app


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
    parser.add_argument(
        "--compat-apis",
        action="store_true",
        help="also serve SandboxFusion's (/run_code, /submit, /v1/ping) and Piston's (/api/v2/execute, /runtimes) "
        "APIs under /compat/SECRET, without the bearer token (off by default)",
    )
    parser.add_argument(
        "--compat-secret",
        default=None,
        help="the SECRET of --compat-apis' paths (default $AGENTGSPO_COMPAT_SECRET, else a random one, printed); "
        "at least 16 characters of A-Z a-z 0-9 _ -, not the token",
    )
    parser.add_argument(
        "--max-time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"the longest time limit a --compat-apis request may ask for, CPU or wall clock, run or compile "
        f"(default {DEFAULT_MAX_TIME_LIMIT_S:g}); one above it is refused in the API's own error format",
    )
    parser.add_argument(
        "--max-memory-mb",
        type=float,
        default=None,
        metavar="MB",
        help=f"the largest memory limit a --compat-apis request may ask for (default {DEFAULT_MAX_MEMORY_MB:g}); "
        "one above it is refused, and a request asking for none gets min(1024, this)",
    )


def run(args: argparse.Namespace) -> int:
    """Start the server; returns when it stops."""
    try:
        import uvicorn
    except ImportError as exc:
        print(
            f"agentgspo sandbox-server needs the server extras ({exc}): pip install 'agentgspo[server]'",
            file=sys.stderr,
        )
        return 2
    if not args.token:
        print("agentgspo sandbox-server: a token is required (--token or AGENTGSPO_SANDBOX_TOKEN)", file=sys.stderr)
        return 2
    if args.compat_secret and not args.compat_apis:
        print(
            "agentgspo sandbox-server: --compat-secret needs --compat-apis (the compat APIs are off)", file=sys.stderr
        )
        return 2
    caps = {"--max-time-limit": args.max_time_limit, "--max-memory-mb": args.max_memory_mb}
    given = [flag for flag, value in caps.items() if value is not None]
    if given and not args.compat_apis:
        print(
            f"agentgspo sandbox-server: {' and '.join(given)} caps the compat APIs' requests and needs --compat-apis "
            "(the compat APIs are off; /judge takes the limits its token holder sends)",
            file=sys.stderr,
        )
        return 2
    secret, shown_secret = None, None
    if args.compat_apis:
        secret = args.compat_secret or os.environ.get("AGENTGSPO_COMPAT_SECRET", "")
        shown_secret = "<the --compat-secret>" if args.compat_secret else "$AGENTGSPO_COMPAT_SECRET"
        if not secret:
            secret = shown_secret = secrets.token_urlsafe(24)
    try:
        app = create_app(
            args.token,
            backend=args.backend,
            max_concurrency=args.max_concurrency,
            max_body_mb=args.max_body_mb,
            compat_secret=secret,
            max_time_limit_s=DEFAULT_MAX_TIME_LIMIT_S if args.max_time_limit is None else args.max_time_limit,
            max_memory_mb=DEFAULT_MAX_MEMORY_MB if args.max_memory_mb is None else args.max_memory_mb,
        )
        sock = listen_socket(args.host, args.port)
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
    if secret is not None:
        base = f"http://{shown}:{port}/compat/{shown_secret}"
        print(
            f"agentgspo sandbox-server: SandboxFusion at {base} (sandbox_fusion.set_endpoint), Piston at {base}/api/v2",
            flush=True,
        )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
    return 0


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free one), bound before the line saying where it is."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(2048)
    return sock
