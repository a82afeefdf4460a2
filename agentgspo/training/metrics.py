"""Run logging: hyper-parameters at start, one JSONL line per step, TensorBoard, optional W&B / trackio, plots."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MetricsLogger",
    "read_metrics",
    "moving_average",
    "plot_training",
    "rollout_metrics_over_ranks",
    "step_metrics",
]


def _finite_numbers(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
    }


class MetricsLogger:
    """Writes ``out_dir/metrics.jsonl`` (one object per step), ``out_dir/config.json`` and TensorBoard events.

    Args:
        out_dir: run folder.
        hparams: every hyper-parameter of the run, written at start (and to TensorBoard's text panel).
        resume_step: when resuming, lines of steps after this one (logged before a crash) are dropped.
        backends: any of ``"tensorboard"``, ``"wandb"``, ``"trackio"``; the last two are used when installed.
        enabled: False on non-main ranks (they log nothing).
    """

    def __init__(
        self,
        out_dir: str | Path,
        hparams: dict[str, Any],
        *,
        resume_step: int | None = None,
        backends: Sequence[str] = ("tensorboard",),
        project: str = "agentgspo",
        enabled: bool = True,
    ):
        self.enabled = enabled
        self.out = Path(out_dir)
        self.path = self.out / "metrics.jsonl"
        self._tb = self._wandb = self._trackio = None
        if not enabled:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "config.json").write_text(json.dumps(hparams, indent=2, default=str))
        if resume_step is None:
            self.path.write_text("")
        elif self.path.exists():
            kept = [
                line
                for line in self.path.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= resume_step
            ]
            self.path.write_text("".join(line + "\n" for line in kept))
        if "tensorboard" in backends:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.out / "tensorboard"))
            self._tb.add_text("hparams", "```\n" + json.dumps(hparams, indent=2, default=str) + "\n```")
        if "wandb" in backends:
            try:
                import wandb

                self._wandb = wandb.init(project=project, config=hparams, dir=str(self.out))
            except ImportError:
                print("metrics: wandb is not installed (pip install wandb); skipping it")
        if "trackio" in backends:
            try:
                import trackio

                trackio.init(project=project, config=hparams)
                self._trackio = trackio
            except ImportError:
                print("metrics: trackio is not installed (pip install trackio); skipping it")

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Append one step's metrics."""
        if not self.enabled:
            return
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **metrics}, default=str) + "\n")
        numbers = _finite_numbers(metrics)
        if self._tb is not None:
            for name, value in numbers.items():
                self._tb.add_scalar(name, value, step)
        if self._wandb is not None:
            self._wandb.log(numbers, step=step)
        if self._trackio is not None:
            self._trackio.log(numbers, step=step)

    def close(self) -> None:
        """Flush and close the backends."""
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._trackio is not None:
            self._trackio.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The lines of a ``metrics.jsonl``."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over up to ``window`` values, skipping NaN (a step without that metric); NaN if all are."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    out = []
    for i in range(len(values)):
        recent = [v for v in values[max(0, i + 1 - window) : i + 1] if not math.isnan(v)]
        out.append(sum(recent) / len(recent) if recent else math.nan)
    return out


