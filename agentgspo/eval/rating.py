"""Rating estimates on the Codeforces scale: a maximum-likelihood fit against problem ratings, and CodeElo.

**Fit** (an offline estimate, not a contest rating). Codeforces calibrates a problem's rating so that a contestant
of equal rating solves it about half the time; with the Elo logistic curve (base 10, scale 400) the probability that
a contestant rated ``R`` solves a problem rated ``r`` is::

    p(R; r) = 1 / (1 + 10^((r - R) / 400))

Each problem is one observation: ``(r_i, f_i)`` with ``f_i = c_i / n_i`` its solved fraction over the ``n_i``
counted attempts. Several attempts at one problem are not independent evidence about ``R`` (a deterministic agent,
greedy decoding or a scripted one, repeats itself), so counting each attempt as a trial would shrink the interval
with ``--samples`` while the problems stay the same; weighting each attempt ``1 / n_i`` keeps one unit of evidence
per problem (a quasi-likelihood; with one attempt per problem it is the Bernoulli likelihood). The log-likelihood
``l(R) = sum f_i log p_i + (1 - f_i) log(1 - p_i)`` is concave in ``R`` with score ``dl/dR = ln(10)/400 * sum (f_i -
p_i)``, decreasing in ``R``; the estimate is its root (bisection). The 95% interval is the likelihood-ratio (Wilks)
interval ``{R : 2 (l(R^) - l(R)) <= 3.841}`` (chi-square, 1 degree of freedom), found by bisection on each side.

With every problem always solved (or never) the likelihood has no maximum: the estimate is ``None`` and only a
one-sided bound exists, the exact one: the ``R`` at which solving every problem (failing every problem) has
probability 5%, ``l(R) = log 0.05`` (the supremum of ``l`` is 0).

**CodeElo** (Quan et al. 2025, "CodeElo", arXiv 2501.01257): in each contest, rank the model among the contest's
rated participants; its rating is the ``R`` whose expected place among them equals that rank::

    expected_place(R) = 1 + sum_i 1 / (1 + 10^((R - r_i) / 400))

(``r_i`` the participants' ratings; decreasing in ``R``, solved by bisection); the reported rating is the mean over
contests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = [
    "solve_probability",
    "log_likelihood",
    "RatingFit",
    "fit_rating",
    "problem_outcomes",
    "expected_place",
    "rating_for_place",
]

LN10_OVER_400 = math.log(10) / 400
CHI2_1_95 = 3.841458820694124  # 95% quantile of chi-square with 1 degree of freedom
ONE_SIDED_CUT = -math.log(0.05)  # l(R) = log 0.05: the outcome seen (all solved / none) has probability 5% at R
SEARCH_RANGE = (-2000.0, 7000.0)  # far beyond any Codeforces rating: where bisection starts


def solve_probability(rating: float, problem_rating: float) -> float:
    """``p(R; r) = 1 / (1 + 10^((r - R) / 400))``: a contestant rated ``rating`` solves a ``problem_rating`` problem."""
    return 1.0 / (1.0 + 10.0 ** ((problem_rating - rating) / 400.0))


def _softplus(x: float) -> float:
    """``log(1 + e^x)`` without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def log_likelihood(rating: float, outcomes: Sequence[tuple[float, float]]) -> float:
    """``sum f log p + (1 - f) log(1 - p)`` over ``(problem_rating, f)`` with ``log p = -softplus(x)``,
    ``log(1 - p) = -softplus(-x)``, ``x = (r - R) ln(10) / 400``."""
    total = 0.0
    for problem_rating, solved in outcomes:
        x = (problem_rating - rating) * LN10_OVER_400
        total -= solved * _softplus(x) + (1.0 - solved) * _softplus(-x)
    return total


def _bisect(f, low: float, high: float, iterations: int = 80) -> float:
    """A root of ``f`` on ``[low, high]`` where ``f(low) > 0 >= f(high)`` (decreasing ``f``)."""
    for _ in range(iterations):
        mid = (low + high) / 2
        if f(mid) > 0:
            low = mid
        else:
            high = mid
    return (low + high) / 2


