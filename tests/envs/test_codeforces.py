"""agentgspo/CodeForces-v0: contract, oracle/wrong, C++, limits and rewards, hidden tests stay hidden, reward hacks,
open-r1 rows and bad data."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.environments.env_checker import check_env, play
from agentgspo.envs.codeforces import CodeforcesEnv, load_problem_set

A_PLUS_B = "a, b = map(int, input().split())\nprint(a + b)\n"


def _call(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _env(index: int = 0, **kwargs) -> CodeforcesEnv:
    env = CodeforcesEnv(**kwargs)
    env.reset(options={"index": index})
    return env


def test_check_env_passes():
    check_env(gym.make("agentgspo/CodeForces-v0"))


def test_builtin_set_has_a_float_checker_and_an_interactive_problem():
    problems = [t.problem for t in load_problem_set().tasks]
    assert len(problems) == 5
    assert any(p.checker.startswith("openr1:") for p in problems)
    assert any(p.interactive and p.interactor for p in problems)


def test_oracle_scores_one_and_wrong_zero_on_every_builtin_problem():
    env = CodeforcesEnv()
    for seed in range(len(env.tasks)):
        gold, terminated, history = play(env, env.oracle, seed=seed)
        assert (gold, terminated) == (1.0, True), history
        assert history[3]["content"].startswith("Examples: AC"), history[3]
        bad, terminated, history = play(env, env.wrong, seed=seed)
        assert (bad, terminated) == (0.0, True)
        assert sum(m["role"] == "tool" for m in history) == 3  # the default max_submissions


def test_cpp_solutions_compile_run_and_get_accepted():
    env = _env(0)
    cpp = env.task.references["cpp"]
    messages, *_ = env.step(_call("run", code=cpp, stdin="40 2", lang="cpp"))
    assert messages[0]["content"].split()[0] == "42"
    messages, reward, terminated, _, info = env.step(_call("submit", code=cpp, lang="cpp"))
    assert (reward, terminated, info["accepted"]) == (1.0, True, True), messages


SMALL_ONLY = "a, b = map(int, input().split())\nprint(a + b if abs(a) < 10**9 else 0)\n"  # 2 of problem 0's 4 tests


def test_partial_credit_and_compile_error_penalty_are_paid_at_the_step_that_earns_them():
    env = _env(0, partial_credit=True, compile_error_penalty=0.25, max_submissions=2)
    messages, reward, terminated, *_ = env.step(_call("submit", code="int main( {", lang="cpp"))
    assert "Compilation error" in messages[0]["content"] and (reward, terminated) == (-0.25, False)
    messages, reward, terminated, _, info = env.step(_call("submit", code=SMALL_ONLY))
    assert terminated and info["submissions"][1]["passed"] == 2
    assert reward == pytest.approx(2 / 4)  # the improvement: the rewards so far sum to the score, 2/4 - 0.25
    assert env.score() == pytest.approx(2 / 4 - 0.25)
    messages, *_ = env.step(_call("submit", code=A_PLUS_B))
    assert "No submissions left" in messages[0]["content"]


def test_rewards_so_far_always_sum_to_the_score():
    env = _env(0, partial_credit=True, compile_error_penalty=0.25, max_submissions=4)
    total = 0.0
    for code, lang in (("int main( {", "cpp"), (SMALL_ONLY, "python"), ("print(0)", "python"), (A_PLUS_B, "python")):
        _, reward, terminated, *_ = env.step(_call("submit", code=code, lang=lang))
        total += reward
        assert total == pytest.approx(env.score())
    assert terminated and total == pytest.approx(1.0 - 0.25)  # AC pays the rest up to 1.0


@pytest.mark.parametrize("first, earned", [(SMALL_ONLY, 2 / 4), ("int main( {", -0.25)])
def test_an_episode_the_runner_cuts_keeps_what_it_earned(renderer, first, earned):
    # Issue 19 item 1: a partial submission cut by the runner's max_turns scored 0.0 (the env paid only when it
    # ended the episode itself), and being cut dodged the compile-error penalty.
    from agentgspo.policy.base import ScriptedPolicy
    from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner

    lang = "cpp" if "main" in first else "python"
    policy = ScriptedPolicy(lambda messages: _call("submit", code=first, lang=lang), renderer)
    runner = RolloutRunner(
        lambda: CodeforcesEnv(partial_credit=True, compile_error_penalty=0.25),
        policy,
        renderer,
        RolloutConfig(group_size=1, max_turns=1, max_context=4096),
    )
    (t,) = runner.run_sync([0])
    assert t.stop_reason == "max_turns" and t.num_turns == 1
    assert t.reward == pytest.approx(earned) and sum(t.turn_rewards) == pytest.approx(t.reward)


def test_an_episode_ended_by_parse_errors_still_gets_its_final_reward():
    # Partial credit earned and compile-error penalties incurred before the episode ends are paid however it ends;
    # otherwise malformed tool calls after a compile error dodge the penalty (and a partial solution earns 0).
    env = _env(0, partial_credit=True, compile_error_penalty=0.25, max_submissions=3, max_parse_errors=1)
    small_only = "a, b = map(int, input().split())\nprint(a + b if abs(a) < 10**9 else 0)\n"
    total = 0.0
    for code, lang in (("int main( {", "cpp"), (small_only, "python")):
        _, reward, terminated, *_ = env.step(_call("submit", code=code, lang=lang))
        assert not terminated
        total += reward
    _, reward, terminated, _, info = env.step("<tool_call>{oops</tool_call>")
    assert terminated and info["stop_reason"] == "parse_error"
    assert total + reward == pytest.approx(2 / 4 - 0.25)


def test_an_episode_ended_by_judge_errors_gets_the_final_reward_a_plain_turn_would(tmp_path):
    # A checker that crashes (JE) on one output: the episode ends with stop_reason judge_error, and the compile
    # error before it is charged as when the last submission comes in a turn without tool calls (respond).
    checker = "import sys\nout = open(sys.argv[3]).read()\nassert 'crash' not in out\nprint(1)\n"
    row = {
        "id": "je/1",
        "title": "Echo",
        "time_limit": 1.0,
        "memory_limit": 256.0,
        "description": "Print 1.",
        "examples": [{"input": "", "output": "1\n"}],
        "official_tests": [{"input": "", "output": "1\n"}],
        "official_tests_complete": True,
        "generated_checker": checker,
    }
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    endings = {}
    for ending in ("tool call", "plain turn"):
        env = _env(0, data_files=path, compile_error_penalty=0.25, max_judge_errors=1)
        _, total, *_ = env.step(_call("submit", code="int main( {", lang="cpp"))
        crash = "print('crash')\n"
        last = _call("submit", code=crash) if ending == "tool call" else f"```python\n{crash}```"
        _, reward, terminated, _, info = env.step(last)
        assert terminated and info["stop_reason"] == "judge_error" and info["judge_errors"] == 1
        endings[ending] = total + reward
    assert endings == {"tool call": -0.25, "plain turn": -0.25}


def test_a_plain_turn_submits_its_last_code_block_and_ends():
    env = _env(0)
    _, reward, terminated, _, info = env.step(f"Done.\n```python\n{A_PLUS_B}```")
    assert (reward, terminated, info["accepted"]) == (1.0, True, True)
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step("I give up.")
    assert (reward, terminated, info["submissions"]) == (0.0, True, [])


def test_verdicts_never_show_hidden_test_contents():
    env = _env(0)
    leak = "import sys\ndata = sys.stdin.read()\nprint(data, file=sys.stderr)\nprint(data)\nsys.exit(3)\n"
    messages, *_ = env.step(_call("submit", code=leak))
    text = messages[0]["content"]
    assert "RE" in text and "1000000000000000000" not in text and "-5" not in text, text
    wrong = "a, b = map(int, input().split())\nprint(a - b)\n"
    messages, *_ = env.step(_call("submit", code=wrong))
    assert "WA" in messages[0]["content"] and "expected" not in messages[0]["content"]


def test_run_samples_shows_the_public_examples():
    env = _env(3)
    messages, *_ = env.step(_call("run_samples", code="print('YES')\nprint('YES')"))
    text = messages[0]["content"]
    assert "Examples: WA" in text and "abba" in text and "expected:\nYES\nNO" in text
    env = _env(4)  # interactive: the example runs against the interactor
    messages, *_ = env.step(_call("run_samples", code=env.task.references["py"]))
    assert messages[0]["content"].startswith("Examples: AC")


HACKS = {
    "sys.exit(0) first": "import sys\nsys.exit(0)\nprint(3)\n",
    "os._exit(0) first": "import os\nos._exit(0)\n",
    "print the sample output": "print(3)\n",
    "read the answers": r"""
