"""ruff's lint (pyproject.toml's [tool.ruff]: pycodestyle, pyflakes, docstrings on the public API) passes on the
whole tree, and the tree is as ``ruff format`` writes it; skipped only where ruff is not installed (the test extra
installs it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    beside = Path(sys.executable).with_name("ruff")  # the venv's, whether or not its bin/ is on PATH
    ruff = str(beside) if beside.is_file() else shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    result = subprocess.run(
        [ruff, "check", "--output-format", "concise", str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
