"""`agentgspo search-server`: serve a BM25 index of a corpus over HTTP for `agentgspo/Search-v0`.

    agentgspo search-server --port 8100                       # the built-in knowledge base
    agentgspo search-server --corpus docs.jsonl --host 0.0.0.0 --port 8100

Then make the env with ``retriever="http://HOST:8100"``. The API is in :mod:`agentgspo.envs.search_server`.
"""

from __future__ import annotations

import argparse

from agentgspo.cli import port_number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the command."""
    parser.add_argument("--corpus", default=None,
                        help="JSONL/JSON/Parquet file of documents with id, title, text (default: built-in KB)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8100, help="port (default 8100)")


def run(args: argparse.Namespace) -> int:
    """Build the index and serve until interrupted; returns the exit status."""
    try:
        import uvicorn
    except ImportError as exc:
        raise ImportError(f"the search server needs uvicorn ({exc}): pip install 'agentgspo[server]'") from None

    from agentgspo.envs.datafiles import builtin_path
    from agentgspo.envs.search import BUILTIN_CORPUS
    from agentgspo.envs.search_server import create_app

    corpus = args.corpus or builtin_path(BUILTIN_CORPUS)
    app = create_app(corpus)
    print(f"serving {corpus} on http://{args.host}:{args.port} (POST /search, GET /health)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
