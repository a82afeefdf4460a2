"""The README stays true: its example is the tested file, its test command is CI's, its folder tree lists every
folder, and the docs' file list every file."""

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


def _tracked_files() -> list[str] | None:
    try:
        files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None  # not a git checkout (e.g. an sdist): nothing to compare
    return files.split()


def test_the_file_list_names_every_tracked_file():
    files = _tracked_files()
    if files is None:
        return
    page = (REPO / "docs" / "concepts" / "files.md").read_text().split("```", 1)[1]
    listed = {line.split()[0] for line in page.splitlines() if line.strip() and not line.startswith("```")}
    missing = [f for f in files if f not in listed and not any(f.startswith(d) for d in listed if d.endswith("/"))]
    assert not missing, f"docs/concepts/files.md lacks: {missing}"
    gone = [path for path in listed if not (REPO / path).exists()]
    assert not gone, f"docs/concepts/files.md names what is not there: {gone}"


def test_the_readme_folder_tree_names_every_folder_and_only_folders():
    files = _tracked_files()
    if files is None:
        return
    tree = README.split("<!-- folders:", 1)[1].split("```", 2)[1]
    listed = {line.split()[0] for line in tree.splitlines() if line.strip()}
    folders = {path.split("/")[0] + "/" for path in files if "/" in path}
    folders |= {
        "/".join(path.split("/")[:2]) + "/" for path in files if path.startswith("agentgspo/") and path.count("/") >= 2
    }
    assert folders <= listed, f"README's folder tree lacks: {sorted(folders - listed)}"
    assert listed <= folders, f"README's folder tree names what is no folder of ours: {sorted(listed - folders)}"


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
