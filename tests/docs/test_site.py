"""The site is complete: every page of the nav built, every public module's API page documents its __all__, the
package's version is the changelog's, and the sources stay offline (no web fonts, no scripts from elsewhere)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

import agentgspo

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import docs_hooks  # noqa: E402 -- scripts/ is not a package


def _defined_kinds(path: Path) -> dict[str, str]:
    """Top-level functions and classes of a module: name -> 'function' | 'class'."""
    kinds = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kinds[node.name] = "function"
        elif isinstance(node, ast.ClassDef):
            kinds[node.name] = "class"
    return kinds


def test_the_generator_finds_the_mapped_packages(site):
    modules = docs_hooks.public_modules()
    assert "agentgspo.envs.calculator" in modules and "agentgspo.sandboxes.judge.core" in modules
    assert modules["agentgspo.envs.calculator"][0] == REPO / "envs" / "calculator.py"
    page = (site / "api" / "agentgspo.envs.calculator" / "index.html").read_text()
    assert 'id="agentgspo.envs.calculator.CalculatorEnv"' in page


@pytest.mark.slow
def test_every_public_module_page_lists_its_functions_with_their_docstrings(site):
    modules = docs_hooks.public_modules()
    homes = docs_hooks.canonical_homes(modules)
    missing = []
    checked = 0
    for name, (path, names, _summary) in modules.items():
        page = (site / "api" / name / "index.html").read_text()
        kinds = _defined_kinds(path)
        for member in names:
            home = homes[name].get(member, name)
            if home != name:  # re-exported: a link to the page that documents it
                target = f"../{home}/#{home}.{member}"
                if f'href="{target}"' not in page:
                    missing.append(f"{name}: no link to {target}")
                continue
            if member not in kinds:
                continue  # constants and re-exports from internal modules: documented when they have a docstring
            anchor = re.search(
                rf'id="{re.escape(name)}\.{member}".*?<div class="doc doc-contents[^"]*">(.*?)</div>', page, re.S
            )
            if anchor is None or not re.sub(r"<[^>]+>", "", anchor.group(1)).strip():
                missing.append(f"{name}.{member}: no heading with a docstring")
            checked += 1
    assert checked > 300 and not missing, missing


def test_every_nav_page_is_built(site):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))
    for expected in (
        "index.html",
        "getting-started/index.html",
        "tutorials/custom-env/index.html",
        "concepts/gspo/index.html",
        "changelog/index.html",
        "api/index.html",
    ):
        assert expected in pages
    assert len(pages) > 100


def test_math_is_mathml_and_nothing_is_fetched_from_elsewhere(site):
    gspo = (site / "concepts" / "gspo" / "index.html").read_text()
    assert gspo.count("<math") >= 10 and "arithmatex" not in gspo
    for page in site.rglob("*.html"):
        text = page.read_text()
        external = re.findall(r'<(?:script|link|img|iframe)[^>]+(?:src|href)="(?:https?:)?//[^"]+"', text)
        assert not external, f"{page.relative_to(site)} loads {external}"
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text


def test_the_package_reports_the_changelog_version():
    assert importlib.metadata.version("agentgspo") == agentgspo.__version__, (
        "pyproject.toml reads the version from agentgspo.__version__: reinstall (pip install -e .) after changing it"
    )
    first_release = re.search(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.M).group(1)
    assert first_release == agentgspo.__version__


def test_docstring_markup_becomes_markdown():
    table = "Stats:\n\n  ====  =====\n  ``a``  first\n        more\n  ``b``  second\n  ====  =====\n"
    assert docs_hooks._rst_tables_to_markdown(table).splitlines()[2:] == [
        "  |  |  |",
        "  | --- | --- |",
        "  | ``a`` | first more |",
        "  | ``b`` | second |",
    ]
    grouped = "Args:\n    x, y: both tensors\n        of one shape.\n    z: one."
    assert docs_hooks._split_grouped_args(grouped).splitlines() == [
        "Args:",
        "    x: both tensors",
        "        of one shape.",
        "    y: both tensors",
        "        of one shape.",
        "    z: one.",
    ]
    plain = "Launch:\n    python run.py\nDeviations:\n- one\n- two"
    assert docs_hooks._plain_text_blocks(plain) == "Launch:\n\n    python run.py\n\nDeviations:\n\n- one\n- two"
    assert docs_hooks._plain_text_blocks("Args:\n    x: a.") == "Args:\n    x: a."  # a section stays a section
    role = docs_hooks._roles_to_markdown(":func:`~agentgspo.objective.gspo.gspo`")
    assert role == '<autoref identifier="agentgspo.objective.gspo.gspo" optional><code>gspo</code></autoref>'
    assert docs_hooks._doctests_to_fences(">>> 1 + 1\n2\n\nafter") == "```pycon\n>>> 1 + 1\n2\n```\n\nafter"


def test_the_docs_command_needs_a_clone(tmp_path):
    from agentgspo.commands.docs import config_file

    with pytest.raises(FileNotFoundError, match=r"builds from a clone.*pip install"):
        config_file(tmp_path)
