"""agentgspo/Code-v0: contract, oracle/wrong, reward hacks, the wire, HumanEval through the judge, bad data."""

from __future__ import annotations

import json
import time

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.environments.env_checker import check_env, play
from agentgspo.envs.code import (
    CodeEnv,
    extract_code,
    judge_many,
    judge_solution,
    load_code_problems,
    wire_decode,
    wire_encode,
)


def _tool_call(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _builtin(name: str):
    return next(p for p in load_code_problems("builtin") if p.entry_point == name)


def test_check_env_passes():
    check_env(gym.make("agentgspo/Code-v0"))


def test_oracle_scores_one_and_wrong_zero_on_every_builtin_problem():
    env = CodeEnv()
    for seed in range(len(env.problems)):
        gold, terminated, history = play(env, env.oracle, seed=seed)
        assert (gold, terminated) == (1.0, True), history
        assert "defined True" in history[3]["content"]  # the run_python round trip ran the reference
        assert play(env, env.wrong, seed=seed)[0] == 0.0


# Each of these tries to earn the reward for `add(a, b) -> a + b` without computing it.
HACKS = {
    "sys.exit at load": "import sys\nsys.exit(0)\n",
    "sys.exit in the call": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "os._exit in the call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "SystemExit after a right answer": "n = 0\ndef add(a, b):\n    global n\n    n += 1\n    if n > 1:\n"
    "        raise SystemExit(0)\n    return a + b\n",
    "hang": "def add(a, b):\n    while True:\n        pass\n",
    "always-equal object": "class Any:\n    def __eq__(self, other):\n        return True\n"
    "    __hash__ = object.__hash__\ndef add(a, b):\n    return Any()\n",
    "always-equal int subclass": "class I(int):\n    def __eq__(self, other):\n        return True\n"
    "    __hash__ = int.__hash__\ndef add(a, b):\n    return I(0)\n",
    "always-equal inside a list": "class Any:\n    def __eq__(self, other):\n        return True\n"
    "def add(a, b):\n    return [Any()][0]\n",
    "print the verdict": "import sys\nprint('all assertions passed')\nsys.stdout.flush()\n"
    "def add(a, b):\n    print('AC'); print('all assertions passed', file=sys.stderr)\n",
    "forge replies on every fd": "import os\nfor fd in range(3, 40):\n    try:\n"
    "        os.write(fd, b'{\"return\": 5}\\n' * 50)\n    except OSError:\n        pass\n"
    "def add(a, b):\n    os._exit(0)\n",
    # Returns the right sum only if it can find the tests (files, processes, frames); otherwise None.
    "read the tests": r"""
import gc, os, stat, sys
def _find():
    for root in ("/", "/tmp", "/proc"):
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath.startswith(("/proc/sys", "/sys", "/usr", "/dev")) or dirpath.count("/") > 4:
                dirnames[:] = []
                continue
            for name in filenames:
                try:
                    if not stat.S_ISREG(os.stat(os.path.join(dirpath, name)).st_mode):
                        continue  # pipes and devices would block
                    with open(os.path.join(dirpath, name), "rb") as f:
                        if b"def check(candidate)" in f.read(1 << 20):
                            return True
                except OSError:
                    pass
    frame = sys._getframe()
    while frame is not None:
        if "check" in frame.f_code.co_name or "candidate" in frame.f_globals:
            return True
        frame = frame.f_back
    return any(getattr(o, "co_name", "") == "check" for o in gc.get_objects())
FOUND = _find()
def add(a, b):
    return a + b if FOUND else None
""",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HACKS))
def test_reward_hacks_earn_nothing(name):
    verdict = judge_solution(_builtin("add"), HACKS[name], time_limit_s=1.0)
    assert verdict.verdict not in ("AC", "JE"), verdict
    env = CodeEnv(judge_time_limit_s=1.0)
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step(f"```python\n{HACKS[name]}```")
    assert (reward, terminated) == (0.0, True), info


def test_the_right_answer_passes_where_the_hacks_fail():
    assert judge_solution(_builtin("add"), "def add(a, b):\n    return a + b\n").passed


def test_exceptions_cross_the_wire_and_tests_may_expect_them():
    problem = _builtin("safe_divide")
    assert judge_solution(problem, problem.reference).passed
    no_raise = "def safe_divide(a, b):\n    return a / b if b else 0.0\n"
    assert judge_solution(problem, no_raise).verdict == "WA"


def test_the_wire_keeps_exact_builtin_types_and_refuses_others():
    value = [None, True, 1, 1.5, float("inf"), "s", b"\x00", (1, [2]), {3}, frozenset({4}), {(1, 2): {"a": 1j}}]
    decoded = wire_decode(json.loads(json.dumps(wire_encode(value))))
    assert decoded == value and [type(v) for v in decoded] == [type(v) for v in value]

    class Sneaky(int):
        def __eq__(self, other):
            return True

    for bad in (Sneaky(1), [object()], {"k": Sneaky(2)}):
        with pytest.raises(TypeError, match="cannot pass a value of type"):
            wire_encode(bad)
    with pytest.raises(ValueError, match="malformed"):
        wire_decode({"~": "tuple"})


