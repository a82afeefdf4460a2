"""Serve an ASGI app with uvicorn on a free 127.0.0.1 port for the length of a test."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx


@contextlib.contextmanager
def serve(app: Any, *, health_path: str = "/health") -> Iterator[str]:
    """Run ``app`` in a thread; yield its base URL once ``health_path`` answers 200; stop it afterwards."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(url + health_path).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    else:
        raise RuntimeError(f"the test server on {url} did not become healthy")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def stop_group(process, timeout_s: float = 30.0) -> None:
    """SIGTERM the process group of ``process`` (started with ``start_new_session=True``), SIGKILL it if it outlives
    ``timeout_s``; returns once the process is reaped (nothing when it has exited already)."""
    import os
    import signal
    import subprocess

    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
