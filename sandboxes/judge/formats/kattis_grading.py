"""Grading of a Kattis package's test groups, as problemtools' SubmissionJudge and default grader do.

A test scores ``accept_score`` when AC, else ``reject_score``, unless its validator wrote a score; a group with
``on_reject: break`` stops after its first non-AC child; a JE child makes the group JE; otherwise the default
grader's flags decide: verdicts ``worst_error`` (default; JE > RTE > MLE > TLE > OLE > WA > AC), ``no_errors``
(the same), ``first_error``, ``always_accept``; scores ``sum`` (default), ``avg``, ``max``, ``min``;
``ignore_sample`` (only the last child counts) and ``accept_if_any_accepted``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...results import TestResult, Verdict
from .kattis_package import SCORE_AGGREGATORS, VERDICT_AGGREGATORS, KattisGroup

__all__ = ["Graded", "grade", "grade_group"]

#: The default grader's order, worst first.
ERROR_ORDER = ("JE", "IF", "RTE", "MLE", "TLE", "OLE", "WA", "PE", "AC")
TO_KATTIS = {
    Verdict.AC: "AC",
    Verdict.WA: "WA",
    Verdict.PE: "WA",
    Verdict.TLE: "TLE",
    Verdict.ILE: "TLE",
    Verdict.MLE: "MLE",
    Verdict.OLE: "OLE",
    Verdict.RE: "RTE",
    Verdict.JE: "JE",
}
FROM_KATTIS = {
    "AC": Verdict.AC,
    "WA": Verdict.WA,
    "PE": Verdict.PE,
    "TLE": Verdict.TLE,
    "MLE": Verdict.MLE,
    "OLE": Verdict.OLE,
    "RTE": Verdict.RE,
    "JE": Verdict.JE,
    "IF": Verdict.JE,
}


@dataclass
class Graded:
    """A test's or group's result in Kattis terms: its verdict name (AC, WA, TLE, RTE, ...) and score."""

    verdict: str
    score: float | None


def grade(children: list[Graded], grader_flags: str) -> Graded:
    """problemtools' default grader on a group's child results: (verdict, score); see the module docstring."""
    verdict_rule, score_rule, ignore_sample, any_accepted = "worst_error", "sum", False, False
    for flag in grader_flags.split():  # later flags override earlier ones, as in the default grader
        if flag in VERDICT_AGGREGATORS:
            verdict_rule = flag
        elif flag in SCORE_AGGREGATORS:
            score_rule = flag
        ignore_sample = ignore_sample or flag == "ignore_sample"
        any_accepted = any_accepted or flag == "accept_if_any_accepted"
    verdicts = [c.verdict for c in children]
    scores = [0.0 if c.score is None else float(c.score) for c in children]
    if ignore_sample:
        if not 1 <= len(verdicts) <= 2:
            return Graded("JE", 0.0)  # the default grader's assertion: ignore_sample is for sample + secret
        verdicts, scores = verdicts[-1:], scores[-1:]
    if any_accepted and "AC" in verdicts:
        verdict = "AC"
    elif verdict_rule in ("worst_error", "no_errors"):
        verdict = min(verdicts + ["AC"], key=ERROR_ORDER.index)
    elif verdict_rule == "first_error":
        verdict = next((v for v in verdicts if v != "AC"), "AC")
    else:
        verdict = "AC"
    total = {"sum": sum, "max": max, "min": min, "avg": lambda s: sum(s) / len(s)}[score_rule](scores)
    return Graded(verdict, total)


def grade_group(
    group: KattisGroup, results: dict[str, TestResult], scoring: bool, counted: set, report: list[dict]
) -> Graded | None:
    """Walk ``group`` as problemtools' SubmissionJudge does; None when it holds no test at all."""
    children: list[Graded] = []
    for item in group.items:
        if isinstance(item, KattisGroup):
            child = grade_group(item, results, scoring, counted, report)
            if child is None:
                continue
        else:
            result = results[item.name]
            kattis = TO_KATTIS.get(result.verdict, "JE")
            score = (
                result.score
                if result.score is not None
                else group.config["accept_score"]
                if kattis == "AC"
                else group.config["reject_score"]
            )
            child = Graded(kattis, score)
            counted.add(item.name)
        children.append(child)
        if child.verdict != "AC" and group.config["on_reject"] == "break":
            break
    if not children:
        return None
    je = next((c for c in children if c.verdict == "JE"), None)
    graded = Graded("JE", None) if je else grade(children, str(group.config["grader_flags"] or ""))
    if not scoring:
        graded.score = None
    report.append(
        {"name": group.name, "verdict": FROM_KATTIS.get(graded.verdict, Verdict.JE).value, "score": graded.score}
    )
    return graded
