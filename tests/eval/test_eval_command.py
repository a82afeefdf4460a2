"""`agentgspo eval` end to end: scripted reference/wrong agents on the built-in sets and on every source format,
the tiny policy with a report, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agentgspo.cli import main
from eval_cli import results, run_eval  # tests/eval/eval_cli.py

FIXTURES = Path(__file__).parent / "fixtures"


def test_reference_scores_one_and_wrong_zero_on_the_starter_problems(tmp_path, capsys):
    good = run_eval(capsys, tmp_path / "ref", "--problems", "starter", "--agent", "reference")
    assert good["pass@1"] == 1.0 and good["verdicts"] == {"AC": 5} and good["judge_error_rate"] == 0.0
    bad = run_eval(
        capsys, tmp_path / "wrong", "--problems", "starter", "--agent", "wrong", "--samples", "2", "--k", "1,2"
    )
    assert bad["pass@1"] == 0.0 and bad["pass@2"] == 0.0 and "AC" not in bad["verdicts"]
    rows = results(tmp_path / "wrong")
    assert len(rows) == 10 and all(r["verdicts"] and r["verdicts"][0] != "AC" for r in rows)
    summary = json.loads((tmp_path / "wrong" / "summary.json").read_text())
    assert {r["group"] for r in summary["by_rating"]} == {"800", "1100", "1200"}
    assert "interactive" in {r["group"] for r in summary["by_tag"]}
    assert summary["rating_fit"]["estimate"] is None and summary["rating_fit"]["high"] is not None


# Built-in problems of each kind (token checker, testlib checker, interactor). Every built-in problem's references
# and wrong solutions are judged by tests/envs/test_problemset.py::test_every_builtin_problem_is_valid; this test is
# about the eval command on the set, so some of each kind suffice: those whose first wrong solution (the one the
# wrong agent submits) fails by its answer, whatever the machine's speed. A too-slow one (001's and 002's) can be
# accepted on a machine faster than the one the set's limits were set on, and did so on another 2-core machine.
BUILTIN_OF_EACH_KIND = "005-guess-the-height,007-two-teams,009-lost-permutation,017-stone-piles,034-two-guilds"


@pytest.mark.slow
def test_reference_scores_one_and_wrong_zero_on_the_builtin_problem_set(tmp_path, capsys):
    subset = ("--problems", "builtin", "--only", BUILTIN_OF_EACH_KIND, "--concurrency", "2")
    good = run_eval(capsys, tmp_path / "ref", *subset, "--agent", "reference")
    rows = results(tmp_path / "ref")
    assert good["pass@1"] == 1.0, [(r["problem_id"], r["verdicts"], r["error"]) for r in rows if not r["accepted"]]
    assert sorted(r["problem_id"] for r in rows) == BUILTIN_OF_EACH_KIND.split(",") and all(r["rating"] for r in rows)
    bad = run_eval(capsys, tmp_path / "wrong", *subset, "--agent", "wrong")
    assert bad["pass@1"] == 0.0 and bad["judge_error_rate"] == 0.0


@pytest.mark.parametrize(
    "source, expected_id, wrong_used",
    [
        # several valid answers: the open-r1 generated checker decides; open-r1 ships no wrong solutions
        ("openr1_rows.jsonl", "9100A", "print(0) (no wrong solution shipped)"),
        ("code_contests_rows.jsonl", "9200_A. Vowel Count", "incorrect_1"),
        ("kattis/meanvalue", "meanvalue", "wrong_answer/floor.py"),
    ],
)
def test_each_source_format_evaluates_end_to_end(tmp_path, capsys, source, expected_id, wrong_used):
    good = run_eval(capsys, tmp_path / "ref", "--problems", str(FIXTURES / source), "--agent", "reference")
    assert good["pass@1"] == 1.0
    assert results(tmp_path / "ref")[0]["problem_id"] == expected_id
    bad = run_eval(capsys, tmp_path / "wrong", "--problems", str(FIXTURES / source), "--agent", "wrong")
    assert bad["pass@1"] == 0.0 and bad["verdicts"] == {"WA": 1}
    said = [m["content"] for m in results(tmp_path / "wrong")[0]["trajectory"]["messages"] if m["role"] == "assistant"]
    assert said[0].startswith(f"Using {wrong_used}.")


def test_a_parquet_export_of_code_contests_rows_evaluates(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    rows = [json.loads(line) for line in (FIXTURES / "code_contests_rows.jsonl").read_text().splitlines()]
    parquet = tmp_path / "code_contests.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    assert run_eval(capsys, tmp_path / "ref", "--problems", str(parquet), "--agent", "reference")["pass@1"] == 1.0


def test_livecodebench_rows_evaluate_and_functional_rows_are_skipped(tmp_path, capsys):
    bad = run_eval(
        capsys, tmp_path / "wrong", "--problems", str(FIXTURES / "livecodebench_rows.jsonl"), "--agent", "wrong"
    )
    rows = results(tmp_path / "wrong")
    assert [r["problem_id"] for r in rows] == ["fixture_abc001_a"] and bad["pass@1"] == 0.0
    assert rows[0]["submissions"][0]["total"] == 6  # the public test and the five private ones (base64/zlib/pickle)
    # The functional row cannot be judged here: skipped, and said so (summary.json names it, the report counts it).
    skipped = json.loads((tmp_path / "wrong" / "summary.json").read_text())["skipped_rows"]
    assert len(skipped) == 1 and "functional" in skipped[0] and "'fixture_1'" in skipped[0]
    assert "source rows skipped (cannot be judged here)**: 1" in (tmp_path / "wrong" / "report.md").read_text()
    capsys.readouterr()
    assert (
        main(
            [
                "eval",
                "--out",
                str(tmp_path / "ref"),
                "--problems",
                str(FIXTURES / "livecodebench_rows.jsonl"),
                "--agent",
                "reference",
            ]
        )
        == 2
    )
    assert "ship no reference solution" in capsys.readouterr().err


@pytest.mark.slow
def test_the_tiny_policy_runs_end_to_end_with_a_report(tmp_path, capsys):
    out = tmp_path / "tiny"
    summary = run_eval(
        capsys,
        out,
        "--problems",
        "starter",
        "--agent",
        "policy",
        "--policy",
        "tiny",
        "--only",
        "9000A,9000D",
        "--samples",
        "2",
        "--k",
        "1,2",
        "--max-turns",
        "2",
        "--max-new-tokens",
        "48",
        "--concurrency",
        "4",
    )
    assert summary["attempts"] == 4 and 0.0 <= summary["pass@1"] <= 1.0
    rows = results(out)
    assert all(r["sampled_tokens"] > 0 for r in rows)
    for row in rows:  # the decoded segments carry exactly the record's trained ids
        trained = sum(n for kind, _, n in row["segments"] if kind == "trained")
        assert trained == sum(row["trajectory"]["loss_mask"]) == row["sampled_tokens"]
    report = (out / "report.md").read_text()
    assert "pass@1" in report and "estimated rating" in report and (out / "pass_by_rating.svg").exists()
    page = (out / "report.html").read_text()
    assert page.count('class="attempt"') == 4 and "seg-trained" in page
    assert not any(f'{attr}="http' in page for attr in ("src", "href"))  # self-contained (browser test: no requests)


def test_bad_input_is_one_clear_line(tmp_path, capsys):
    for args, message in [
        (["--problems", str(tmp_path / "missing.jsonl")], "does not exist"),
        (["--problems", "starter", "--k", "5"], "raise --samples"),
        (["--problems", "starter", "--only", "nope"], "--only: no problem 'nope'"),
        (["--problems", "starter", "--agent", "chat"], "--chat-url"),
        (["--problems", "starter", "--time-limit-scale", "0"], "--time-limit-scale: expected a finite number > 0"),
        (["--problems", "starter", "--time-limit-scale", "nan"], "--time-limit-scale: expected a finite number > 0"),
    ]:
        capsys.readouterr()
        assert main(["eval", "--out", str(tmp_path / "x"), *args]) == 2
        assert message in capsys.readouterr().err


def test_a_standings_file_adds_the_codeelo_rating_to_the_report(tmp_path, capsys):
    standings = tmp_path / "standings.json"
    # Both problems solved first try: 500 + 1000 = 1500 points, ahead of 1400 and 900, behind 2000: place 2 among
    # three 1500s, so R = 1500 + 400 log10(2) (see test_passk_and_rating for the equation).
    standings.write_text(
        json.dumps(
            {
                "contests": [
                    {
                        "name": "starter round",
                        "problems": [{"id": "9000A", "points": 500}, {"id": "9000B", "points": 1000}],
                        "participants": [
                            {"rating": 1500, "score": 2000},
                            {"rating": 1500, "score": 1400},
                            {"rating": 1500, "score": 900},
                        ],
                    }
                ]
            }
        )
    )
    out = tmp_path / "eval"
    summary = run_eval(
        capsys,
        out,
        "--problems",
        "starter",
        "--agent",
        "reference",
        "--only",
        "9000A,9000B",
        "--standings",
        str(standings),
    )
    assert summary["codeelo"] == pytest.approx(1500 + 400 * math.log10(2), abs=1e-6)
    assert "## CodeElo" in (out / "report.md").read_text() and "CodeElo rating" in (out / "report.html").read_text()


def test_a_time_limit_scale_is_part_of_the_runs_identity(tmp_path, capsys):
    # Verdicts judged under other limits are not mixed into one eval: a folder run at --time-limit-scale 2 is not
    # resumed at the default scale.
    out = tmp_path / "scaled"
    one = ("--problems", "starter", "--only", "0", "--agent", "reference")
    assert run_eval(capsys, out, *one, "--time-limit-scale", "2")["pass@1"] == 1.0
    assert main(["eval", "--out", str(out), "--no-progress", *one]) == 2
    assert "holds an eval with other settings (env_kwargs differ)" in capsys.readouterr().err