def test_syntax_errors_are_compile_errors_and_broken_tests_are_judge_errors(tmp_path):
    assert judge_solution(_builtin("add"), "def add(a, b) return").verdict == "CE"
    row = {"prompt": "def f():\n    pass\n", "entry_point": "f", "tests": "def check(candidate):\n    assert (\n"}
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = CodeEnv(problems=path)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("```python\ndef f():\n    return 1\n```")
    assert (reward, info["verdict"], info["stop_reason"], info["mask_turn"]) == (0.0, "JE", "judge_error", True)


def test_run_python_tool_takes_stdin_and_errors_are_tool_messages():
    env = CodeEnv(tool_timeout_s=1.0)
    env.reset(seed=0)
    messages, reward, terminated, *_ = env.step(_tool_call("run_python", code="print(input()[::-1])", stdin="abc"))
    assert messages[0]["content"].strip() == "cba" and not terminated
    messages, *_ = env.step(_tool_call("run_python", code="1/0"))
    assert "ZeroDivisionError" in messages[0]["content"]
    messages, *_ = env.step(_tool_call("run_python", code="while True: pass"))
    assert "longer than 1 s" in messages[0]["content"]
    messages, _, _, _, info = env.step(_tool_call("run_python", source="print(1)"))
    assert info["tool_errors"] == {"invalid_arguments": 1} and "code" in messages[0]["content"]


def test_an_answer_without_a_code_block_scores_zero():
    env = CodeEnv()
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("return a + b")
    assert (reward, terminated, info["answered"]) == (0.0, True, False)
    assert extract_code("```py\nx = 1\n``` then ```\ny = 2\n```") == "y = 2\n"


def test_humaneval_loads_offline_from_the_package():
    problems = load_code_problems("humaneval")
    assert len(problems) == 164 and problems[0].task_id == "HumanEval/0"
    assert all(p.canonical_solution and "def check(" in p.tests for p in problems)
    env = CodeEnv(problems="humaneval")
    assert env.problems is problems
    messages, _ = env.reset(seed=32)
    assert "def find_zero" in messages[1]["content"]


def _corrupt(problem) -> str:
    """An off-by-one mutation of the reference when the body has an integer literal, else ``return None``."""
    import re

    body = problem.canonical_solution
    mutated = re.sub(r"(?<![\w.])(\d+)(?![\w.])", lambda m: str(int(m.group(1)) + 1), body, count=1)
    if mutated != body:
        return problem.prompt + mutated
    return problem.prompt + "    return None\n"


@pytest.mark.slow
def test_all_humaneval_canonical_solutions_pass_and_corrupted_ones_fail():
    problems = load_code_problems("humaneval")
    start = time.perf_counter()
    gold = judge_many(problems, [p.reference for p in problems])
    gold_s = time.perf_counter() - start
    failed_gold = [(p.task_id, v) for p, v in zip(problems, gold) if not v.passed]
    assert failed_gold == []
    start = time.perf_counter()
    nulls = judge_many(problems, [p.prompt + "    return None\n" for p in problems])
    mutants = judge_many(problems, [_corrupt(p) for p in problems])
    bad_s = time.perf_counter() - start
    passed_null = [p.task_id for p, v in zip(problems, nulls) if v.passed or v.verdict == "JE"]
    assert passed_null == []
    # An off-by-one literal can be harmless (e.g. a range bound that is never reached); each must then
    # still fail as `return None`, which is checked above. Report how many mutants the tests catch.
    caught = sum(not v.passed for v in mutants)
    assert not any(v.verdict == "JE" for v in mutants)
    print(
        f"\nHumanEval: canonical {len(problems) - len(failed_gold)}/164 AC in {gold_s:.1f} s; "
        f"return-None 0/164 AC; off-by-one mutants caught {caught}/164; 328 bad judged in {bad_s:.1f} s"
    )
    assert caught >= 140


@pytest.mark.parametrize(
    "line, message",
    [
        ({"prompt": "def f(): pass", "entry_point": "f"}, "row 1: field 'tests' must be a non-empty string"),
        ({"prompt": "def f(): pass", "entry_point": "f", "tests": "assert f() is None"}, "must define check"),
        ({"prompt": "x", "entry_point": "not valid", "tests": "def check(c): pass"}, "not a Python identifier"),
        ("[1, 2]", "row 1: expected an object"),
        ("{broken", "line 1 is not valid JSON"),
    ],
)
def test_malformed_rows_name_the_row(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text((line if isinstance(line, str) else json.dumps(line)) + "\n")
    with pytest.raises(ValueError, match=message):
        CodeEnv(problems=path)


def test_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        CodeEnv(problems=tmp_path / "nope.jsonl")


def test_problems_are_loaded_once_per_process():
    assert CodeEnv().problems is CodeEnv().problems is load_code_problems("builtin")
