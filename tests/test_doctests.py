"""Every example in a docstring runs: each module of the library with a ``>>>`` example is doctested here, and a
module that gains one joins without a line of test (it is found by scanning the sources)."""

from __future__ import annotations

import doctest
import importlib

import pytest

from test_layers import ROOT, package_of  # the package mapping of pyproject.toml

MODULES = sorted(
    package_of(path)
    for folder in ("agentgspo", "envs", "sandboxes")
    for path in (ROOT / folder).rglob("*.py")
    if "data" not in path.relative_to(ROOT).parts and ">>>" in path.read_text()
)


def test_the_scan_finds_the_modules_with_examples():
    assert {"agentgspo.objective.advantages", "agentgspo.core.trajectory", "agentgspo.envs.code"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name}: no example ran (a '>>>' outside a docstring?)"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
