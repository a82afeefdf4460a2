"""Old module paths, kept importable for one release (see CHANGELOG.md, 0.2.0).

``import agentgspo.loss`` still works and gives the very module ``agentgspo.objective.loss`` (one object: patching
either patches both), with a ``DeprecationWarning`` naming the new path. A finder on ``sys.meta_path`` does it from
the one table below, so the library's root holds its wings and no shim files.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

#: old module -> where it lives now
MOVED = {
    f"agentgspo.{name}": f"agentgspo.{wing}.{name}"
    for wing, names in {
        "environments": ("env", "env_checker", "tools", "tool_calls", "registry", "wrappers"),
        "rollouts": ("chat", "trajectory", "rollout"),
        "objective": ("advantages", "batching", "logprobs", "loss", "split_turns"),
        "learning": ("learner", "moe", "routing_replay", "sharding", "memory"),
        "training": ("train", "checkpoint", "metrics", "sft", "run_folder"),
        "policy": ("policy_settings", "tiny", "quiet"),
    }.items()
    for name in names
}
MOVED["agentgspo.policy.names"] = "agentgspo.policy.loading"  # what --policy may name joined how it loads
# the problem formats gathered in one package with their registry (issue 20, item 5)
MOVED.update(
    {
        f"agentgspo.sandboxes.judge.{name}": f"agentgspo.sandboxes.judge.formats.{name}"
        for name in (
            "own_format",
            "kattis",
            "kattis_package",
            "kattis_grading",
            "kattis_interactor",
            "polygon",
            "openr1",
        )
    }
)
# the vocabulary every part shares in the lowest level, agentgspo.core; torch model code in agentgspo.models (issue 36)
MOVED.update(
    {
        "agentgspo.rollouts.trajectory": "agentgspo.core.trajectory",
        "agentgspo.rollouts.chat": "agentgspo.core.chat",
        "agentgspo.training.settings": "agentgspo.core.settings",
        "agentgspo.fleet.manifest": "agentgspo.core.fleet_manifest",
        "agentgspo.learning.moe": "agentgspo.models.moe",
        "agentgspo.learning.routing_replay": "agentgspo.models.routing_replay",
        "agentgspo.policy.tiny": "agentgspo.models.tiny",
        "agentgspo.policy.quiet": "agentgspo.models.quiet",
    }
)
# a path moved twice imports its last home
for _old, _new in MOVED.items():
    while _new in MOVED:
        _new = MOVED[_new]
    MOVED[_old] = _new


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as its new module (the same object), warning once per import."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return types.ModuleType(spec.name)  # a placeholder: exec_module puts the real module in its place

    def exec_module(self, module: types.ModuleType) -> None:
        new = MOVED[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new} (agentgspo 0.2.0); import it from there, the old path "
            "goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system returns what sys.modules holds under the old name after exec_module: the real module.
        sys.modules[module.__name__] = importlib.import_module(new)


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())  # before path finders: an old file left on disk loses
