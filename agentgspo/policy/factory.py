"""Policy backends by name: what ``--backend`` may say in every command and recipe, and how each is built.

A backend is one module holding a class that implements :class:`~agentgspo.core.sampling.PolicyBackend` plus
the class members of :class:`~agentgspo.core.sampling.PolicyBackendClass`, and one line in :data:`BACKENDS` (or a
:func:`register_backend` call):

- ``summary``: a few words for ``--help``;
- ``samples_with_learner_module``: synchronous training samples with the learner's own module (the HF backend);
- ``add_arguments(group)``: its own command-line options (an ``argparse`` argument group);
- ``options(args)``: its keyword options from those parsed options;
- ``run_options(seed=..., server_urls=..., weight_transfer=...)``: its keyword options in a training run;
- ``from_pretrained(policy, **options)``: the backend for a checkpoint (``"tiny"``, a folder, a cached hub id).

Each module checks its own requirements (the vLLM backends name the extra to install). Nothing here imports a
backend before it is asked for.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
from typing import Any

from agentgspo.core.sampling import PolicyBackend, PolicyBackendClass

__all__ = [
    "register_backend",
    "backend_class",
    "add_backend_arguments",
    "backend_options",
    "run_options",
    "make_backend",
    "close_backend",
]

#: name -> "module:class" of every backend; the first is the default.
BACKENDS: dict[str, str] = {
    "hf": "agentgspo.policy.hf:HFPolicy",
    "vllm": "agentgspo.policy.vllm:VLLMPolicy",
    "server": "agentgspo.policy.server:ServerPolicy",
}


def register_backend(name: str, target: str) -> None:
    """Make ``--backend NAME`` build ``target`` (``"module:Class"``, imported when first used)."""
    if ":" not in target:
        raise ValueError(f"backend {name!r}: expected 'module:Class', got {target!r}")
    BACKENDS[name] = target


def backend_class(name: str) -> PolicyBackendClass:
    """The class registered as ``name``; a ValueError naming the backends (and a close one) otherwise."""
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, list(BACKENDS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"backend {name!r}{hint}: expected one of {', '.join(BACKENDS)}")
    module, _, attribute = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--backend`` and every registered backend's own options to ``parser``."""
    group = parser.add_argument_group("policy backend")
    classes = {name: backend_class(name) for name in BACKENDS}
    group.add_argument(
        "--backend",
        choices=list(BACKENDS),
        default=next(iter(BACKENDS)),
        help="who samples: " + ", ".join(f"{name} ({cls.summary})" for name, cls in classes.items()),
    )
    for cls in classes.values():
        cls.add_arguments(group)


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword options of :func:`make_backend` for the backend ``args.backend`` names, from its options."""
    return backend_class(args.backend).options(args)


def run_options(backend: str, *, seed: int, server_urls: list[str], weight_transfer: str = "auto") -> dict[str, Any]:
    """The keyword options of :func:`make_backend` for ``backend`` in a training run (``weight_transfer``: how the
    learner's updates reach it, for the backends that load them from elsewhere)."""
    return backend_class(backend).run_options(seed=seed, server_urls=server_urls, weight_transfer=weight_transfer)


def make_backend(policy: str, backend: str = "hf", **options: Any) -> Any:
    """Build backend ``backend`` for the checkpoint ``policy`` (``"tiny"``, a ``save_pretrained`` folder or a cached
    hub id); ``options`` go to its ``from_pretrained``. The result has ``.renderer`` and ``.version``."""
    return backend_class(backend).from_pretrained(policy, **options)


def close_backend(policy: PolicyBackend) -> None:
    """Shut down what ``policy`` started: the ``vllm`` backend's engine processes (about 2 GB each, alive until the
    Python process exits otherwise), the server backend's transfer group. The commands that make a backend close it
    when done, so one called in-process (a notebook, a test) leaves nothing running."""
    policy.close()
