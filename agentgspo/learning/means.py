"""The step's metrics as the learner gathers them: weighted means, extremes and counts over micro-batches, merged
over ranks, and an objective's declared diagnostics recorded into them."""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["Means", "record_declared"]


class Means:
    """Weighted means, minima and maxima of metrics gathered over micro-batches (and merged over ranks)."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weights: dict[str, float] = {}
        self.extremes: dict[str, float] = {}
        self.picks: dict[str, Any] = {}  # name -> min or max
        self.counts: dict[str, float] = {}

    def add(self, name: str, value: float, weight: float = 1.0) -> None:
        """Add ``value`` to the weighted mean of ``name`` (a NaN or a zero weight adds nothing)."""
        if weight > 0 and not math.isnan(value):
            self.sums[name] = self.sums.get(name, 0.0) + value * weight
            self.weights[name] = self.weights.get(name, 0.0) + weight

    def extreme(self, name: str, value: float, pick: Any) -> None:
        """Keep the ``pick`` (``min`` or ``max``) of ``name``'s values (NaN ignored)."""
        if not math.isnan(value):
            self.extremes[name] = pick(self.extremes.get(name, value), value)
            self.picks[name] = pick

    def count(self, name: str, value: float) -> None:
        """Add ``value`` to the total of ``name``."""
        self.counts[name] = self.counts.get(name, 0.0) + value

    def merge(self, other: Means) -> None:
        """Fold another rank's metrics into these (weighted sums add, extremes take their min/max, counts add)."""
        for name, total in other.sums.items():
            self.sums[name] = self.sums.get(name, 0.0) + total
            self.weights[name] = self.weights.get(name, 0.0) + other.weights[name]
        for name, value in other.extremes.items():
            self.extreme(name, value, other.picks[name])
        for name, value in other.counts.items():
            self.count(name, value)

    def result(self) -> dict[str, float]:
        """Every metric: the weighted means, the extremes and the totals."""
        return {**{n: self.sums[n] / self.weights[n] for n in self.sums}, **self.extremes, **self.counts}


def record_declared(
    declared: tuple[tuple[str, str], ...], diagnostics: dict[str, torch.Tensor], means: Means, prefix: str = ""
) -> None:
    """Diagnostics into ``means`` as an objective declares them: ``(name, count)`` is a share or mean weighted by
    the diagnostic ``count``; ``(name, "min")`` / ``(name, "max")`` keeps the extreme."""
    for name, how in declared:
        if how in ("min", "max"):
            means.extreme(prefix + name, float(diagnostics[name]), min if how == "min" else max)
        else:
            means.add(prefix + name, float(diagnostics[name]), float(diagnostics[how]))
