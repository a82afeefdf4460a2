"""Evaluate during training: every ``every`` steps, the policy being trained plays a held-out subset of problems
and the hook returns metrics to log (``eval/pass@1``, ``eval/judge_error_rate``, ``eval/rating``).

A recipe builds one :class:`EvalHook` and calls it after each step with its sampling backend (which carries the
current weights)::

    hook = EvalHook(out / "eval", problems="builtin", held_out=["021-warm-ovens", ...], every=50)
    ...
    metrics.update(hook(step, policy) or {})

Under asynchronous training the backend belongs to the rollout producer's event loop: pass ``run=producer.run``
(``hook(step, policy, run=producer.run)``) so the evaluation samples there; a second loop is refused while the
producer's has turns in flight (:class:`~agentgspo.policy.base.EventLoopConflict`).

Each evaluation writes ``out/step_NNNNNN/results.jsonl`` (resumable like any eval, so a training run resumed from
a checkpoint does not redo a finished evaluation) and ``summary.json``. Problems the policy trains on must not be
in ``held_out``: pass the training env's problems elsewhere (a different ``data_files`` or ``--only`` subset).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from agentgspo.eval import EVAL_TIME_LIMITS
from agentgspo.eval.runner import evaluate, load_tasks, select_indices
from agentgspo.eval.store import ResultsStore
from agentgspo.rollouts.rollout import RolloutConfig

__all__ = ["EvalHook"]


class EvalHook:
    """Periodic held-out evaluation (see the module docstring).

    Args:
        out: folder of the evaluations (one subfolder per step).
        problems: ``data_files`` of CodeForces-v0 (``"builtin"``, ``None`` for the starter problems, or a path).
        held_out: problem ids (or indices) to evaluate; ``None``: all of the source's problems.
        every: evaluate when ``step % every == 0`` (and ``step > 0``).
        samples, ks: attempts per problem and the k of pass@k.
        config: the attempts' limits (turns, context, sampling, time); ``group_size`` is ignored. ``None``: the
            defaults with an eval's time limits (``EVAL_TIME_LIMITS``, those of ``agentgspo eval``).
        env_kwargs: more keyword arguments of the env (e.g. ``max_submissions``).
        concurrency, seed: as in ``agentgspo eval``.
    """

    def __init__(
        self,
        out: str | Path,
        *,
        problems: str | None = "builtin",
        held_out: Sequence[str] | None = None,
        every: int = 50,
        samples: int = 1,
        ks: Sequence[int] = (1,),
        config: RolloutConfig | None = None,
        env_kwargs: dict[str, Any] | None = None,
        concurrency: int = 4,
        seed: int = 0,
    ):
        if every < 1:
            raise ValueError(f"every: expected >= 1, got {every}")
        if max(ks) > samples:
            raise ValueError(f"ks {list(ks)}: pass@{max(ks)} needs samples >= {max(ks)}, got {samples}")
        self.out, self.every, self.samples, self.ks = Path(out), every, samples, list(ks)
        self.env_kwargs = {**(env_kwargs or {}), "data_files": problems}
        self.tasks, _, _ = load_tasks(self.env_kwargs)
        self.indices = select_indices(self.tasks, held_out)
        self.config = config or RolloutConfig(**EVAL_TIME_LIMITS)
        self.concurrency, self.seed = concurrency, seed

    def due(self, step: int) -> bool:
        """Whether ``step`` is an evaluation step."""
        return step > 0 and step % self.every == 0

    def __call__(
        self,
        step: int,
        policy: Any,
        renderer: Any | None = None,
        *,
        run: Callable[[Coroutine[Any, Any, int]], int] = asyncio.run,
    ) -> dict[str, float] | None:
        """Evaluate ``policy`` at ``step`` when due; the metrics to log (``None`` when not due).

        ``run`` runs the evaluation's coroutine to completion (:func:`~agentgspo.eval.runner.evaluate`): under
        asynchronous training pass ``producer.run``, so the episodes sample on the loop that owns the backend
        (a second loop is refused while the producer's has turns in flight)."""
        if not self.due(step):
            return None
        renderer = renderer or policy.renderer
        folder = self.out / f"step_{step:06d}"
        store = ResultsStore(
            folder,
            {
                "step": step,
                "problems": [self.tasks[i].metadata["id"] for i in self.indices],
                "env_kwargs": self.env_kwargs,
                "seed": self.seed,
            },
        )
        _, summary, _ = evaluate(
            policy,
            renderer,
            store,
            self.tasks,
            self.env_kwargs,
            indices=self.indices,
            samples=self.samples,
            ks=self.ks,
            config=self.config,
            concurrency=self.concurrency,
            seed=self.seed,
            agent_name="policy",
            progress=False,
            run=run,
        )
        (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        metrics = {f"eval/{k}": v for k, v in summary.items() if k.startswith("pass@") and v is not None}
        metrics["eval/judge_error_rate"] = summary["judge_error_rate"]
        if summary["rating_fit"]["estimate"] is not None:
            metrics["eval/rating"] = summary["rating_fit"]["estimate"]
        return metrics
