"""A recipe as data: its command, its defaults over :class:`~agentgspo.training.config.TrainConfig`'s, its smoke size,
and what it adds to the loop (an evaluation during training, a success rule), composed, not overridden.

    MATH = Recipe(command="python recipes/gspo_math.py", defaults={"env_id": "agentgspo/Math-v0", "max_turns": 4})
    run_recipe(MATH)                 # the command line: flags over YAML over --smoke over these defaults
    train(MATH.config(steps=3), MATH)  # from Python

The defaults are layered by :func:`agentgspo.core.settings.load_config`; the run records them implicitly: its
``config.json`` holds every value used, and the command that resumes it names only those that differ from the
recipe's defaults.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgspo.core.settings import check_defaults, load_config
from agentgspo.rollouts.rollout import RolloutConfig
from agentgspo.training.config import SMOKE, TrainConfig

__all__ = ["Evaluation", "Recipe"]

#: What evaluates the policy during training, given by a recipe: ``evaluation(config, out, rollout)`` returns the
#: hook called after each step with the step, the sampler, the renderer and ``run=`` (which runs a coroutine on the
#: rollouts' event loop: sample through it, since a backend serves one event loop at a time; the hook returns
#: metrics to log or ``None``), writing under ``out``; ``rollout`` holds the episode limits. ``None`` (or a factory
#: returning ``None``): no evaluation. recipes/gspo_codeforces.py evaluates its held-out problems so.
Evaluation = Callable[[TrainConfig, Path, RolloutConfig], Any]


@dataclass(frozen=True)
class Recipe:
    """One recipe: how it is run and what it changes of the training loop's defaults.

    Args:
        command: the command that runs it, without flags (the resume command starts with it).
        defaults: setting name -> this recipe's default (every other setting keeps ``config_class``'s); an unknown
            name is refused naming the closest setting.
        config_class: :class:`TrainConfig`, or a subclass declaring settings of the recipe's own (the codeforces
            recipe's held-out problems).
        smoke: the settings of ``--smoke`` (a CPU size that runs in a minute), over ``defaults``.
        description: the ``--help`` text.
        evaluation: :data:`Evaluation` during training, or ``None``.
        succeeded: the summary -> whether the run reached the recipe's goal (exit status 0, else 1); ``None``: done
            is success.
    """

    command: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    config_class: type[TrainConfig] = TrainConfig
    smoke: Mapping[str, Any] = field(default_factory=lambda: dict(SMOKE))
    description: str = ""
    evaluation: Evaluation | None = None
    succeeded: Callable[[dict[str, Any]], bool] | None = None

    def __post_init__(self) -> None:
        check_defaults(self.config_class, self.defaults)
        check_defaults(self.config_class, self.smoke)

    def load(self, argv: list[str] | None = None) -> TrainConfig:
        """The config of the command line ``argv`` (the process's by default): flags over ``--config FILE.yaml`` over
        ``--smoke`` over the recipe's defaults (:func:`agentgspo.core.settings.load_config`)."""
        return load_config(
            self.config_class, argv, defaults=self.defaults, smoke=dict(self.smoke), description=self.description
        )

    def config(self, **settings: Any) -> TrainConfig:
        """The recipe's config: its defaults, then ``settings`` (as keyword arguments of ``config_class``)."""
        return self.config_class(**{**copy.deepcopy(dict(self.defaults)), **settings})
