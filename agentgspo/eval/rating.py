"""Rating estimates on the Codeforces scale: a maximum-likelihood fit against problem ratings, and CodeElo.

**Fit** (an offline estimate, not a contest rating). Codeforces calibrates a problem's rating so that a contestant
of equal rating solves it about half the time; with the Elo logistic curve (base 10, scale 400) the probability that
a contestant rated ``R`` solves a problem rated ``r`` is::

    p(R; r) = 1 / (1 + 10^((r - R) / 400))

Given attempts ``(r_i, y_i)`` (``y_i`` = 1 solved, 0 not) the log-likelihood ``l(R) = sum y_i log p_i + (1 - y_i)
log(1 - p_i)`` is concave in ``R`` with score ``dl/dR = ln(10)/400 * sum (y_i - p_i)``, decreasing in ``R``; the
estimate is its root (bisection). The 95% interval is the likelihood-ratio (Wilks) interval ``{R : 2 (l(R^) - l(R))
<= 3.841}`` (chi-square, 1 degree of freedom), found by bisection on each side. With every attempt solved (or none)
the likelihood has no maximum: the estimate is ``None`` and only the lower (upper) bound exists.

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

LN10_OVER_400 = math.log(10) / 400
CHI2_1_95 = 3.841458820694124  # 95% quantile of chi-square with 1 degree of freedom
SEARCH_RANGE = (-2000.0, 7000.0)  # far beyond any Codeforces rating: where bisection starts


def solve_probability(rating: float, problem_rating: float) -> float:
    """``p(R; r) = 1 / (1 + 10^((r - R) / 400))``: a contestant rated ``rating`` solves a ``problem_rating`` problem."""
    return 1.0 / (1.0 + 10.0 ** ((problem_rating - rating) / 400.0))


def _softplus(x: float) -> float:
    """``log(1 + e^x)`` without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def log_likelihood(rating: float, outcomes: Sequence[tuple[float, int]]) -> float:
    """``sum y log p + (1 - y) log(1 - p)`` with ``log p = -softplus(x)``, ``log(1 - p) = -softplus(-x)``,
    ``x = (r - R) ln(10) / 400``."""
    total = 0.0
    for problem_rating, solved in outcomes:
        x = (problem_rating - rating) * LN10_OVER_400
        total -= _softplus(x) if solved else _softplus(-x)
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
    unbounded. ``attempts``/``solved`` count the data."""

    estimate: float | None
    low: float | None
    high: float | None
    attempts: int
    solved: int
    level: float = 0.95

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)

    def describe(self) -> str:
        """One line for reports, labelled an estimate."""
        if self.attempts == 0:
            return "no rated problems: no rating estimate"
        if self.estimate is None:
            bound = f">= {self.low:.0f}" if self.low is not None else f"<= {self.high:.0f}"
            return (f"estimated rating {bound} (every attempt {'solved' if self.low is not None else 'failed'}; "
                    f"95% one-sided bound, {self.attempts} attempts)")
        return (f"estimated rating {self.estimate:.0f} (95% CI {self.low:.0f} to {self.high:.0f}; maximum-likelihood "
                f"fit over {self.attempts} attempts, not a contest rating)")


def fit_rating(outcomes: Sequence[tuple[float, int]]) -> RatingFit:
    """Maximum-likelihood rating from ``(problem_rating, solved)`` attempts with its 95% interval (module docstring)."""
    outcomes = [(float(r), 1 if y else 0) for r, y in outcomes]
    solved = sum(y for _, y in outcomes)
    if not outcomes:
        return RatingFit(None, None, None, 0, 0)
    low, high = SEARCH_RANGE

    def score(rating: float) -> float:
        return sum(y - solve_probability(rating, r) for r, y in outcomes)

    cut = CHI2_1_95 / 2
    if 0 < solved < len(outcomes):
        estimate = _bisect(score, low, high)
        best = log_likelihood(estimate, outcomes)
        lower = _bisect(lambda x: best - log_likelihood(x, outcomes) - cut, low, estimate)
        upper = _bisect(lambda x: -(best - log_likelihood(x, outcomes) - cut), estimate, high)
        return RatingFit(estimate, lower, upper, len(outcomes), solved)
    # Every attempt solved (failed): the likelihood rises towards 0 as R -> +inf (-inf); bound where it is `cut` below.
    if solved:
        lower = _bisect(lambda x: -log_likelihood(x, outcomes) - cut, low, high)
        return RatingFit(None, lower, None, len(outcomes), solved)
    upper = _bisect(lambda x: log_likelihood(x, outcomes) + cut, low, high)
    return RatingFit(None, None, upper, len(outcomes), solved)


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
