"""Where agentgspo keeps what it builds once per machine: one root for every cache.

Compiled headers and binaries, checkers, Kattis validators, time-limit calibrations, materialised problem sets and
the tiny policy all live under :func:`cache_root`, each in its own folder.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """``$AGENTGSPO_CACHE``, else ``$XDG_CACHE_HOME/agentgspo``, else ``~/.cache/agentgspo`` (an empty variable
    counts as unset)."""
    base = os.environ.get("AGENTGSPO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "agentgspo"
    )
    return Path(base)
