"""The README stays true: its example is the tested file, its test command is CI's, its tree lists every file."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_readme_example_is_the_tested_file():
    source = (REPO / "tests" / "readme_example.py").read_text()
    docstring = ast.get_docstring(ast.parse(source))
    code = source.split('"""', 2)[2].strip() if docstring else source.strip()
    assert code in README, "README's custom-environment example differs from tests/readme_example.py"


def test_ci_runs_the_readme_test_command():
    ci_lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if "pytest" in line]
    assert ci_lines and ci_lines[-1].strip() in README


def test_file_tree_lists_every_tracked_file():
    try:
        files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return  # not a git checkout (e.g. an sdist): nothing to compare
    tree = README.split("## Files", 1)[1].split("## Reading order", 1)[0]
    listed = {line.split()[0] for line in tree.splitlines() if line.strip() and not line.startswith("```")}
    missing = [
        f for f in files.split() if f not in listed and not any(f.startswith(d) for d in listed if d.endswith("/"))
    ]
    assert not missing, f"README's file tree lacks: {missing}"


def test_contributing_runs_every_test_file_in_one_wing():
    # docs/contributing.md's wing table: a test file in no row is never run by a wing's command, one in two rows
    # is owned by neither, and a path that no longer exists makes the command fail.
    import re

    table = (REPO / "docs" / "contributing.md").read_text().split("<!-- wing-tests:", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "pytest" in line]
    paths = [path for row in rows for path in re.findall(r"tests/[\w/.]+", row)]
    assert all((REPO / path).exists() for path in paths), [p for p in paths if not (REPO / p).exists()]
    top_level = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tests").glob("test_*.py"))
    folders = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tests").iterdir() if (p / "__init__.py").exists()
                     or any(p.glob("test_*.py")))  # fmt: skip
    counted = {path: paths.count(path) for path in [*top_level, *folders]}
    assert all(n == 1 for n in counted.values()), {path: n for path, n in counted.items() if n != 1}