def plot_training(
    metrics: Sequence[dict[str, Any]],
    out_png: str | Path,
    *,
    warm_start: Sequence[dict[str, Any]] = (),
    demonstrator_success: float | None = None,
    window: int = 10,
    title: str = "",
    target: float | None = None,
) -> None:
    """Reward and success vs step (raw and moving average); the warm start's evals in a left panel if given, the
    imitated demonstrator's success as a line on both panels if given (what imitation alone can reach), and the
    stopping rule's success ``target`` (for the ``window``-step mean) as a dashed line if given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if warm_start else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    if warm_start:
        ax = axes[0][0]
        ax.plot(
            [m["step"] for m in warm_start],
            [m["success"] for m in warm_start],
            "o-",
            color="tab:gray",
            label="policy (sampled)",
        )
        ax.set(title="supervised warm start (imitation)", xlabel="SFT step", ylabel="success", ylim=(-0.02, 1.02))
    for ax in axes[0]:
        if demonstrator_success is not None:
            ax.axhline(
                demonstrator_success,
                color="tab:red",
                ls=":",
                lw=1.2,
                label=f"imitated demonstrator ({demonstrator_success:.2f})",
            )
        ax.grid(alpha=0.3)
    if warm_start:
        axes[0][0].legend(loc="upper left")
    ax = axes[0][-1]
    steps = [m["step"] for m in metrics]
    for key, color in (("reward_mean", "tab:blue"), ("success", "tab:green")):
        values = [m.get(key, float("nan")) for m in metrics]
        ax.plot(steps, values, color=color, alpha=0.3, lw=1)
        ax.plot(steps, moving_average(values, window), color=color, lw=2, label=f"{key} ({window}-step mean)")
    if target is not None:
        ax.axhline(target, color="k", ls="--", lw=0.8, label=f"stop: {window}-step mean success >= {target:g}")
    ax.set(title=title or "GSPO", xlabel="GSPO step", ylabel="per-step mean over the rollout batch", ylim=(-0.02, 1.02))
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def rollout_metrics_over_ranks(accelerator: Any, batch: dict[str, Any]) -> dict[str, float]:
    """The batch's ``reward_mean`` and ``success`` over the episodes the learner trains on, on all ranks (every
    rank gets the same numbers, so every rank takes the same stopping decision), with ``excluded_frac`` (the
    share of episodes left out of training, :data:`agentgspo.core.trajectory.ENDINGS`) and ``trained_episodes``.

    ``batch`` is this rank's :func:`agentgspo.rollouts.rollout.summarize`. Ranks are weighted by their trained episodes
    (a plain mean of per-rank means would weigh a rank with few trained episodes as much as a full one); with no
    trained episode anywhere the means are 0.0 and ``trained_episodes`` says 0.
    """
    import torch

    trained = float(batch.get("trained_episodes", 0))
    local = torch.tensor(
        [
            batch.get("reward_mean", 0.0) * trained,
            batch.get("success", 0.0) * trained,
            trained,
            float(batch.get("episodes", 0)),
        ],
        dtype=torch.float64,
        device=accelerator.device,
    )
    reward_sum, success_sum, trained_sum, episodes = accelerator.reduce(local, reduction="sum").tolist()
    return {
        "reward_mean": reward_sum / trained_sum if trained_sum else 0.0,
        "success": success_sum / trained_sum if trained_sum else 0.0,
        "trained_episodes": trained_sum,
        "excluded_frac": 1.0 - trained_sum / episodes if episodes else 0.0,
    }


def step_metrics(
    trajectories: Sequence[Any],
    batch: dict[str, Any],
    *,
    version: int,
    waits: dict[str, float],
    learner_seconds: float,
    wall: float,
) -> dict[str, Any]:
    """This rank's metrics of one GSPO step's batch (``batch``: its :func:`agentgspo.rollouts.rollout.summarize`),
    trained at policy ``version`` in ``wall`` seconds (rollouts included), beside the rollout metrics shared by all
    ranks.

    Staleness, per trajectory: the learner's version minus the oldest version that sampled one of its turns
    (``staleness_mean``, ``staleness_max``, and ``staleness_hist``: trajectories per value); ``version_span_max``:
    the most any trajectory's newest turn version exceeds its oldest (> 0 when a weight update fell inside the
    episode). Busy shares: of the step's wall time, the learner's and the sampler's (what overlapping removes is the
    idle rest). ``waits``: the producer's account of the step
    (:meth:`agentgspo.rollouts.producer.RolloutProducer.take`).

    >>> from agentgspo.core.trajectory import Trajectory
    >>> waits = {"rollout_wait_seconds": 1.0, "dropped_groups": 0, "trained_beyond_staleness": 0,
    ...          "sampler_busy_seconds": 3.0}
    >>> from agentgspo.rollouts.rollout import summarize
    >>> batch = [Trajectory()]
    >>> row = step_metrics(batch, summarize(batch), version=2, waits=waits, learner_seconds=1.0, wall=4.0)
    >>> row["staleness_max"], row["learner_busy_frac"], row["sampler_busy_frac"]
    (0, 0.25, 0.75)
    """
    spans = [(min(t.turn_versions), max(t.turn_version_ends)) for t in trajectories if t.turn_versions]
    staleness = [version - oldest for oldest, _ in spans] or [0]
    return {
        "rollout_seconds": waits["rollout_wait_seconds"],
        "tokens_mean": batch["tokens_mean"],
        "samples": len(trajectories),
        "stop_reasons": batch["stop_reasons"],
        "staleness_mean": sum(staleness) / len(staleness),
        "staleness_max": max(staleness),
        "staleness_hist": dict(sorted(Counter(staleness).items())),
        "version_span_max": max((newest - oldest for oldest, newest in spans), default=0),
        "dropped_groups": waits["dropped_groups"],
        "trained_beyond_staleness": waits["trained_beyond_staleness"],
        "step_seconds": wall,
        "learner_busy_frac": min(learner_seconds / wall, 1.0) if wall > 0 else 0.0,
        "sampler_busy_frac": min(waits["sampler_busy_seconds"] / wall, 1.0) if wall > 0 else 0.0,
    }
