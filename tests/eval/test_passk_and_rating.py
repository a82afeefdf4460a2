"""pass@k against the binomial closed form and hand-computed values; the rating fit on synthetic outcomes;
CodeElo on a hand-computed standings example."""

from __future__ import annotations

import json
import math
import random

import pytest

from agentgspo.eval.codeelo import Standings, codeelo_rating, contest_place, load_standings
from agentgspo.eval.passk import mean_pass_at_k, parse_ks, pass_at_k
from agentgspo.eval.rating import expected_place, fit_rating, problem_outcomes, rating_for_place, solve_probability


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (5, 2, 1, 2 / 5),  # pass@1 is the fraction correct
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (5, 2, 4, 1.0),  # n - c = 3 < k: some k-subset always holds a correct sample
        (10, 0, 3, 0.0),
        (4, 4, 4, 1.0),
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_equals_the_binomial_closed_form_everywhere_small():
    for n in range(1, 16):
        for c in range(n + 1):
            for k in range(1, n + 1):
                closed = 1.0 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12), (n, c, k)


def test_mean_over_problems_and_bad_k():
    assert mean_pass_at_k([(5, 2), (5, 0)], 1) == pytest.approx(0.2)
    assert parse_ks("5,1,5", 5) == [1, 5]
    with pytest.raises(ValueError, match="raise --samples"):
        parse_ks("1,10", 5)
    with pytest.raises(ValueError, match="--k"):
        parse_ks("one", 5)
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)


def _synthetic(rating: float, problems: int, rng: random.Random) -> list[tuple[int, int]]:
    outcomes = []
    for _ in range(problems):
        r = rng.randrange(800, 2500, 100)
        outcomes.append((r, int(rng.random() < solve_probability(rating, r))))
    return outcomes


def test_rating_fit_recovers_a_known_rating_within_its_interval():
    fit = fit_rating(_synthetic(1600, 400, random.Random(7)))
    assert fit.low < 1600 < fit.high
    assert abs(fit.estimate - 1600) < 100 and fit.high - fit.low < 250
    assert "estimate" in fit.describe() and "not a contest rating" in fit.describe()
    # The score equation holds at the estimate: expected solves equal observed solves.
    outcomes = _synthetic(1600, 400, random.Random(7))
    assert sum(solve_probability(fit.estimate, r) for r, _ in outcomes) == pytest.approx(
        sum(y for _, y in outcomes), abs=1e-6
    )


def test_rating_interval_covers_the_truth_about_95_percent_of_the_time():
    rng = random.Random(11)
    covered = sum(fit.low < 1900 < fit.high for fit in (fit_rating(_synthetic(1900, 60, rng)) for _ in range(200)))
    assert 0.90 <= covered / 200 <= 0.99, covered


def test_all_solved_gives_only_the_exact_one_sided_95_percent_bound():
    fit = fit_rating([(1200, 1)] * 8)
    assert fit.estimate is None and fit.high is None and fit.low is not None
    # At the bound, solving all 8 problems has probability 5% (not the two-sided chi2/2 cut, which gives 14.6%).
    assert solve_probability(fit.low, 1200) ** 8 == pytest.approx(0.05, abs=1e-9)
    none = fit_rating([(1200, 0), (1500, 0)])
    assert (1 - solve_probability(none.high, 1200)) * (1 - solve_probability(none.high, 1500)) == pytest.approx(0.05)
    assert fit_rating([]).describe().startswith("no rated problems")


def test_more_samples_of_the_same_problems_do_not_narrow_the_interval():
    """A deterministic agent repeats its outcome on every sample: 10 samples of 8 problems are still 8 problems'
    worth of evidence, so the fit and its interval stay those of one sample each."""
    problems = [(f"P{i}", r, y) for i, (r, y) in enumerate(_synthetic(1500, 8, random.Random(3)))]
    once = fit_rating(problem_outcomes(problems))
    ten = fit_rating(problem_outcomes([p for p in problems for _ in range(10)]))
    assert 0 < once.solved < 8 and once.problems == ten.problems == 8
    assert (ten.estimate, ten.low, ten.high) == pytest.approx((once.estimate, once.low, once.high))
    # Mixed outcomes on one problem count as its solved fraction.
    half = problem_outcomes([("A", 1400, True), ("A", 1400, False), ("B", 1800, False), ("C", None, True)])
    assert half == [(1400.0, 0.5), (1800.0, 0.0)]


def test_expected_place_inverts():
    ratings = [1200, 1500, 1800, 2100]
    for place in (1.5, 2.0, 3.7, 4.5):
        assert expected_place(rating_for_place(place, ratings), ratings) == pytest.approx(place, abs=1e-6)


