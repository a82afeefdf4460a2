"""`agentgspo search-server`: serve a BM25 index of a corpus over HTTP for `agentgspo/Search-v0`.

    agentgspo search-server --port 8100                       # the built-in knowledge base
    agentgspo search-server --corpus docs.jsonl --host 0.0.0.0 --port 8100

Then make the env with ``retriever="http://HOST:8100"``. The API is in :mod:`agentgspo.envs.search_server`.
"""

from __future__ import annotations

import argparse

from agentgspo.cli import port_number
from agentgspo.envs.datafiles import builtin_path
from agentgspo.envs.search import BUILTIN_CORPUS
from agentgspo.envs.search_server import create_app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the command."""
    parser.add_argument(
        "--corpus",
        default=None,
        help="JSONL/JSON/Parquet file of documents with id, title, text (default: built-in KB)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8100, help="port (default 8100)")


def run(args: argparse.Namespace) -> int:
    """Build the index and serve until interrupted; returns the exit status."""
    try:
        import uvicorn
    except ImportError as exc:
        raise ImportError(f"the search server needs uvicorn ({exc}): pip install 'agentgspo[server]'") from None

    import socket

    corpus = args.corpus or builtin_path(BUILTIN_CORPUS)
    app = create_app(corpus)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        raise ValueError(
            f"--host {args.host} --port {args.port}: cannot listen there ({exc.strerror}); pick "
            "another port (0: any free one)"
        ) from None
    sock.listen(2048)  # from here connections wait in the backlog until the server accepts them
    port = sock.getsockname()[1]  # the real one when --port 0
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(
        f"listening on http://{host}:{port} serving {corpus} (POST /search, GET /health); make the env with "
        f'retriever="http://{host}:{port}"',
        flush=True,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
    return 0
