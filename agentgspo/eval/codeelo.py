"""The CodeElo rating from a standings file (method: Quan et al. 2025, arXiv 2501.01257; formula in
:mod:`agentgspo.eval.rating`).

The standings file (JSON) lists contests, the eval's problem ids that make up each, and the rated participants::

    {"contests": [
      {"name": "Round 1", "scoring": "points", "penalty_per_attempt": 50,
       "problems": [{"id": "001-even-split", "points": 500}, {"id": "002-...", "points": 1000}],
       "participants": [{"rating": 1500, "score": 1320}, ...]},
      {"name": "ICPC-style", "scoring": "icpc", "penalty_per_attempt": 20,
       "problems": [{"id": "..."}], "participants": [{"rating": 1700, "solved": 3, "penalty": 95}, ...]}]}

The model's result in a contest, per sample index ``s`` (sample ``s`` of every problem is one virtual
participation): ``points`` scoring gives a solved problem ``max(0.3 * points, points - penalty_per_attempt *
failed)`` (Codeforces' per-attempt penalty and 30% floor; an offline eval has no submission times, so no time
decay), where ``failed`` counts rejected submissions before the accepted one (compilation errors are not
penalised, as on Codeforces); ``icpc`` scoring ranks by solved count, then ``penalty_per_attempt`` minutes per
failed submission (times taken as 0). Place = 1 + participants strictly better + half the ties. The contest's
rating is the mean over samples of ``rating_for_place(place)``; the CodeElo rating is the mean over contests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from agentgspo.eval.rating import SEARCH_RANGE, expected_place, rating_for_place
from agentgspo.core.trajectory import UNCOUNTED_STOPS

__all__ = ["Contest", "Standings", "load_standings", "failed_before_accept", "contest_place", "codeelo_rating"]


class _Problem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    points: float = 1.0


class _Participant(BaseModel):
    model_config = ConfigDict(extra="allow")
    rating: float
    score: float | None = None
    solved: int | None = None
    penalty: float = 0.0


class Contest(BaseModel):
    """One contest of a standings file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    scoring: Literal["points", "icpc"] = "points"
    penalty_per_attempt: float | None = None
    problems: list[_Problem]
    participants: list[_Participant]

    @model_validator(mode="after")
    def _complete(self) -> Contest:
        if not self.problems or not self.participants:
            raise ValueError(f"contest {self.name!r}: needs at least one problem and one rated participant")
        points = self.scoring == "points"
        field = "score" if points else "solved"
        missing = [i for i, p in enumerate(self.participants) if (p.score if points else p.solved) is None]
        if missing:
            raise ValueError(
                f"contest {self.name!r} ({self.scoring} scoring): participants {missing[:5]} have no {field!r}"
            )
        return self

    def penalty(self) -> float:
        """Points (``points``) or minutes (``icpc``) per rejected attempt: 50 and 20 unless the file says."""
        if self.penalty_per_attempt is not None:
            return self.penalty_per_attempt
        return 50.0 if self.scoring == "points" else 20.0


class Standings(BaseModel):
    """A standings file: ``{"contests": [...]}``."""

    model_config = ConfigDict(extra="forbid")
    contests: list[Contest]


def load_standings(path: str | Path) -> Standings:
    """Read and validate a standings file; errors name the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"standings file {str(path)!r} does not exist; pass a JSON file as described in docs/eval.md (--standings)"
        )
    try:
        return Standings.model_validate(json.loads(path.read_text()))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"standings file {path}: {exc}") from None


def failed_before_accept(verdicts: list[str]) -> tuple[bool, int]:
    """``(accepted, rejected submissions before the first AC, compilation errors not counted)``."""
    failed = 0
    for verdict in verdicts:
        if verdict == "AC":
            return True, failed
        if verdict != "CE":
            failed += 1
    return False, failed


def contest_place(contest: Contest, verdicts_by_problem: dict[str, list[str]]) -> float:
    """The model's place among the contest's participants given its submissions' verdicts per problem id."""
    if contest.scoring == "points":
        score = 0.0
        for problem in contest.problems:
            accepted, failed = failed_before_accept(verdicts_by_problem.get(problem.id, []))
            if accepted:
                score += max(0.3 * problem.points, problem.points - contest.penalty() * failed)
        better = sum(p.score > score for p in contest.participants)
        tied = sum(p.score == score for p in contest.participants)
    else:
        solved, penalty = 0, 0.0
        for problem in contest.problems:
            accepted, failed = failed_before_accept(verdicts_by_problem.get(problem.id, []))
            if accepted:
                solved, penalty = solved + 1, penalty + contest.penalty() * failed
        better = sum(p.solved > solved or (p.solved == solved and p.penalty < penalty) for p in contest.participants)
        tied = sum(p.solved == solved and p.penalty == penalty for p in contest.participants)
    return 1.0 + better + tied / 2.0


def codeelo_rating(standings: Standings, results: list[dict[str, Any]]) -> dict[str, Any]:
    """The CodeElo rating from eval ``results`` (rows with ``problem_id``, ``sample``, ``verdicts``,
    ``stop_reason``): per contest and sample a place and its rating, the mean per contest, the mean over contests.

    An attempt the harness could not finish fairly (``trajectory.UNCOUNTED_STOPS``, excluded from pass@k) is no
    submission record: a sample takes part in a contest only when every problem of the contest has a counted attempt of
    that sample (the others are ``dropped``). A place ahead of (behind) every rated participant has no finite rating
    (the expected place is always above 1 and below n + 1): the search bound stands in and the sample is counted
    as ``clamped``, so a reader knows that contest's rating is a bound."""
    attempts: dict[tuple[str, int], list[str]] = {
        (r["problem_id"], r["sample"]): r["verdicts"] for r in results if r.get("stop_reason") not in UNCOUNTED_STOPS
    }
    samples = sorted({r["sample"] for r in results})
    evaluated = {r["problem_id"] for r in results}
    contests = []
    for contest in standings.contests:
        missing = [p.id for p in contest.problems if p.id not in evaluated]
        if missing:
            raise ValueError(
                f"standings contest {contest.name!r}: problems {missing[:5]} were not evaluated; "
                "evaluate them too (--problems) or drop them from the standings file"
            )
        ratings = [p.rating for p in contest.participants]
        complete = [s for s in samples if all((p.id, s) in attempts for p in contest.problems)]
        places = [contest_place(contest, {p.id: attempts[(p.id, s)] for p in contest.problems}) for s in complete]
        lowest, highest = expected_place(SEARCH_RANGE[1], ratings), expected_place(SEARCH_RANGE[0], ratings)
        per_sample = [rating_for_place(place, ratings) for place in places]
        contests.append(
            {
                "name": contest.name,
                "participants": len(ratings),
                "places": places,
                "rating": sum(per_sample) / len(per_sample) if per_sample else None,
                "dropped": len(samples) - len(complete),
                "clamped": sum(not lowest < place < highest for place in places),
            }
        )
    rated = [c["rating"] for c in contests if c["rating"] is not None]
    return {
        "rating": sum(rated) / len(rated) if rated else None,
        "contests": contests,
        "clamped": sum(c["clamped"] for c in contests),
        "dropped": sum(c["dropped"] for c in contests),
        "method": "CodeElo (arXiv 2501.01257): expected-place equation per contest, mean over contests",
    }
