"""The house's layers, checked: which part of the code may import which (README, "Architecture").

Folders map to packages as pyproject.toml says (``envs/`` is ``agentgspo.envs``, ...). Every ``import`` counts,
those inside functions too: an import moved into a function to hide a cycle still points the wrong way.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

#: The core's wings (agentgspo/<wing>/) and the other wings each may import (README's table).
WINGS: dict[str, set[str]] = {
    "environments": {"fleet.manifest"},  # a remote env follows a fleet's env servers
    "rollouts": {"environments", "policy.base", "learning.routing_replay"},
    "objective": {"rollouts"},
    "learning": {"objective", "rollouts"},
    "policy": {"environments", "rollouts", "learning.routing_replay", "learning.moe", "fleet.manifest"},
    "training": {"environments", "rollouts", "objective", "learning", "policy"},
    "eval": {"environments", "rollouts", "policy"},
    "fleet": set(),  # starts parts by their command lines and probes them over HTTP
}


def package_of(path: Path) -> str:
    """The dotted module name of a source file, through pyproject's package-dir mapping."""
    relative = path.relative_to(ROOT)
    for package, folder in sorted(PACKAGE_DIRS.items(), key=lambda item: -len(item[1])):
        if relative.parts[: len(Path(folder).parts)] == Path(folder).parts:
            rest = relative.parts[len(Path(folder).parts) :]
            return ".".join([package, *rest]).removesuffix(".py").removesuffix(".__init__")
    raise AssertionError(f"{relative} is in no package of pyproject.toml")


def imported(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every agentgspo import in ``path`` (the module ``module``, by default its place in the
    package mapping), relative imports resolved."""
    module = module or package_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            name = ".".join(part for part in (base, node.module or "") if part)
            found.append((node.lineno, name))
    return [(line, name) for line, name in found if name == "agentgspo" or name.startswith("agentgspo.")]


def sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def violations(folder: str, allowed) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sources(folder)
        for line, name in imported(path)
        if not allowed(path, name)
    ]


def within(name: str, prefixes) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def test_the_package_mapping_resolves_every_folder():
    assert package_of(ROOT / "envs" / "codeforces.py") == "agentgspo.envs.codeforces"
    assert package_of(ROOT / "sandboxes" / "__init__.py") == "agentgspo.sandboxes"
    assert package_of(ROOT / "agentgspo" / "learning" / "learner.py") == "agentgspo.learning.learner"


def test_the_core_imports_nothing_of_ours_but_the_core():
    # the bottom level: every other part may import it, so it may import none of them
    assert not violations("agentgspo/core", lambda path, name: within(name, ["agentgspo.core"]))


def test_sandboxes_import_nothing_of_ours_above_them_but_the_fleet_manifest():
    # the remote backend follows a fleet's sandbox servers; the manifest module imports only the core
    allowed = ["agentgspo.core", "agentgspo.sandboxes", "agentgspo.fleet.manifest"]
    assert not violations("sandboxes", lambda path, name: within(name, allowed))


def test_the_fleet_manifest_imports_nothing_of_ours_but_the_core():
    # what environments, sandboxes and the policy may import of the fleet: it must stay a leaf above the core
    manifest = ROOT / "agentgspo" / "fleet" / "manifest.py"
    assert [name for _, name in imported(manifest) if not within(name, ["agentgspo.core"])] == []


def test_envs_import_the_core_and_sandboxes_only():
    assert not violations(
        "envs", lambda path, name: not within(name, ["agentgspo.recipes", "agentgspo.commands", "agentgspo.cli"])
    )


def test_the_core_reaches_envs_only_to_register_them_and_sandboxes_and_recipes_only_from_the_commands():
    registering = {ROOT / "agentgspo" / "__init__.py", ROOT / "agentgspo" / "environments" / "registry.py"}
    commands = ROOT / "agentgspo" / "commands"

    def allowed(path: Path, name: str) -> bool:
        if commands in path.parents or path.name == "cli.py":
            return True
        if within(name, ["agentgspo.envs"]):
            return path in registering
        return not within(name, ["agentgspo.sandboxes", "agentgspo.recipes", "agentgspo.commands"])

    assert not violations("agentgspo", allowed)


def wing_allows(wing: str, name: str) -> bool:
    """Whether a module of ``wing`` may import ``name`` (README's table)."""
    parts = name.split(".")
    if (
        len(parts) < 2
        or parts[1] == wing
        or parts[1] not in set(WINGS) | {"commands", "cli", "envs", "sandboxes", "recipes"}
    ):
        return True  # agentgspo itself, its own wing, or a root module (_moved)
    if parts[1] == "envs":
        return wing == "environments"  # the registry names the bundled envs (checked above)
    return within(".".join(parts[1:]), WINGS[wing])


@pytest.mark.parametrize("wing", sorted(WINGS))
def test_each_wing_imports_only_the_wings_its_row_allows(wing):
    assert not violations(f"agentgspo/{wing}", lambda path, name: wing_allows(wing, name))


def test_a_wrong_import_is_caught(tmp_path):
    """The rule can fail: an objective module importing the learner, inside a function, is reported."""
    probe = tmp_path / "probe.py"
    probe.write_text("import torch\n\n\ndef f():\n    from agentgspo.learning.learner import GSPOLearner\n")
    found = [
        (line, name)
        for line, name in imported(probe, "agentgspo.objective.probe")
        if not wing_allows("objective", name)
    ]
    assert found == [(5, "agentgspo.learning.learner")]
    assert wing_allows("learning", "agentgspo.objective.loss") and not wing_allows(
        "environments", "agentgspo.rollouts.rollout"
    )


FOLDERS = ("agentgspo", "envs", "sandboxes", "recipes")


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (function-level imports included). ``from package import name``
    counts as an import of ``package.name`` where that is a module, else of ``package``."""
    modules = {package_of(path): path for folder in FOLDERS for path in sources(folder)}

    def module_of(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets |= {module_of(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                name = ".".join(part for part in (base, node.module or "") if part)
                targets |= {module_of(f"{name}.{alias.name}" if f"{name}.{alias.name}" in modules else name)
                            for alias in node.names}  # fmt: skip
        graph[module] = {target for target in targets if target and target != module}
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