STANDINGS = {
    "contests": [
        {
            "name": "points round",
            "scoring": "points",
            "penalty_per_attempt": 50,
            "problems": [{"id": "P1", "points": 500}, {"id": "P2", "points": 1000}],
            "participants": [
                {"rating": 1500, "score": 1000},
                {"rating": 1500, "score": 100},
                {"rating": 1500, "score": 50},
            ],
        },
        {
            "name": "icpc round",
            "scoring": "icpc",
            "problems": [{"id": "P1"}, {"id": "P3"}],
            "participants": [
                {"rating": 1200, "solved": 2, "penalty": 0},
                {"rating": 1200, "solved": 1, "penalty": 0},
                {"rating": 1200, "solved": 1, "penalty": 20},
            ],
        },
    ]
}


def test_codeelo_reproduces_a_hand_computed_standings_example(tmp_path):
    # The model: P1 after one WA (500 - 50 = 450 points; ICPC: 1 solved, 20 minutes), P2 never (CE does not count),
    # P3 never.
    results = [
        {"problem_id": "P1", "sample": 0, "verdicts": ["WA", "AC"]},
        {"problem_id": "P2", "sample": 0, "verdicts": ["CE", "WA", "WA"]},
        {"problem_id": "P3", "sample": 0, "verdicts": ["TLE"]},
    ]
    path = tmp_path / "standings.json"
    path.write_text(json.dumps(STANDINGS))
    standings = load_standings(path)
    # Points round: 450 is beaten by 1000 only: place 2 among three 1500s: 1 + 3 / (1 + x) = 2, x = 10^((R-1500)/400)
    # = 2, R = 1500 + 400 log10(2) = 1620.41. ICPC round: 1 solved with 20 minutes: below (2, 0) and (1, 0), tied
    # with (1, 20): place 1 + 2 + 1/2 = 3.5 among three 1200s: 3 / (1 + x) = 2.5, x = 0.2, R = 1200 + 400 log10(0.2).
    out = codeelo_rating(standings, results)
    first, second = out["contests"]
    assert first["places"] == [2.0] and second["places"] == [3.5]
    assert first["rating"] == pytest.approx(1500 + 400 * math.log10(2), abs=1e-6)
    assert second["rating"] == pytest.approx(1200 + 400 * math.log10(0.2), abs=1e-6)
    assert out["rating"] == pytest.approx((first["rating"] + second["rating"]) / 2)


def test_codeelo_leaves_out_samples_with_judge_errors_and_flags_clamped_places():
    standings = Standings.model_validate(
        {
            "contests": [
                {
                    "name": "one problem",
                    "problems": [{"id": "A", "points": 500}],
                    "participants": [{"rating": 1400, "score": 500}, {"rating": 1600, "score": 0}],
                }
            ]
        }
    )
    solved = {"problem_id": "A", "sample": 0, "verdicts": ["AC"], "stop_reason": "completed"}
    broken = {"problem_id": "A", "sample": 1, "verdicts": [], "stop_reason": "judge_error"}
    out = codeelo_rating(standings, [solved, broken])
    # Only sample 0 takes part: tied with the 1400 (500 points), ahead of the 1600: place 1.5. A judge error is no
    # zero score (which would have placed sample 1 last and pulled the mean down to 1500).
    contest = out["contests"][0]
    assert contest["places"] == [1.5] and contest["dropped"] == 1 and out["dropped"] == 1
    assert expected_place(out["rating"], [1400, 1600]) == pytest.approx(1.5, abs=1e-6)
    # Ahead of everyone: no finite rating, the bound stands in, and the output says so.
    ahead = Standings.model_validate(
        {"contests": [{"name": "c", "problems": [{"id": "A"}], "participants": [{"rating": 1500, "score": 0}]}]}
    )
    out = codeelo_rating(ahead, [solved])
    assert out["clamped"] == 1 and out["contests"][0]["clamped"] == 1
    only_errors = codeelo_rating(standings, [broken])
    assert only_errors["rating"] is None and only_errors["contests"][0]["dropped"] == 1


def test_codeelo_floor_and_errors(tmp_path):
    contest = Standings.model_validate(STANDINGS).contests[0]
    # 12 failed attempts: 500 - 600 < 30% of 500, so the solved problem is worth 150: beats 100 and 50.
    assert contest_place(contest, {"P1": ["WA"] * 12 + ["AC"]}) == 2.0
    with pytest.raises(ValueError, match="were not evaluated"):
        codeelo_rating(Standings.model_validate(STANDINGS), [{"problem_id": "P1", "sample": 0, "verdicts": []}])
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"contests": [{"name": "x", "problems": [{"id": "P"}], "participants": [{"rating": 1}]}]})
    )
    with pytest.raises(ValueError, match="have no 'score'"):
        load_standings(bad)
    with pytest.raises(FileNotFoundError, match="--standings"):
        load_standings(tmp_path / "none.json")
