"""The numbers of an eval from its results: pass@k, breakdowns by rating and tag, verdicts, judge errors, rating.

Which attempts count is the one table of endings (:data:`agentgspo.core.trajectory.ENDINGS`): attempts the harness
could not finish fairly (its ``UNCOUNTED_STOPS``: a judge or env error, a hung env call, a failed sampler, dead
infrastructure) are excluded from pass@k and the rating fit and counted on their own (``excluded``), never as
failed solutions. The share of every ending (``stop_frac``) and the judge-error rate are reported beside the pass
rates. (A resumed eval replays the re-queueable ones: :mod:`agentgspo.eval.store`.)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from agentgspo.eval.passk import pass_at_ks
from agentgspo.eval.rating import fit_rating, problem_outcomes
from agentgspo.core.trajectory import UNCOUNTED_STOPS

__all__ = ["rating_bucket", "summarize"]


def _counts(results: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """``{problem_id: (n, c)}`` over counted attempts."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        counts[r["problem_id"]][0] += 1
        counts[r["problem_id"]][1] += int(bool(r["accepted"]))
    return {p: (n, c) for p, (n, c) in counts.items()}


def rating_bucket(rating: int | None) -> str:
    """``"800"``, ``"900"``, ... (Codeforces ratings are multiples of 100); ``"unrated"`` for ``None``."""
    return "unrated" if rating is None else str(int(rating) // 100 * 100)


def summarize(results: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """Everything the report shows, as a JSON-ready dict (see the module docstring)."""
    counted = [r for r in results if r["stop_reason"] not in UNCOUNTED_STOPS]
    excluded = Counter(r["stop_reason"] for r in results if r["stop_reason"] in UNCOUNTED_STOPS)
    endings = Counter(r["stop_reason"] for r in results)
    counts = _counts(counted)
    meta = {r["problem_id"]: r for r in results}
    by_rating: dict[str, list[tuple[int, int]]] = defaultdict(list)
    by_tag: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for problem_id, nc in counts.items():
        by_rating[rating_bucket(meta[problem_id]["rating"])].append(nc)
        for tag in meta[problem_id]["tags"] or ["(no tags)"]:
            by_tag[tag].append(nc)

    def table(groups: dict[str, list[tuple[int, int]]]) -> list[dict[str, Any]]:
        return [
            {"group": g, "problems": len(v), "attempts": sum(n for n, _ in v), **pass_at_ks(v, [1])}
            for g, v in groups.items()
        ]

    attempts_with_judge_errors = sum(1 for r in results if r["judge_errors"] or r["stop_reason"] == "judge_error")
    fit = fit_rating(problem_outcomes([(r["problem_id"], r["rating"], r["accepted"]) for r in counted]))
    problems = []
    for problem_id, (n, c) in counts.items():
        row = meta[problem_id]
        problems.append(
            {
                "problem_id": problem_id,
                "title": row["title"],
                "rating": row["rating"],
                "tags": row["tags"],
                "attempts": n,
                "accepted": c,
                "verdicts": dict(Counter(r["verdict"] for r in counted if r["problem_id"] == problem_id)),
            }
        )
    # Problems whose every attempt was excluded are out of pass@k's mean: name them, so none is lost unseen.
    without_counted = sorted({r["problem_id"] for r in results} - set(counts))
    return {
        "problems": len(counts),
        "attempts": len(results),
        "counted_attempts": len(counted),
        "excluded": dict(excluded),
        "problems_without_counted_attempts": without_counted,
        **pass_at_ks(list(counts.values()), ks),
        "stop_frac": {reason: n / len(results) for reason, n in endings.most_common()},
        "by_rating": sorted(table(by_rating), key=lambda t: (t["group"] == "unrated", t["group"].zfill(6))),
        "by_tag": sorted(table(by_tag), key=lambda t: t["group"]),
        "verdicts": dict(Counter(r["verdict"] for r in counted)),
        "submission_verdicts": dict(Counter(v for r in counted for v in r["verdicts"])),
        "judge_error_rate": attempts_with_judge_errors / len(results) if results else 0.0,
        # Where each judged submission's program came from (sandboxes/judge/compile_cache.py): hit, miss or off.
        "compile_cache": dict(
            Counter(s["compile_cache"] for r in results for s in r.get("submissions", ()) if "compile_cache" in s)
        ),
        "rating_fit": {**fit.to_dict(), "description": fit.describe()},
        "per_problem": sorted(problems, key=lambda p: (p["rating"] is None, p["rating"] or 0, p["problem_id"])),
    }
