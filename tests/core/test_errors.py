"""One error hierarchy (agentgspo.core.errors): every exception class of ours derives from AgentGSPOError and keeps
its built-in base, so `except AgentGSPOError` catches ours and `except ValueError` code keeps working."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

from agentgspo.core.errors import AgentGSPOError

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("agentgspo", "envs", "sandboxes", "recipes")
#: Exception classes outside the hierarchy, and why (agentgspo/core/errors.py says the rule).
EXEMPT = {
    # runs inside the sandbox beside the solution, which must not import agentgspo
    "envs/code_programs/interactor.py:SolutionGone",
    # private control flow: raised and caught within their own module
    "agentgspo/environments/interop/openenv_client.py:_ServerError",
    "sandboxes/remote.py:_Retry",
    "sandboxes/judge/compile_cache.py:_NotStored",
}
#: Where a base named by attribute (``gym.error.NameNotFound``) is an exception: a name of this form.
EXCEPTION_SUFFIXES = ("Error", "Exception", "NotFound")


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):
        node = node.value
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def exception_classes(sources: list[Path], root: Path = ROOT) -> dict[str, bool]:
    """``"path:Class"`` (path relative to ``root``) -> whether AgentGSPOError is among its ancestors, for every
    exception class defined in ``sources`` (read, not imported: modules whose optional dependency is absent are
    checked too)."""
    bases: dict[str, list[str]] = {}  # class name -> base names; one namespace, as our class names are unique
    where: dict[str, str] = {}
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [_base_name(base) for base in node.bases]
                where[node.name] = f"{path.relative_to(root)}:{node.name}"

    def ancestors(name: str, seen: frozenset = frozenset()) -> set[str]:
        found = {name}
        for base in bases.get(name, []):
            if base not in seen:
                found |= ancestors(base, seen | {name})
        return found

    def is_exception(name: str) -> bool:
        builtin = getattr(builtins, name, None)
        if isinstance(builtin, type) and issubclass(builtin, BaseException):
            return True
        return name not in bases and name.endswith(EXCEPTION_SUFFIXES)

    return {
        where[name]: "AgentGSPOError" in ancestors(name)
        for name in bases
        if name != "AgentGSPOError" and any(is_exception(a) for a in ancestors(name) - {name})
    }


def our_sources() -> list[Path]:
    return [
        path
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "problemset" not in path.parts  # the problem set's solutions are contestants' programs
    ]


def test_every_exception_class_derives_from_the_one_base():
    found = exception_classes(our_sources())
    outside = sorted(name for name, derived in found.items() if not derived)
    assert outside == sorted(EXEMPT), "derive these from agentgspo.core.errors.AgentGSPOError (or list them why)"
    assert len(found) >= 30  # the walk sees the package's classes (about 30 today), not an empty tree


def test_the_walk_finds_a_class_outside_the_hierarchy(tmp_path):
    """The check can fail: a new ValueError subclass, and one derived from a third-party error by attribute."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import gymnasium as gym\n"
        "from agentgspo.core.errors import AgentGSPOError\n"
        "class Ours(ValueError, AgentGSPOError): ...\n"
        "class Child(Ours): ...\n"
        "class Stray(ValueError): ...\n"
        "class StrayByAttribute(gym.error.NameNotFound): ...\n"
        "class NotAnError: ...\n"
    )
    found = exception_classes([probe], root=tmp_path)
    assert found == {
        "probe.py:Ours": True,
        "probe.py:Child": True,
        "probe.py:Stray": False,
        "probe.py:StrayByAttribute": False,
    }


def test_one_except_clause_catches_errors_of_two_wings_and_their_builtin_bases_still_hold(tmp_path):
    import agentgspo
    from agentgspo.fleet.spec import load_spec

    with pytest.raises(AgentGSPOError) as unknown_env:
        agentgspo.make("NoSuchEnv-v0")
    assert isinstance(unknown_env.value, LookupError)  # `except LookupError` code keeps working

    with pytest.raises(AgentGSPOError) as fleet:
        load_spec(tmp_path / "missing.yaml")
    assert isinstance(fleet.value, ValueError)
