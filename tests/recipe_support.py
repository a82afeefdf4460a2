"""An env recipe (recipes/gspo_NAME.py) imported as a module, shared by the recipe and split tests
(tests/training/test_recipes.py, tests/envs/test_splits.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def recipe_module(name):
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", ROOT / "recipes" / f"gspo_{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
