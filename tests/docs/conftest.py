"""The documentation site, built strictly once per test session (about 15 s) for every test of this folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgspo.commands.docs import build_site


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site's folder (the strict build itself is the first check: a warning raises here)."""
    out = tmp_path_factory.mktemp("site")
    built = build_site(out)
    print(f"docs: {built['pages']} pages in {built['seconds']} s")
    return out
