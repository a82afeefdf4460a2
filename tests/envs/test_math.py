"""agentgspo/Math-v0: contract, oracle/wrong rewards, math-verify from threads, timeouts, bad data, rollouts."""

from __future__ import annotations

import json
import threading
import time

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.environments.env_checker import check_env, play
from agentgspo.envs.datafiles import builtin_path, load_rows
from agentgspo.envs.math import MathEnv, last_boxed, verify_answer


def test_check_env_passes():
    check_env(gym.make("agentgspo/Math-v0"))


@pytest.mark.parametrize("sandbox, seeds", [("none", None), ("local", range(4))])
def test_oracle_scores_one_and_wrong_zero(sandbox, seeds):
    env = MathEnv(sandbox=sandbox)
    for seed in seeds or range(len(env.rows)):  # every built-in gold answer verifies against itself
        gold, terminated, history = play(env, env.oracle, seed=seed)
        assert (gold, terminated) == (1.0, True), history
        assert play(env, env.wrong, seed=seed)[0] == 0.0


def test_equivalent_forms_count_and_unboxed_answers_do_not():
    env = MathEnv()
    env.reset(options={"index": 7})  # 84/126 -> \frac{2}{3}
    assert env.step(r"\boxed{2/3}")[1] == 1.0
    env.reset(options={"index": 7})
    assert env.step(r"\boxed{0.666666667}")[1] == 1.0
    env.reset(options={"index": 7})
    reward, info = env.step(r"the answer is \frac{2}{3}")[1::3]
    assert (reward, info["answered"]) == (0.0, False)


def test_last_boxed_takes_the_last_balanced_box():
    assert last_boxed(r"\boxed{1} then \boxed{\frac{a}{b}}") == r"\frac{a}{b}"
    assert last_boxed(r"\boxed{unclosed") is None


def test_math_verify_works_outside_the_main_thread():
    results: list[bool] = []
    errors: list[BaseException] = []

    def check():
        try:
            results.append(verify_answer(r"\frac{1}{2}", "0.5") and not verify_answer("3", "4"))
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=check) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and results == [True] * 8


def test_a_hostile_answer_times_out_to_zero_instead_of_hanging():
    env = MathEnv(verify_timeout_s=1.0)
    env.reset(seed=0)
    start = time.monotonic()
    _, reward, terminated, _, info = env.step(r"\boxed{9^{9^{9^{9}}}}")
    assert (reward, terminated, info["verify_timeout"]) == (0.0, True, True)
    assert time.monotonic() - start < 5
    env.reset(seed=0)  # the killed worker is replaced
    assert env.step(r"\boxed{1060}")[1] == 1.0


def test_python_tool_errors_and_timeouts_are_tool_messages():
    env = MathEnv(python_timeout_s=1.0)
    env.reset(seed=0)
    call = '<tool_call>{"name": "python", "arguments": {"code": %s}}</tool_call>'
    messages, reward, terminated, *_ = env.step(call % json.dumps("1/0"))
    assert "ZeroDivisionError" in messages[0]["content"] and not terminated
    messages, *_ = env.step(call % json.dumps("while True: pass"))
    assert "longer than 1 s" in messages[0]["content"]


def _write(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def test_data_files_with_other_field_names(tmp_path):
    path = _write(tmp_path / "q.jsonl", [{"question": "1+1?", "solution": "2"}])
    env = MathEnv(data_files=path, problem_field="question", answer_field="solution", sandbox="none")
    assert play(env, env.oracle, seed=0)[0] == 1.0


def test_parquet_files_load_through_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    path = tmp_path / "q.parquet"
    datasets.Dataset.from_list([{"problem": "2+2?", "answer": "4"}]).to_parquet(str(path))
    assert MathEnv(data_files=path).rows == [{"problem": "2+2?", "answer": "4"}]


def test_csv_files_keep_numeric_answers_as_strings(tmp_path):
    # CSV has no types: "4" (quoted or not) is the text 4; inferring int64 made every CSV of integer answers fail
    # with advice ("quote numbers in the file") that a CSV cannot follow.
    pytest.importorskip("datasets")
    path = tmp_path / "q.csv"
    path.write_text('problem,answer\n2+2?,4\n"Half of 1?","0.50"\n')
    assert MathEnv(data_files=path).rows == [
        {"problem": "2+2?", "answer": "4"},
        {"problem": "Half of 1?", "answer": "0.50"},
    ]


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"problem": "a"}, {"problem": "b", "answer": "1"}], "row 1: missing field 'answer'"),
        ([{"problem": "a", "answer": "1"}, {"problem": "b", "answer": 2}], "row 2: field 'answer' must be a non-empty"),
        ([{"problem": "a", "answer": "1"}, "[1, 2]"], "row 2: expected an object"),
        ([{"problem": "a", "answer": "1"}, "{not json"], "line 2 is not valid JSON"),
        ([{"problem": "a", "gold_answer": "1"}], "pass answer_field='gold_answer'"),
    ],
)
def test_malformed_rows_name_the_row_and_the_fix(tmp_path, rows, message):
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        MathEnv(data_files=path)


def test_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        MathEnv(data_files=tmp_path / "nope.jsonl")


def test_datasets_are_loaded_once_per_process():
    assert MathEnv().rows is MathEnv().rows
    from agentgspo.envs.math import BUILTIN_DATA

    assert load_rows(builtin_path(BUILTIN_DATA), ("problem", "answer")) is MathEnv().rows
