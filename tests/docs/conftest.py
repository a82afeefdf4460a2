"""The documentation site, built strictly once per test session (about 15 s) for every test of this folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentgspo.commands.docs import REPO, build_site


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site's folder (the strict build itself is the first check: a warning raises here)."""
    out = tmp_path_factory.mktemp("site")
    # As on a fresh clone: the package tree griffe reads (build/docs-src) does not exist before the build lays it out
    # (a build that relied on an earlier one's tree failed on the first run of a clean checkout).
    shutil.rmtree(REPO / "build" / "docs-src", ignore_errors=True)
    built = build_site(out)
    print(f"docs: {built['pages']} pages in {built['seconds']} s")
    return out
