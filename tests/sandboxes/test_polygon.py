"""Polygon packages: problem.xml read for limits, tests, checker and interactor; C++ jury programs compiled against
the package's testlib.h (our small stand-in header, see fixtures/testlib_mini); what cannot be judged is refused;
for an env, the statement from any of Polygon's three layouts and the solutions by their tags (played and evaluated
end to end in tests/eval/test_problem_formats.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentgspo.sandboxes import Verdict
from agentgspo.sandboxes.judge.formats.polygon import load_polygon_problem, polygon_package
from agentgspo.sandboxes.judge.problems import judge_problem, load_any_problem

FIXTURES = Path(__file__).parent / "fixtures"
BINARY_SEARCH = (FIXTURES / "interactive" / "binary_search.py").read_text()
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile C++ jury programs")
SUM_PY = "print(sum(map(int, input().split())))\n"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target, symlinks=False)
    return target


def test_batch_package_limits_tests_and_checker():
    problem = load_any_problem(FIXTURES / "polygon_sum")
    assert (problem.name, problem.time_limit_s, problem.memory_limit_mb) == ("sum", 1.0, 256.0)
    assert [t.name for t in problem.tests] == ["01", "02", "03"] and [t.name for t in problem.samples] == ["01"]
    assert problem.metadata["points"] == {"02": 40.0, "03": 60.0}
    assert problem.checker.startswith("testlib:") and not problem.interactive
    assert judge_problem(problem, SUM_PY).verdict == Verdict.AC
    assert judge_problem(problem, "print(0)\n").verdict == Verdict.WA
    assert judge_problem(problem, "print('zero')\n").verdict == Verdict.PE


@pytest.mark.parametrize(
    "solution, expected",
    [
        (BINARY_SEARCH, Verdict.AC),
        ("n = int(input())\nprint('? 1', flush=True)\ninput()\n" + BINARY_SEARCH.split("\n", 1)[1], Verdict.WA),
        ("n = int(input())\nprint('!', n + 1, flush=True)\n", Verdict.WA),
    ],
    ids=["binary-search", "one-query-too-many-for-the-checker", "wrong-guess"],
)
def test_interactive_package_runs_interactor_then_checker_on_its_output(solution, expected):
    problem = load_polygon_problem(FIXTURES / "polygon_guess")
    assert problem.interactive and problem.interactor
    result = judge_problem(problem, solution)
    assert result.verdict == expected, result.to_dict()


def test_missing_test_or_answer_is_refused(tmp_path):
    package = _copy("polygon_sum", tmp_path)
    (package / "tests" / "02.a").unlink()
    with pytest.raises(ValueError, match=r"answer of test 2 .*doall\.sh"):
        load_polygon_problem(package)
    (package / "tests" / "02").unlink()
    with pytest.raises(ValueError, match=r"test 2 \(02\) is missing"):
        load_polygon_problem(package)


@pytest.mark.parametrize(
    "edit, message",
    [
        (('input-file=""', 'input-file="sum.in"'), "file I/O through 'sum.in'"),
        (('<testset name="tests">', '<testset name="pretests">'), "no testset 'tests'"),
        (('<checker type="testlib">', '<checker type="exe">'), "checker type 'exe' is not supported"),
        (("files/check.cpp", "files/check.pas"), "check.pas' is missing"),
    ],
)
def test_unsupported_package_features_are_refused(tmp_path, edit, message):
    package = _copy("polygon_sum", tmp_path)
    xml = package / "problem.xml"
    xml.write_text(xml.read_text().replace(*edit))
    with pytest.raises(ValueError, match=message):
        load_polygon_problem(package)


def test_a_checker_that_does_not_compile_is_refused_at_load(tmp_path):
    package = _copy("polygon_sum", tmp_path)
    (package / "files" / "check.cpp").write_text('#include "testlib.h"\nint main() { quitf(_ok, "x") }\n')
    with pytest.raises(ValueError, match="does not compile"):
        load_polygon_problem(package)


def test_file_io_package(tmp_path):
    package = _copy("polygon_sum", tmp_path)
    xml = package / "problem.xml"
    xml.write_text(
        xml.read_text().replace('input-file="" output-file=""', 'input-file="input.txt" output-file="output.txt"')
    )
    problem = load_polygon_problem(package)
    assert problem.io_mode == "file"
    reads_file = "open('output.txt', 'w').write(str(sum(map(int, open('input.txt').read().split()))))\n"
    assert judge_problem(problem, reads_file).verdict == Verdict.AC


def test_cli_judges_a_polygon_package(tmp_path, capsys):
    import json

    from agentgspo.cli import main

    solution = tmp_path / "sum.py"
    solution.write_text(SUM_PY)
    assert main(["judge", "--problem", str(FIXTURES / "polygon_sum"), "--solution", str(solution), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "AC"
    lonely = _copy("polygon_sum", tmp_path)
    (lonely / "files" / "testlib.h").unlink()
    assert main(["judge", "--problem", str(lonely), "--solution", str(solution)]) == 2
    assert "no testlib.h was found" in capsys.readouterr().err
    header = FIXTURES / "testlib_mini" / "testlib.h"
    assert main(["judge", "--problem", str(lonely), "--solution", str(solution), "--testlib-h", str(header)]) == 0


# ----------------------------------------------------------------------------------------------- for an env


def test_the_statement_comes_from_sections_problem_tex_or_problem_properties(tmp_path):
    sections = polygon_package(FIXTURES / "polygon_sum")  # statement-sections/english/*.tex
    assert sections.title == "Sum" and sections.statement.startswith("You are given several integers.")
    assert "## Input\nThe only line" in sections.statement and sections.note.startswith("In the first example")
    assert sections.examples == [("1 2\n", "3\n")] and sections.tags == ["implementation", "math"]
    tex = polygon_package(FIXTURES / "polygon_guess")  # statements/english/problem.tex
    assert tex.statement.startswith("The jury has chosen") and "## Interaction\nFirst read $n$" in tex.statement
    assert "exmpfile" not in tex.statement and tex.note.startswith("Binary search")
    assert tex.examples == []  # an interactive problem's tests are the interactor's input, not a transcript
    package = _copy("polygon_sum", tmp_path)
    shutil.rmtree(package / "statement-sections")
    (package / "statements" / "english").mkdir(parents=True)
    (package / "statements" / "english" / "problem-properties.json").write_text(
        json.dumps(
            {
                "name": "Sum (JSON)",
                "legend": "Add them up.",
                "input": "Integers.",
                "output": "Their sum.",
                "interaction": None,
                "notes": "",
                "sampleTests": [{"input": "1 2\n", "output": "3\n"}],
            }
        )
    )
    properties = polygon_package(package)
    assert properties.title == "Sum (JSON)" and properties.note == ""
    assert properties.statement == "Add them up.\n\n## Input\nIntegers.\n\n## Output\nTheir sum."
    shutil.rmtree(package / "statements")
    assert "no statement" in polygon_package(package).statement


def test_solutions_by_tag_main_first_other_languages_left_out(tmp_path):
    package = _copy("polygon_sum", tmp_path)
    (package / "solutions" / "slow.py").write_text("import time\ntime.sleep(5)\n")
    (package / "solutions" / "maybe.py").write_text("print(0)\n")
    (package / "solutions" / "Sum.java").write_text("class Sum {}\n")
    xml = package / "problem.xml"
    xml.write_text(
        xml.read_text().replace(
            "        </solutions>",
            """\
            <solution tag="time-limit-exceeded"><source path="solutions/slow.py" type="python.3"/></solution>
            <solution tag="time-limit-exceeded-or-accepted">
                <source path="solutions/maybe.py" type="python.3"/>
            </solution>
            <solution tag="accepted"><source path="solutions/Sum.java" type="java11"/></solution>
        </solutions>""",
        )
    )
    found = polygon_package(package)
    assert found.references == {
        "py": "print(sum(map(int, input().split())))\n",
        "cpp": (package / "solutions" / "sum.cpp").read_text(),
    }
    assert [w["name"] for w in found.wrong] == ["wrong-answer/first_two.py", "time-limit-exceeded/slow.py"]
    (package / "solutions" / "slow.py").unlink()
    with pytest.raises(ValueError, match=r"solution 'solutions/slow.py' \(tag 'time-limit-exceeded'\) is missing"):
        polygon_package(package)
