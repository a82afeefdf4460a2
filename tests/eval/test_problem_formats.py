"""Every problem-folder format of the registry (``sandboxes/judge/formats``) end to end: played in CodeForces-v0 (the
oracle solves it, its shipped wrong solution fails) and evaluated by `agentgspo eval` (the reference agent's pass@1
is 1.0, the wrong agent's 0.0); and a format added by a test with one object and one registration line is read by
`agentgspo judge`, CodeForces-v0 and `agentgspo eval`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.cli import main
from agentgspo.environments.env_checker import play
from agentgspo.environments.tool_calls import ToolCall
from agentgspo.envs.codeforces import load_problem_set
from agentgspo.sandboxes import Problem
from agentgspo.sandboxes import TestCase as Case  # not collected as a test class
from agentgspo.sandboxes.judge.formats import FORMATS, ProblemFormat, ProblemPackage, register_format, unregister_format
from eval_cli import results, run_eval  # tests/eval/eval_cli.py

TESTS = Path(__file__).parents[1]
NEEDS_GPP = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ compiles the Polygon testlib checkers")
#: a folder of each registered format (the id's first word), each shipping a reference and a wrong solution
FOLDERS = {
    "own": TESTS / "sandboxes" / "fixtures" / "own_sum",
    "kattis": TESTS / "eval" / "fixtures" / "kattis" / "meanvalue",
    "polygon": TESTS / "sandboxes" / "fixtures" / "polygon_sum",
    "polygon-interactive": TESTS / "sandboxes" / "fixtures" / "polygon_guess",
}
CASES = [pytest.param(name, marks=NEEDS_GPP) if name.startswith("polygon") else name for name in FOLDERS]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))


def _submit(solution: dict) -> str:
    return ToolCall(
        "submit", {"code": solution["code"], "lang": "python" if solution["lang"] == "py" else "cpp"}
    ).to_text()


def test_every_registered_format_has_a_folder_here():
    assert {name.split("-")[0] for name in FOLDERS} == set(FORMATS)


@pytest.mark.parametrize("name", CASES)
def test_each_registered_format_plays_in_codeforces_v0(name):
    env = gym.make("agentgspo/CodeForces-v0", data_files=str(FOLDERS[name]), sandbox="local")
    gold, terminated, history = play(env, env.unwrapped.oracle, seed=0)
    assert (gold, terminated) == (1.0, True), history
    task = env.unwrapped.task
    assert task.metadata["source"] == name.split("-")[0] and task.wrong
    env.reset(seed=0)
    _, reward, _, _, info = env.step(_submit(task.wrong[0]))
    assert reward == 0.0 and not info["accepted"] and info["submissions"][0]["verdict"] == "WA", info


@pytest.mark.parametrize("name", CASES)
def test_each_registered_format_evaluates(tmp_path, capsys, name):
    good = run_eval(capsys, tmp_path / "ref", "--problems", str(FOLDERS[name]), "--agent", "reference")
    assert good["pass@1"] == 1.0 and good["judge_error_rate"] == 0.0
    bad = run_eval(capsys, tmp_path / "wrong", "--problems", str(FOLDERS[name]), "--agent", "wrong")
    assert bad["pass@1"] == 0.0 and bad["verdicts"] == {"WA": 1}
    task = load_problem_set(FOLDERS[name]).tasks[0]
    said = [m["content"] for m in results(tmp_path / "wrong")[0]["trajectory"]["messages"] if m["role"] == "assistant"]
    assert said[0].startswith(f"Using {task.wrong[0]['name']}.")  # the package's own wrong solution, not print(0)


# ----------------------------------------------------------------------------------------------- a new format


def _pairs_problem(directory: Path) -> Problem:
    data = json.loads((Path(directory) / "pairs.json").read_text())
    tests = [Case(given.encode(), expected.encode(), str(n)) for n, (given, expected) in enumerate(data["tests"], 1)]
    return Problem(data["name"], tests, time_limit_s=2.0, samples=tests[:1])


def _pairs_package(directory: Path) -> ProblemPackage:
    data = json.loads((Path(directory) / "pairs.json").read_text())
    return ProblemPackage(
        _pairs_problem(directory),
        data["statement"],
        [tuple(data["tests"][0])],
        references={"py": data["reference"]},
        wrong=[{"name": "pairs-wrong", "lang": "py", "code": data["wrong"]}],
    )


# The whole format: one object ...
PAIRS = ProblemFormat(
    name="pairs",
    marker="pairs.json",
    description="pairs file",
    load_problem=_pairs_problem,
    load_package=_pairs_package,
)


@pytest.fixture
def pairs_folder(tmp_path):
    register_format(PAIRS)  # ... and one registration line
    folder = tmp_path / "problems" / "double"
    folder.mkdir(parents=True)
    (folder / "pairs.json").write_text(
        json.dumps(
            {
                "name": "double",
                "statement": "Print twice the number.",
                "tests": [["2\n", "4\n"], ["21\n", "42\n"]],
                "reference": "print(2 * int(input()))\n",
                "wrong": "print(int(input()) + 2)\n",
            }
        )
    )
    yield folder
    unregister_format("pairs")


def test_a_format_registered_with_one_object_and_one_line_reaches_the_judge_the_env_and_eval(
    tmp_path, capsys, pairs_folder
):
    solution = tmp_path / "double.py"
    solution.write_text("print(2 * int(input()))\n")
    assert main(["judge", "--problem", str(pairs_folder), "--solution", str(solution), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "AC"
    solution.write_text("print(int(input()) + 2)\n")  # right on 2, wrong on 21
    assert main(["judge", "--problem", str(pairs_folder), "--solution", str(solution)]) == 1

    env = gym.make("agentgspo/CodeForces-v0", data_files=str(pairs_folder), sandbox="local")
    gold, terminated, history = play(env, env.unwrapped.oracle, seed=0)
    assert (gold, terminated) == (1.0, True), history
    assert env.unwrapped.task.metadata["source"] == "pairs" and "Print twice" in history[1]["content"]

    assert run_eval(capsys, tmp_path / "ref", "--problems", str(pairs_folder), "--agent", "reference")["pass@1"] == 1.0
    assert run_eval(capsys, tmp_path / "wrong", "--problems", str(pairs_folder), "--agent", "wrong")["pass@1"] == 0.0


@NEEDS_GPP
def test_a_folder_of_folders_in_different_formats_gives_all_of_them(tmp_path, pairs_folder):
    shutil.copytree(FOLDERS["polygon"], pairs_folder.parent / "sum")
    shutil.copytree(FOLDERS["own"], pairs_folder.parent / "own-sum")
    (pairs_folder.parent / "notes").mkdir()  # a folder in no format is not a problem
    tasks = load_problem_set(pairs_folder.parent).tasks
    assert [(t.metadata["id"], t.metadata["source"]) for t in tasks] == [
        ("double", "pairs"),
        ("own-sum", "own"),
        ("sum", "polygon"),
    ]


def test_a_format_clashing_with_a_registered_one_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"clashes with the registered format 'polygon' \(problem.xml\)"):
        register_format(
            ProblemFormat(
                name="other",
                marker="problem.xml",
                description="x",
                load_problem=_pairs_problem,
                load_package=_pairs_package,
            )
        )
    with pytest.raises(ValueError, match="marker: expected a file name"):
        ProblemFormat(
            name="other", marker="a/b.xml", description="x", load_problem=_pairs_problem, load_package=_pairs_package
        )


def test_a_folder_in_no_format_names_every_registered_marker(tmp_path, capsys):
    solution = tmp_path / "a.py"
    solution.write_text("print(1)\n")
    assert main(["judge", "--problem", str(tmp_path), "--solution", str(solution)]) == 2
    error = capsys.readouterr().err
    assert all(f.marker in error for f in FORMATS.values()) and "Polygon package" in error
    with pytest.raises(ValueError, match=r"none of problem.json .*problem.xml \(Polygon package\)"):
        load_problem_set(tmp_path)
