"""What the training loop makes of an env's held-out split: which keyword arguments train, which the final
evaluation plays, and which final evaluations are refused because they would replay training tasks.

An env class declares how it holds tasks out with a class attribute ``held_out_by``: ``"split"`` (a ``split=``
keyword of ``"all"``, ``"train"``, ``"test"``; the bundled dataset envs, whose rule is ``agentgspo.envs.splits``),
``"seeds"`` (procedural: evaluation seeds disjoint from the training seeds pose new tasks; Calculator-v0), or
``None`` (a finite task list without a split: a final evaluation of it is refused). A class that declares nothing,
or an env played over a server, is taken as ``"seeds"``, as the loop always assumed. A class with a split names the
keywords that choose its tasks in ``task_keywords``, so that ``final_eval_env_kwargs`` differing only in others (a
sandbox, a timeout) are known to pose the same tasks. (Importing any ``agentgspo`` module registers the bundled
ids, so their classes are found here.)
"""

from __future__ import annotations

from typing import Any

from agentgspo.environments.registry import id_resolver, resolve

__all__ = ["held_out_by", "training_kwargs", "final_eval_kwargs", "check_final_eval"]


def held_out_by(env_id: str) -> str | None:
    """How ``env_id``'s class holds tasks out (its ``held_out_by``): ``"split"`` (a ``split=`` keyword),
    ``"seeds"`` (procedural: disjoint seeds are new tasks), ``None`` (a finite task list without a split). An env
    played over a server, or a class that declares nothing, is ``"seeds"``, as the loop always assumed."""
    return getattr(_env_class(env_id), "held_out_by", "seeds")


def _env_class(env_id: str) -> Any:
    """The class (or function) that makes ``env_id``; ``None`` for a server's env or an unknown id."""
    import gymnasium as gym

    if id_resolver(env_id):
        return None
    bare, _ = resolve(env_id, {})
    if bare not in gym.registry:
        return None  # unknown ids are refused where the env is made, with close matches
    creator = gym.spec(bare).entry_point
    return gym.envs.registration.load_env_creator(creator) if isinstance(creator, str) else creator


def _task_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``kwargs`` that choose the tasks (the class's ``task_keywords``; all but
    ``split`` when it names none), the constructor's defaults filled in, so ``{}`` and ``{"data_files": None}``
    compare equal."""
    import inspect

    creator = _env_class(env_id)
    names = getattr(creator, "task_keywords", None)
    if names is None:
        return {k: v for k, v in kwargs.items() if k != "split"}
    parameters = inspect.signature(creator).parameters
    defaults = {name: parameter.default for name, parameter in parameters.items()}
    chosen = {name: kwargs.get(name, defaults.get(name)) for name in names}
    return {name: tuple(v) if isinstance(v, (list, tuple)) else v for name, v in chosen.items()}  # JSON lists


def training_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The training env's keyword arguments: ``env_kwargs``, with ``split="train"`` for an env with a held-out
    split unless ``env_kwargs`` names one (``"all"``: train on every row, and evaluate elsewhere)."""
    if "split" in env_kwargs or held_out_by(env_id) != "split":
        return dict(env_kwargs)
    return {**env_kwargs, "split": "train"}


def final_eval_kwargs(env_id: str, env_kwargs: dict[str, Any], given: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The final evaluation's env keyword arguments and what holds them out: ``given`` when not empty
    (``"env_kwargs"``), else ``env_kwargs`` with ``split="test"`` for an env with a held-out split (``"split"``),
    else ``env_kwargs`` played on seeds disjoint from training's (``"seeds"``)."""
    if given:
        return dict(given), "env_kwargs"
    if held_out_by(env_id) == "split":
        return {**env_kwargs, "split": "test"}, "split"
    return dict(env_kwargs), "seeds"


def check_final_eval(env_id: str, env_kwargs: dict[str, Any], given: dict[str, Any]) -> None:
    """``ValueError`` naming the setting and the fix when a final evaluation would play tasks the training env
    poses: an env with a finite task list and no held-out split, a training env told ``split`` "all"/"test", or
    ``final_eval_env_kwargs`` that are the training env's data with an overlapping split."""
    how = held_out_by(env_id)
    if how is None and not given:
        raise ValueError(
            f"final_eval_episodes: {env_id} has a finite task list and no held-out split, so a final evaluation "
            "would replay training tasks; pass --final-eval-env-kwargs naming other data, or --final-eval-episodes 0"
        )
    if how != "split":
        return
    train = training_kwargs(env_id, env_kwargs)
    evaluated, _ = final_eval_kwargs(env_id, env_kwargs, given)
    trained_split, eval_split = train.get("split", "all"), evaluated.get("split", "all")
    same_data = _task_kwargs(env_id, train) == _task_kwargs(env_id, evaluated)
    overlap = "all" in (trained_split, eval_split) or trained_split == eval_split
    if same_data and overlap:
        raise ValueError(
            f"final_eval_episodes: the final evaluation would play split {eval_split!r} of {env_id} and training "
            f"plays split {trained_split!r} of the same data, so it would replay training problems; leave 'split' "
            "out of --env-kwargs (training then plays 'train', the final evaluation 'test'), give "
            "--final-eval-env-kwargs with split 'test' or other data, or --final-eval-episodes 0"
        )
