"""0.2.0 moved the library's root modules into wings (CHANGELOG.md): the old paths still import, as the very new
modules and with a DeprecationWarning naming where they went; nothing of ours imports them anymore."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from agentgspo._moved import MOVED

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_imports_the_new_module_and_warns(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)  # a test before this one may have imported it already
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is new  # one object: patching either patches both


def _source_file(module: str) -> Path:
    """Where ``module`` lives in the checkout: ``agentgspo.sandboxes`` and ``agentgspo.envs`` are the folders
    ``sandboxes/`` and ``envs/`` (pyproject's package-dir)."""
    parts = module.split(".")
    if parts[1] in ("sandboxes", "envs"):
        parts = parts[1:]
    return ROOT / ("/".join(parts) + ".py")


def test_every_wing_module_named_in_the_table_exists_where_the_changelog_says():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for old, new in MOVED.items():
        assert _source_file(new).is_file(), new
        assert f"| `{old}` | `{new}` |" in changelog, old
        assert not _source_file(old).exists(), f"{old} left behind as a file"


def test_nothing_of_ours_imports_an_old_path():
    offenders = []
    for folder in ("agentgspo", "envs", "sandboxes", "recipes", "tests", "benchmarks", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                names = (
                    [node.module]
                    if isinstance(node, ast.ImportFrom) and node.module
                    else [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                offenders += [
                    f"{path.relative_to(ROOT)}: {name}"
                    for name in names
                    if name in MOVED or any(name.startswith(old + ".") for old in MOVED)
                ]
    assert not offenders, offenders
