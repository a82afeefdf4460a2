"""Install modes: the suite runs under the editable install; a built wheel must also ship (and import) every wing
of the library and the `envs/` -> `agentgspo.envs` and `sandboxes/` -> `agentgspo.sandboxes` mappings with their
data files."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mapped_folders() -> dict[str, str]:
    """Repository folder -> the package path it ships as, from pyproject's [tool.setuptools.package-dir]."""
    import tomllib

    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {folder: package.replace(".", "/") for package, folder in table.items()}


def test_top_level_import_does_not_import_torch():
    code = (
        "import sys, gymnasium, agentgspo; gymnasium.make('agentgspo/Calculator-v0');"
        "heavy = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]; assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_editable_install_maps_the_top_level_folders():
    import agentgspo.envs.calculator
    import agentgspo.sandboxes

    assert Path(agentgspo.envs.calculator.__file__).resolve() == ROOT / "envs" / "calculator.py"
    assert Path(agentgspo.sandboxes.__file__).resolve() == ROOT / "sandboxes" / "__init__.py"


def expected_wheel_files() -> set[str]:
    """Every module of every package folder (a folder with __init__.py) and every data file of envs/data."""
    expected = set()
    assert {"agentgspo", "envs", "sandboxes"} <= set(mapped_folders())
    for folder, package in mapped_folders().items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            for module in init.parent.glob("*.py"):
                expected.add(f"{package}/{module.relative_to(ROOT / folder).as_posix()}")
    for data in (ROOT / "envs" / "data").glob("*.json*"):
        expected.add(f"agentgspo/envs/data/{data.name}")
    return expected


@pytest.mark.slow
def test_wheel_ships_the_mapped_packages_and_imports_without_the_source_tree(tmp_path):
    # Build from a copy so the build does not write build/ or egg-info into the shared checkout.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "runs"
        ),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("agentgspo-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "agentgspo/envs/calculator.py",
        "agentgspo/sandboxes/__init__.py",
        "agentgspo/envs/data/__init__.py",
    ):
        assert required in names
    missing = sorted(expected_wheel_files() - names)
    assert not missing, f"not in the wheel (list the package in pyproject's [tool.setuptools] packages): {missing}"

    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import agentgspo, agentgspo.envs.calculator, agentgspo.sandboxes, gymnasium, pathlib;"
        "import agentgspo.environments.env, agentgspo.rollouts.rollout, agentgspo.objective.gspo;"
        "import agentgspo.learning.learner, agentgspo.training.train, agentgspo.models.tiny;"
        "print(pathlib.Path(agentgspo.envs.calculator.__file__).resolve());"
        "env = gymnasium.make('agentgspo/Calculator-v0'); env.reset(seed=0)"
    )
    # Only the wheel's copy and the venv's dependencies are importable: not the editable install of ROOT.
    deps = [p for p in site.getsitepackages()]
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *deps])},
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == (target / "agentgspo" / "envs" / "calculator.py").resolve()
