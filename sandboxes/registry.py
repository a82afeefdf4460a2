"""The backend registry: ``get_sandbox(name, **options)`` builds each backend once per options and shares it.

Backends are named by entry point (``"module:Class"``) and imported when first asked for, as Gymnasium's registry
does: the judge imports the registry, and the local backend uses the judge's compiler, so a registry importing the
backends would close a circle.
"""

from __future__ import annotations

import threading
from importlib.metadata import EntryPoint

from .protocol import Sandbox

__all__ = ["get_sandbox"]

#: name -> the class that implements it, as ``"module:Class"``.
ENTRY_POINTS = {
    "local": "agentgspo.sandboxes.local:LocalSandbox",
    "docker": "agentgspo.sandboxes.docker_backend:DockerSandbox",
    "remote": "agentgspo.sandboxes.remote:RemoteSandbox",
}
BACKENDS = tuple(ENTRY_POINTS)
_registry: dict[tuple, Sandbox] = {}
_registry_lock = threading.Lock()


def _build(name: str, options: dict) -> Sandbox:
    if name not in ENTRY_POINTS:
        raise ValueError(f"unknown sandbox backend {name!r}; expected one of 'local', 'docker', 'remote'")
    return EntryPoint(name, ENTRY_POINTS[name], "agentgspo.sandboxes").load()(**options)


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
