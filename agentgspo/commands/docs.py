"""`agentgspo docs [--serve]`: build the documentation site from ``docs/`` and the docstrings, strictly, and serve it.

The site's sources live in the repository (``mkdocs.yml``, ``docs/``, ``scripts/docs_hooks.py``), not in the
installed package, so this command runs from a clone installed with ``pip install -e ".[docs]"``. Every warning
fails the build (a broken link or anchor, an unresolved cross-reference, a docstring that names a parameter the
signature lacks). ``--serve`` then serves the built folder on 127.0.0.1 with Python's own HTTP server until Ctrl-C;
``mkdocs serve`` rebuilds on every save while writing. docs/contributing-docs.md has the rest.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import logging
import os
import sys
import time
from pathlib import Path

from agentgspo.core.errors import AgentGSPOError
from agentgspo.cli import port_number

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = 'pip install "torch==2.13.0" -e ".[docs]" (on a GPU machine: pip install -e ".[docs]")'


class DocsBuildFailed(RuntimeError, AgentGSPOError):
    """The strict build stopped: the warnings printed before it say which page and what."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's flags."""
    parser.add_argument("--out", default=str(REPO / "site"), help="folder to build into (default: site/ of the clone)")
    parser.add_argument("--serve", action="store_true", help="after building, serve the site on 127.0.0.1 until Ctrl-C")
    parser.add_argument("--port", type=port_number, default=8000, help="port for --serve (default 8000; 0: any free)")


def config_file(repo: Path = REPO) -> Path:
    """The site's ``mkdocs.yml``; a clear error when this install has none (a wheel ships no docs)."""
    path = repo / "mkdocs.yml"
    if not path.is_file():
        raise FileNotFoundError(
            f"agentgspo docs builds from a clone of the repository: no mkdocs.yml at {repo} (an installed wheel "
            f"ships no docs); clone it, then {INSTALL_HINT}"
        )
    return path


def build_site(out: str | Path, *, repo: Path = REPO) -> dict[str, float]:
    """Build the site strictly into ``out``; returns ``{"pages": N, "seconds": S}``. Raises ``ImportError`` naming
    the install command without the ``docs`` extra, ``DocsBuildFailed`` when a warning stopped the build (the
    warnings go to stderr as they happen)."""
    config_path = config_file(repo)
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material's notice about MkDocs 2 (pinned below 2)
    try:
        from mkdocs.commands.build import build
        from mkdocs.config import load_config
        from mkdocs.exceptions import Abort, BuildError, ConfigurationError
    except ImportError as exc:
        raise ImportError(f"agentgspo docs needs the docs extra ({exc.name} is missing): {INSTALL_HINT}") from exc
    logger = logging.getLogger("mkdocs")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s - %(message)s"))
    handler.setLevel(logging.WARNING)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    started = time.perf_counter()
    cwd = Path.cwd()
    try:
        os.chdir(repo)  # the hooks and snippets resolve paths from the repository root
        config = load_config(str(config_path), site_dir=str(Path(cwd, out).resolve()), strict=True)
        build(config)
    except (Abort, BuildError, ConfigurationError) as exc:
        raise DocsBuildFailed(f"the docs build failed in strict mode: {exc}") from exc
    finally:
        os.chdir(cwd)
        logger.removeHandler(handler)
    pages = sum(1 for _ in Path(config.site_dir).rglob("*.html"))
    return {"pages": pages, "seconds": round(time.perf_counter() - started, 2)}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 -- the base class's name
        pass


def site_server(directory: str | Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """An HTTP server for the built site on 127.0.0.1 (``port`` 0: any free one), not started yet: call
    ``serve_forever()`` (and ``shutdown()`` from another thread)."""
    directory = Path(directory)
    if not (directory / "index.html").is_file():
        raise FileNotFoundError(f"no built site in {directory} (no index.html): run `agentgspo docs` first")
    handler = functools.partial(_QuietHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def run(args: argparse.Namespace) -> int:
    """Build (and with ``--serve`` serve) the site; 0 when built, 1 when the strict build failed."""
    try:
        built = build_site(args.out)
    except DocsBuildFailed as exc:
        print(f"agentgspo docs: {exc}", file=sys.stderr)
        return 1
    print(f"built {built['pages']} pages into {args.out} in {built['seconds']:.1f} s")
    if args.serve:
        server = site_server(args.out, args.port)
        print(f"serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0
