"""Public datasets' rows judged as their own graders judge them, through the real judge (bubblewrap): code_contests
file I/O, open-r1 rows without official tests, and every public + hidden test of code_contests and LiveCodeBench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgspo.envs.codeforces import CodeforcesEnv, load_problem_set
from agentgspo.envs.codeforces_sources import read_tasks
from eval_cli import run_eval  # tests/eval/eval_cli.py

A_PLUS_B = "a, b = map(int, input().split())\nprint(a + b)\n"
# Right on every test but the public one (0 0): a solution the datasets' own graders reject.
FAILS_ONLY_ZERO = "a, b = map(int, input().split())\nprint(a + b if a + b else 1)\n"
FILE_A_PLUS_B = (
    "a, b = map(int, open('input.txt').read().split())\n"
    "with open('output.txt', 'w') as out:\n    out.write(f'{a + b}\\n')\n"
)


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def submit(path: Path, code: str) -> float:
    """The reward of submitting ``code`` to the only problem of ``path`` in CodeForces-v0."""
    env = CodeforcesEnv(data_files=path, max_submissions=1)
    env.reset(options={"index": 0})
    call = "<tool_call>" + json.dumps({"name": "submit", "arguments": {"code": code}}) + "</tool_call>"
    _, reward, terminated, _, info = env.step(call)
    assert terminated, info
    return reward


def code_contests_row(name: str, **overrides) -> dict:
    row = {
        "name": name,
        "description": "Print a + b.",
        "time_limit": {"seconds": 2, "nanos": 0},
        "memory_limit_bytes": 256 * 2**20,
        "cf_rating": 800,
        "cf_tags": ["math"],
        "cf_contest_id": 9300,
        "public_tests": {"input": ["0 0\n"], "output": ["0\n"]},
        "private_tests": {"input": ["1 2\n", "5 7\n"], "output": ["3\n", "12\n"]},
        "generated_tests": {"input": ["10 20\n", "1 2\n"], "output": ["30\n", "3\n"]},
        "solutions": {"language": [3], "solution": [A_PLUS_B]},
        "incorrect_solutions": {"language": [3], "solution": [FAILS_ONLY_ZERO]},
        "input_file": "",
        "output_file": "",
    }
    row.update(overrides)
    return row


def open_r1_row(identifier: str, **overrides) -> dict:
    row = {
        "id": identifier,
        "contest_id": "9400",
        "index": identifier[-1],
        "title": f"Sum {identifier}",
        "time_limit": 1.0,
        "memory_limit": 256.0,
        "description": "Print a + b.",
        "input_format": "Two integers a and b.",
        "output_format": "Their sum.",
        "interaction_format": None,
        "note": None,
        "examples": [{"input": "1 2\n", "output": "3\n"}],
        "rating": 800,
        "tags": ["math"],
        "official_tests": [
            {"input": "1 2\n", "output": "3\n"},
            {"input": "0 0\n", "output": "0\n"},
            {"input": "-5 5\n", "output": "0\n"},
        ],
        "official_tests_complete": True,
        "input_mode": "stdio",
        "generated_checker": None,
        "reference_solutions": {"python": A_PLUS_B},
    }
    row.update(overrides)
    return row


# ----------------------------------------------------------------------------------------- 1. code_contests file I/O


def test_code_contests_file_io_rows_are_judged_on_input_txt_and_output_txt(tmp_path, capsys):
    row = code_contests_row(
        "9300_A. File Sum",
        input_file="input.txt",
        output_file="output.txt",
        solutions={"language": [3], "solution": [FILE_A_PLUS_B]},
        incorrect_solutions={"language": [3], "solution": [A_PLUS_B]},
    )  # reads stdin
    path = write_rows(tmp_path / "rows.jsonl", [row])
    task = load_problem_set(path).tasks[0]
    assert task.problem.io_mode == "file" and "input.txt" in task.statement and "output.txt" in task.statement
    good = run_eval(capsys, tmp_path / "ref", "--problems", str(path), "--agent", "reference")
    assert good["pass@1"] == 1.0 and good["verdicts"] == {"AC": 1}
    bad = run_eval(capsys, tmp_path / "wrong", "--problems", str(path), "--agent", "wrong")
    assert bad["pass@1"] == 0.0


def test_code_contests_rows_with_other_file_names_are_skipped_and_counted(tmp_path):
    rows = [
        code_contests_row("9300_B. Plain"),
        code_contests_row("9300_C. Odd Names", input_file="in.txt", output_file="out.txt"),
        code_contests_row("9300_D. Half File", input_file="input.txt", output_file=""),
        code_contests_row("9300_E. Spelled Out", input_file="standard input", output_file="standard output"),
    ]
    problem_set = read_tasks(write_rows(tmp_path / "rows.jsonl", rows))
    assert [(t.metadata["id"], t.problem.io_mode) for t in problem_set.tasks] == [
        ("9300_B. Plain", "stdio"),
        ("9300_E. Spelled Out", "stdio"),
    ]
    reason = "file I/O other than input.txt/output.txt"
    assert problem_set.skipped == {reason: 2}
    assert len(problem_set.skipped_rows) == 2
    assert "row 2" in problem_set.skipped_rows[0] and "9300_C. Odd Names" in problem_set.skipped_rows[0]
    assert "'in.txt'" in problem_set.skipped_rows[0] and "'out.txt'" in problem_set.skipped_rows[0]
    assert "row 3" in problem_set.skipped_rows[1] and "9300_D. Half File" in problem_set.skipped_rows[1]
    only_odd = write_rows(tmp_path / "odd.jsonl", rows[1:2])
    with pytest.raises(ValueError, match=r"no judgeable problems \(skipped: 1 file I/O other than .*9300_C"):
        read_tasks(only_odd)


# ------------------------------------------------------------------------------- 2. open-r1 rows without official tests


def test_open_r1_rows_without_official_tests_are_skipped_and_counted(tmp_path, capsys):
    rows = [
        open_r1_row("9400A"),
        open_r1_row("9400B", official_tests=[]),  # examples only: judging on them would inflate pass@k
        open_r1_row("9400C", official_tests=None, official_tests_complete=False),
        open_r1_row("9400D", official_tests_complete=False),
    ]
    del rows[3]["official_tests_complete"]
    path = write_rows(tmp_path / "rows.jsonl", rows)
    problem_set = load_problem_set(path)
    assert [t.metadata["id"] for t in problem_set.tasks] == ["9400A", "9400D"]
    assert problem_set.skipped == {"no official tests": 2}
    assert ["9400B" in problem_set.skipped_rows[0], "9400C" in problem_set.skipped_rows[1]] == [True, True]
    assert all("no official tests" in line for line in problem_set.skipped_rows)
    assert problem_set.tasks[0].metadata["official_tests_complete"] is True
    assert "official_tests_complete" not in problem_set.tasks[1].metadata  # the row has no such field
    assert len(problem_set.tasks[0].problem.tests) == 3
    summary = run_eval(capsys, tmp_path / "ref", "--problems", str(path), "--agent", "reference")
    assert summary["attempts"] == 2 and summary["pass@1"] == 1.0
    with pytest.raises(ValueError, match=r"no judgeable problems \(skipped: 1 no official tests\).*9400B"):
        read_tasks(write_rows(tmp_path / "examples_only.jsonl", rows[1:2]))


def test_incomplete_official_tests_are_used_and_recorded():
    from agentgspo.envs.codeforces_sources import open_r1_task

    task = open_r1_task(open_r1_row("9400E", official_tests_complete=False))
    assert task.metadata["official_tests_complete"] is False and len(task.problem.tests) == 3


def test_the_starter_problems_still_load_with_their_official_tests():
    problem_set = load_problem_set()
    assert len(problem_set.tasks) == 5 and not problem_set.skipped
    assert all(t.metadata["official_tests_complete"] is True for t in problem_set.tasks)
    assert all(len(t.problem.tests) > len(t.problem.samples) for t in problem_set.tasks)


# -------------------------------------------------------------------------- 3. public + hidden tests, deduplicated


def test_code_contests_judges_public_private_and_generated_tests(tmp_path, capsys):
    path = write_rows(tmp_path / "rows.jsonl", [code_contests_row("9300_F. Sum")])
    tests = load_problem_set(path).tasks[0].problem.tests
    # public, private, generated; the generated "1 2" repeats a private input: judged once
    assert [(t.name, t.input) for t in tests] == [("1", b"0 0\n"), ("2", b"1 2\n"), ("3", b"5 7\n"), ("4", b"10 20\n")]
    good = run_eval(capsys, tmp_path / "ref", "--problems", str(path), "--agent", "reference")
    assert good["pass@1"] == 1.0
    bad = run_eval(capsys, tmp_path / "wrong", "--problems", str(path), "--agent", "wrong")  # fails only "0 0"
    assert bad["pass@1"] == 0.0 and bad["verdicts"] == {"WA": 1}


def test_livecodebench_judges_public_and_private_tests(tmp_path):
    public = [{"input": "0 0\n", "output": "0\n", "testtype": "stdin"}]
    private = [
        {"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
        {"input": "0 0\n", "output": "0\n", "testtype": "stdin"},
        {"input": "5 7\n", "output": "12\n", "testtype": "stdin"},
    ]
    row = {
        "question_title": "Sum",
        "question_content": "Print a + b.",
        "platform": "atcoder",
        "question_id": "fixture_abc002_a",
        "contest_id": "fixture_abc002",
        "contest_date": "2026-01-02T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps(public),
        "private_test_cases": json.dumps(private),
        "metadata": "{}",
    }
    path = write_rows(tmp_path / "lcb.jsonl", [row])
    tests = load_problem_set(path).tasks[0].problem.tests
    assert [(t.name, t.input) for t in tests] == [("1", b"0 0\n"), ("2", b"1 2\n"), ("3", b"5 7\n")]
    assert submit(path, A_PLUS_B) == 1.0
    assert submit(path, FAILS_ONLY_ZERO) == 0.0
