"""The backend registry: ``get_sandbox(name, **options)`` builds each backend once per options and shares it.

It sits above the backends (they import only ``protocol.py``), so the protocol module knows none of them.
"""

from __future__ import annotations

import threading

from .protocol import Sandbox

__all__ = ["get_sandbox"]

BACKENDS = ("local", "docker", "remote")
_registry: dict[tuple, Sandbox] = {}
_registry_lock = threading.Lock()


def _build(name: str, options: dict) -> Sandbox:
    if name == "local":
        from .local import LocalSandbox

        return LocalSandbox(**options)
    if name == "docker":
        from .docker_backend import DockerSandbox

        return DockerSandbox(**options)
    if name == "remote":
        from .remote import RemoteSandbox

        return RemoteSandbox(**options)
    raise ValueError(f"unknown sandbox backend {name!r}; expected one of 'local', 'docker', 'remote'")


def get_sandbox(name: "str | Sandbox" = "local", **options) -> Sandbox:
    """Return the shared backend ``name`` ("local" | "docker" | "remote") built with ``options``.

    Instances are cached per (name, options), so warm Docker containers and HTTP connection pools are shared by
    all threads. Passing a Sandbox instance returns it unchanged. Raises ``SandboxUnavailable`` with the fix when
    the backend cannot run here, ``ValueError`` for an unknown name.
    """
    if not isinstance(name, str):
        return name
    key = (name, tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _registry_lock:
        if key not in _registry:
            _registry[key] = _build(name, options)
        return _registry[key]