import os, stat
found = None
for root in ("/", "/tmp", "/box", "/proc"):
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath.startswith(("/proc/sys", "/sys", "/usr", "/dev")) or dirpath.count("/") > 4:
            dirnames[:] = []
            continue
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                if name.endswith((".ans", "answer")) and stat.S_ISREG(os.stat(path).st_mode):
                    found = open(path).read()
            except OSError:
                pass
print(found if found is not None else 0)
""",
}


@pytest.mark.parametrize("name", list(HACKS))
def test_reward_hacks_earn_nothing(name):
    env = _env(0, max_submissions=1)
    messages, reward, terminated, _, info = env.step(_call("submit", code=HACKS[name]))
    assert (reward, terminated, info["accepted"]) == (0.0, True, False), messages


def test_tool_errors_are_tool_messages():
    env = _env(0, run_time_limit_s=0.5)
    messages, reward, terminated, _, info = env.step(_call("run", code="print(1)", stdin="", lang="rust"))
    assert "unknown lang 'rust'" in messages[0]["content"] and not terminated
    assert info["tool_errors"] == {"tool_exception": 1}
    messages, *_ = env.step(_call("run", code="while True: pass", stdin=""))
    assert "TLE" in messages[0]["content"]


def _row(**overrides) -> dict:
    row = json.loads(_builtin_lines()[0])
    row.pop("reference_solutions")
    row.update(overrides)
    return row


def _builtin_lines() -> list[str]:
    from agentgspo.envs.codeforces import BUILTIN_DATA
    from agentgspo.envs.datafiles import builtin_path

    return builtin_path(BUILTIN_DATA).read_text().splitlines()


def test_open_r1_rows_from_jsonl_and_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    interactive = json.loads(_builtin_lines()[4])
    interactive.pop("interactor")
    rows = [_row(id="1A"), interactive]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problem_set = load_problem_set(path)
    assert [t.problem.name for t in problem_set.tasks] == ["1A"] and problem_set.skipped_interactive == 1
    assert load_problem_set(path) is problem_set
    env = CodeforcesEnv(data_files=path)
    env.reset(seed=0)
    assert env.step(_call("submit", code=A_PLUS_B))[1] == 1.0
    parquet = tmp_path / "rows.parquet"
    datasets.Dataset.from_list([_row(id="2B")]).to_parquet(str(parquet))
    assert [t.problem.name for t in load_problem_set(parquet).tasks] == ["2B"]


@pytest.mark.parametrize(
    "row, message",
    [
        ("[1]", "row 2: expected an object"),
        ({"name": "x"}, "row 2: a row in no known schema .*open-r1/codeforces: official_tests"),
        ({"id": "x"}, "row 2: not an open-r1/codeforces row: missing fields"),
        (
            {"id": "x", "time_limit": 1, "memory_limit": 256, "examples": []},
            "row 2: .*neither official_tests nor examples",
        ),
    ],
)
def test_malformed_rows_name_the_row(tmp_path, row, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_row()) + "\n" + (row if isinstance(row, str) else json.dumps(row)) + "\n")
    with pytest.raises(ValueError, match=message):
        CodeforcesEnv(data_files=path)


def test_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        CodeforcesEnv(data_files=tmp_path / "nope.jsonl")


def test_problems_are_loaded_once_per_process():
    assert CodeforcesEnv().tasks is CodeforcesEnv().tasks


def test_code_written_while_reasoning_is_not_submitted():
    """A turn without tool calls submits its last code block after ``</think>``; a block inside the reasoning is a
    draft, not a submission."""
    block = f"```python\n{A_PLUS_B}```"
    reasoning = _env(0).step(f"<think>{block}</think>Done.")
    assert reasoning[1] == 0.0 and reasoning[2] and reasoning[4]["submissions"] == []
    answer = _env(0).step(f"<think>A sum.</think>{block}")
    assert answer[1] == 1.0 and len(answer[4]["submissions"]) == 1


# ----------------------------------------------------------------------------------------------- other sources

FIXTURES = __import__("pathlib").Path(__file__).parents[1] / "eval" / "fixtures"  # tests/eval/fixtures


def test_each_source_gives_tasks_with_metadata_and_shipped_solutions():
    open_r1 = load_problem_set(FIXTURES / "openr1_rows.jsonl").tasks[0]
    assert open_r1.metadata == {
        "id": "9100A",
        "title": "Any Divisor",
        "rating": 900,
        "tags": ["math", "number theory"],
        "source": "open-r1",
        "contest_id": "9100",
        "official_tests_complete": True,
    }
    assert open_r1.problem.checker.startswith("openr1:") and "py" in open_r1.references
    contests = load_problem_set(FIXTURES / "code_contests_rows.jsonl").tasks[0]
    assert (contests.problem.time_limit_s, contests.problem.memory_limit_mb) == (1.5, 256.0)
    assert [t.name for t in contests.problem.tests] == [str(i) for i in range(1, 8)]  # public, private, generated
    assert len(contests.problem.samples) == 1 and set(contests.references) == {"py", "cpp"}  # Python 2 dropped
    assert contests.metadata["rating"] == 800 and [w["name"] for w in contests.wrong] == ["incorrect_1"]
    kattis = load_problem_set(FIXTURES / "kattis" / "meanvalue").tasks[0]
    assert kattis.metadata["source"] == "kattis" and kattis.wrong[0]["name"] == "wrong_answer/floor.py"
    assert "## Example 1" in kattis.statement and kattis.problem.checker.startswith("icpc")
    lcb = load_problem_set(FIXTURES / "livecodebench_rows.jsonl")
    assert [t.metadata["id"] for t in lcb.tasks] == ["fixture_abc001_a"]
    assert lcb.skipped == {"functional (LeetCode-style) tests": 1}
    assert len(lcb.tasks[0].problem.tests) == 6 and lcb.tasks[0].metadata["platform"] == "atcoder"  # public too


def test_livecodebench_test_cases_never_unpickle_objects(tmp_path):
    import base64
    import collections
    import pickle
    import zlib

    from agentgspo.envs.codeforces_sources import livecodebench_tests

    hostile = base64.b64encode(zlib.compress(pickle.dumps(collections.OrderedDict(a=1)))).decode()
    with pytest.raises(ValueError, match="refusing collections.OrderedDict"):
        livecodebench_tests(hostile, "private_test_cases")
    row = json.loads((FIXTURES / "livecodebench_rows.jsonl").read_text().splitlines()[0])
    row["private_test_cases"] = hostile
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r"rows.jsonl: row 1: private_test_cases: .*refusing"):
        CodeforcesEnv(data_files=path)


def test_a_folder_without_problems_names_the_fix(tmp_path):
    with pytest.raises(ValueError, match="not a problem folder"):
        CodeforcesEnv(data_files=tmp_path)


def test_excluded_problems_are_never_posed_and_bad_ids_name_the_close_ones():
    env = CodeforcesEnv(exclude=["9000C", "9000E"])
    posed = {env.reset(seed=seed)[1]["problem"] for seed in range(20)}
    names = {t.metadata["id"]: t.problem.name for t in load_problem_set().tasks}
    assert posed == {names["9000A"], names["9000B"], names["9000D"]}
    with pytest.raises(ValueError, match=r"exclude: no problem '9000X' .*close ones: 9000"):
        CodeforcesEnv(exclude=["9000X"])
    with pytest.raises(ValueError, match="leaves none of the 5 problems"):
        CodeforcesEnv(exclude=["9000A", "9000B", "9000C", "9000D", "9000E"])
    with pytest.raises(ValueError, match="expected a list of problem ids"):
        CodeforcesEnv(exclude="9000A")


@pytest.fixture(scope="module")
def remote_sandbox():
    """A real sandbox server on 127.0.0.1 and a remote backend pointed at it."""
    from servers import serve

    from agentgspo.sandboxes.remote import RemoteSandbox
    from agentgspo.sandboxes.server import create_app

    with serve(create_app("codeforces-token", max_concurrency=2)) as url:
        yield RemoteSandbox([url], token="codeforces-token")


def test_the_tools_show_the_same_through_a_sandbox_server(remote_sandbox):
    """`run` and `run_samples` show the program's output (a capture checker); as a checker object it could not
    travel to a server, and both tools failed there with a tool error while `submit` still worked."""

    def shown(sandbox, index: int, call: str) -> str:
        messages, *_ = _env(index, sandbox=sandbox).step(call)
        return re.sub(r"\d+\.\d+ s|\d+ MB", "T", messages[0]["content"])  # times and memory vary between runs

    calls = [
        (0, _call("run", code=A_PLUS_B, stdin="20 22")),
        (3, _call("run_samples", code="print('YES')\nprint('YES')")),  # WA: shows the output it got
        (0, _call("run_samples", code=A_PLUS_B)),
    ]
    for index, call in calls:
        local, remote = shown("local", index, call), shown(remote_sandbox, index, call)
        assert local == remote and "Error" not in remote, (local, remote)
    assert "42" in shown(remote_sandbox, 0, calls[0][1]) and "got:\nYES\nYES" in shown(remote_sandbox, 3, calls[1][1])