@dataclass
class RatingFit:
    """An estimated rating with its 95% likelihood-ratio interval; ``estimate``/``low``/``high`` ``None`` where
    unbounded. ``problems`` counts the rated problems fitted, ``solved`` the sum of their solved fractions."""

    estimate: float | None
    low: float | None
    high: float | None
    problems: int
    solved: float
    level: float = 0.95

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)

    def describe(self) -> str:
        """One line for reports, labelled an estimate."""
        if self.problems == 0:
            return "no rated problems: no rating estimate"
        if self.estimate is None:
            bound = f">= {self.low:.0f}" if self.low is not None else f"<= {self.high:.0f}"
            return (
                f"estimated rating {bound} (every problem {'solved' if self.low is not None else 'failed'}; "
                f"95% one-sided bound, {self.problems} rated problems)"
            )
        return (
            f"estimated rating {self.estimate:.0f} (95% CI {self.low:.0f} to {self.high:.0f}; maximum-likelihood "
            f"fit over {self.problems} rated problems, not a contest rating)"
        )


def fit_rating(outcomes: Sequence[tuple[float, float]]) -> RatingFit:
    """Maximum-likelihood rating from one ``(problem_rating, solved_fraction)`` per problem, with its 95% interval
    (module docstring). A 0/1 outcome is a problem attempted once; :func:`problem_outcomes` builds them."""
    outcomes = [(float(r), float(f)) for r, f in outcomes]
    if any(not 0.0 <= f <= 1.0 for _, f in outcomes):
        raise ValueError(f"fit_rating: solved fractions must be in [0, 1], got {[f for _, f in outcomes]}")
    solved = sum(f for _, f in outcomes)
    if not outcomes:
        return RatingFit(None, None, None, 0, 0.0)
    low, high = SEARCH_RANGE

    def score(rating: float) -> float:
        return sum(f - solve_probability(rating, r) for r, f in outcomes)

    if 0.0 < solved < len(outcomes):
        cut = CHI2_1_95 / 2
        estimate = _bisect(score, low, high)
        best = log_likelihood(estimate, outcomes)
        lower = _bisect(lambda x: best - log_likelihood(x, outcomes) - cut, low, estimate)
        upper = _bisect(lambda x: -(best - log_likelihood(x, outcomes) - cut), estimate, high)
        return RatingFit(estimate, lower, upper, len(outcomes), solved)
    # Every problem solved (failed): l rises towards 0 as R -> +inf (-inf); the bound is where l = log 0.05.
    if solved:
        lower = _bisect(lambda x: -log_likelihood(x, outcomes) - ONE_SIDED_CUT, low, high)
        return RatingFit(None, lower, None, len(outcomes), solved)
    upper = _bisect(lambda x: log_likelihood(x, outcomes) + ONE_SIDED_CUT, low, high)
    return RatingFit(None, None, upper, len(outcomes), solved)


def problem_outcomes(attempts: Sequence[tuple[str, float | None, bool]]) -> list[tuple[float, float]]:
    """``(problem_rating, solved_fraction)`` per rated problem from ``(problem_id, rating, accepted)`` attempts
    (unrated problems left out)."""
    counts: dict[str, list[float]] = {}
    for problem_id, rating, accepted in attempts:
        if rating is not None:
            entry = counts.setdefault(problem_id, [float(rating), 0.0, 0.0])
            entry[1], entry[2] = entry[1] + 1, entry[2] + bool(accepted)
    return [(rating, solved / n) for rating, n, solved in counts.values()]


# ----------------------------------------------------------------------------------------------- CodeElo


def expected_place(rating: float, participant_ratings: Sequence[float]) -> float:
    """``1 + sum_i 1 / (1 + 10^((R - r_i) / 400))``: the place a contestant rated ``rating`` is expected to take."""
    return 1.0 + sum(1.0 / (1.0 + 10.0 ** ((rating - r) / 400.0)) for r in participant_ratings)


def rating_for_place(place: float, participant_ratings: Sequence[float]) -> float:
    """The ``R`` with ``expected_place(R) == place`` (bisection; clamped to the search range at places 1 and n+1)."""
    if not participant_ratings:
        raise ValueError("a contest needs at least one rated participant")
    low, high = SEARCH_RANGE
    return _bisect(lambda r: expected_place(r, participant_ratings) - place, low, high, iterations=100)
