"""Problem formats (own, ICPC/Kattis, open-r1/codeforces rows) and the `agentgspo judge` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentgspo.cli import main
from agentgspo.sandboxes import (
    Verdict,
    judge_problem,
    load_kattis_problem,
    load_problem,
    problem_from_codeforces_row,
    read_tests_dir,
)

FIXTURES = Path(__file__).parent / "fixtures"
APLUSB = "a, b = map(int, input().split())\nprint(a + b)\n"


def _write_tests(directory: Path, pairs) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, (inp, ans) in enumerate(pairs, 1):
        (directory / f"{i}.in").write_text(inp)
        (directory / f"{i}.ans").write_text(ans)


def _kattis_yaml(directory: Path, text: str) -> None:
    """A Kattis package's problem.yaml, with a fixed time limit (.timelimit) so that nothing has to time it."""
    (directory / "problem.yaml").write_text(text)
    (directory / ".timelimit").write_text("2\n")


def test_own_format(tmp_path):
    (tmp_path / "problem.json").write_text(json.dumps({"name": "aplusb", "time_limit_s": 1, "memory_limit_mb": 64}))
    _write_tests(tmp_path / "tests", [("1 2\n", "3\n")] * 2 + [("5 6\n", "11\n")] * 9)
    problem = load_problem(tmp_path)
    assert [t.name for t in problem.tests][:3] == ["1", "2", "3"] and problem.tests[-1].name == "11"
    assert judge_problem(problem, APLUSB).verdict == Verdict.AC
    (tmp_path / "problem.json").write_text(json.dumps({"name": "x", "time_limt": 1}))
    with pytest.raises(ValueError, match="time_limt"):
        load_problem(tmp_path)


def test_missing_answer_is_a_clear_error(tmp_path):
    (tmp_path / "1.in").write_text("1 2\n")
    with pytest.raises(ValueError, match=r"1\.in.*has no answer file '1\.ans'"):
        read_tests_dir(tmp_path)


def test_kattis_package(tmp_path):
    _kattis_yaml(tmp_path, "name: Half\nvalidator_flags: float_tolerance 1e-6\nlimits:\n  memory: 128\n")
    _write_tests(tmp_path / "data" / "sample", [("1\n", "0.5\n")])
    _write_tests(tmp_path / "data" / "secret" / "group1", [("3\n", "1.5\n"), ("1\n", "0.5000000001\n")])
    problem = load_kattis_problem(tmp_path)
    assert problem.name == "Half" and problem.memory_limit_mb == 128
    assert problem.checker == "icpc:float_tolerance 1e-6"
    assert [t.name for t in problem.tests] == ["sample/1", "secret/group1/1", "secret/group1/2"]
    assert judge_problem(problem, "print(int(input()) / 2)").verdict == Verdict.AC


def test_kattis_output_validator(tmp_path):
    _kattis_yaml(tmp_path, "name: Any\nvalidation: custom\n")
    _write_tests(tmp_path / "data" / "secret", [("4\n", "2 2\n")])
    validator = tmp_path / "output_validators" / "v" / "validate.py"
    validator.parent.mkdir(parents=True)
    validator.write_text(
        "import sys\nn = int(open(sys.argv[1]).read())\na, b = map(int, sys.stdin.read().split())\n"
        "sys.exit(42 if a + b == n else 43)\n"
    )
    problem = load_kattis_problem(tmp_path)
    assert judge_problem(problem, "print(1, int(input()) - 1)").verdict == Verdict.AC
    assert judge_problem(problem, "print(1, 1)").verdict == Verdict.WA


def test_codeforces_row():
    row = json.loads((FIXTURES / "codeforces_row.json").read_text())
    problem = problem_from_codeforces_row(row)
    assert problem.name == "2050A" and len(problem.tests) == 3 and len(problem.samples) == 2
    assert problem.time_limit_s == 1.0 and problem.checker.startswith("openr1:")
    assert judge_problem(problem, APLUSB).verdict == Verdict.AC
    assert judge_problem(problem, "print(3)").verdict == Verdict.WA


def test_cli_json(tmp_path, capsys):
    _write_tests(tmp_path / "tests", [("1 2\n", "3\n"), ("2 2\n", "4\n")])
    solution = tmp_path / "sol.py"
    solution.write_text(APLUSB)
    assert main(["judge", "--tests", str(tmp_path / "tests"), "--solution", str(solution), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "AC" and {"verdict", "time_s", "memory_mb"} <= set(out["tests"][0])
    (tmp_path / "tests" / "3.in").write_text("1 1\n")
    assert main(["judge", "--tests", str(tmp_path / "tests"), "--solution", str(solution)]) == 2
    assert "3.ans" in capsys.readouterr().err
    solution.rename(tmp_path / "sol.txt")
    assert main(["judge", "--tests", str(tmp_path), "--solution", str(tmp_path / "sol.txt")]) == 2


def test_kattis_tests_come_in_problemtools_order(tmp_path):
    """problemtools lists a group's folder with sorted(os.listdir): plain name order, files and folders together."""
    _kattis_yaml(tmp_path, "name: Order\n")
    _write_tests(tmp_path / "data" / "secret" / "group2", [("1\n", "1\n")])
    _write_tests(tmp_path / "data" / "secret" / "group1", [("1\n", "1\n")] * 10)
    names = [t.name for t in load_kattis_problem(tmp_path).tests]
    assert names == [f"secret/group1/{i}" for i in (1, 10, 2, 3, 4, 5, 6, 7, 8, 9)] + ["secret/group2/1"]


def test_orphan_answer_in_a_test_group_is_a_clear_error(tmp_path):
    _kattis_yaml(tmp_path, "name: Orphan\n")
    _write_tests(tmp_path / "data" / "secret" / "group1", [("1\n", "1\n")])
    (tmp_path / "data" / "secret" / "group1" / "2.ans").write_text("2\n")
    with pytest.raises(ValueError, match=r"answer files without input.*2\.ans"):
        load_kattis_problem(tmp_path)


def test_kattis_interactive_problem_needs_its_validator(tmp_path):
    _kattis_yaml(tmp_path, "name: Guess\nproblem_format_version: 2023-07-draft\ntype: [pass-fail, interactive]\n")
    _write_tests(tmp_path / "data" / "secret", [("5\n", "\n")])
    with pytest.raises(ValueError, match="needs a custom output validator"):
        load_kattis_problem(tmp_path)


def test_kattis_custom_validation_without_a_validator_is_an_error(tmp_path):
    _kattis_yaml(tmp_path, "name: Any\nvalidation: custom\n")
    _write_tests(tmp_path / "data" / "secret", [("4\n", "2 2\n")])
    with pytest.raises(ValueError, match="output_validators"):
        load_kattis_problem(tmp_path)


def test_kattis_output_validator_folder_of_the_2023_format(tmp_path):
    _kattis_yaml(tmp_path, "name: Any\nproblem_format_version: 2023-07-draft\n")
    _write_tests(tmp_path / "data" / "secret", [("4\n", "2 2\n")])
    validator = tmp_path / "output_validator" / "validate.py"
    validator.parent.mkdir(parents=True)
    validator.write_text(
        "import sys\nn = int(open(sys.argv[1]).read())\na, b = map(int, sys.stdin.read().split())\n"
        "sys.exit(42 if a + b == n else 43)\n"
    )
    problem = load_kattis_problem(tmp_path)
    assert problem.checker == f"kattis:{validator}"
    assert judge_problem(problem, "print(1, int(input()) - 1)").verdict == Verdict.AC


def test_bad_io_mode_in_problem_json_is_a_clear_error(tmp_path):
    (tmp_path / "problem.json").write_text(json.dumps({"name": "x", "io_mode": "files"}))
    _write_tests(tmp_path / "tests", [("1 2\n", "3\n")])
    with pytest.raises(ValueError, match="io_mode"):
        load_problem(tmp_path)


def test_codeforces_row_with_a_test_without_output_is_a_clear_error():
    row = json.loads((FIXTURES / "codeforces_row.json").read_text())
    row["official_tests"][1]["output"] = None
    with pytest.raises(ValueError, match=r"official_tests: test 2.*output"):
        problem_from_codeforces_row(row)


def test_kattis_default_validator_follows_validator_flags(tmp_path):
    """Kattis's default validator: case-insensitive unless case_sensitive; absolute-only tolerance stays absolute."""
    _kattis_yaml(tmp_path, "name: YesNo\n")
    _write_tests(tmp_path / "data" / "secret", [("1\n", "YES\n")])
    problem = load_kattis_problem(tmp_path)
    assert problem.checker == "icpc"
    assert judge_problem(problem, "print('yes')").verdict == Verdict.AC  # Kattis accepts any case by default
    _kattis_yaml(tmp_path, "name: YesNo\nvalidator_flags: case_sensitive\n")
    assert judge_problem(load_kattis_problem(tmp_path), "print('yes')").verdict == Verdict.WA
    _kattis_yaml(tmp_path, "name: Big\nvalidator_flags: float_absolute_tolerance 1e-3\n")
    _write_tests(tmp_path / "data" / "secret", [("1\n", "1000000\n")])
    # 1000000.5 is within a relative 1e-3 but not within the absolute 1e-3 the package asks for.
    assert judge_problem(load_kattis_problem(tmp_path), "print(1000000.5)").verdict == Verdict.WA
    assert judge_problem(load_kattis_problem(tmp_path), "print(1000000.0004)").verdict == Verdict.AC


def test_kattis_bad_validator_flags_are_a_clear_error(tmp_path):
    _kattis_yaml(tmp_path, "name: X\nvalidator_flags: float_tolerance\n")
    _write_tests(tmp_path / "data" / "secret", [("1\n", "1\n")])
    with pytest.raises(ValueError, match=r"problem\.yaml.*float_tolerance needs a finite tolerance"):
        load_kattis_problem(tmp_path)
    _kattis_yaml(tmp_path, "name: X\nvalidator_flags: case_insensitive\n")
    with pytest.raises(ValueError, match="unknown flag 'case_insensitive'"):
        load_kattis_problem(tmp_path)


def test_cli_judges_a_kattis_package(tmp_path, capsys):
    solution = tmp_path / "double.py"
    solution.write_text("print(2 * int(input()))\n")
    assert main(["judge", "--problem", str(FIXTURES / "kattis_scoring"), "--solution", str(solution), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "AC" and out["score"] == 100 and out["groups"][-1]["name"] == "data"
    solution.write_text("print('x' * 2000000)\n")  # 2 MB: over an output limit of 1 MB
    assert (
        main(
            [
                "judge",
                "--problem",
                str(FIXTURES / "kattis_scoring"),
                "--solution",
                str(solution),
                "--json",
                "--output-limit",
                "1",
            ]
        )
        == 1
    )
    assert json.loads(capsys.readouterr().out)["tests"][0]["verdict"] == "OLE"


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("Sol.java", "class Sol {}", "is Java: not supported; the judge runs Python 3"),
        ("sol.py", "#!/usr/bin/env python2\nprint 1\n", "is Python 2"),
        ("sol.rs", "fn main() {}", "is Rust: not supported"),
    ],
)
def test_cli_refuses_other_languages_by_name(tmp_path, capsys, name, text, message):
    (tmp_path / name).write_text(text)
    assert main(["judge", "--problem", str(FIXTURES / "kattis_scoring"), "--solution", str(tmp_path / name)]) == 2
    assert message in capsys.readouterr().err


def test_cli_tests_given_a_problem_folder_points_at_its_tests(tmp_path, capsys):
    (tmp_path / "problem.json").write_text(json.dumps({"name": "aplusb"}))
    _write_tests(tmp_path / "tests", [("1 2\n", "3\n")])
    (tmp_path / "sol.py").write_text(APLUSB)
    assert main(["judge", "--tests", str(tmp_path), "--solution", str(tmp_path / "sol.py")]) == 2
    err = capsys.readouterr().err
    assert f"--tests {tmp_path / 'tests'}" in err and f"--problem {tmp_path}" in err
    assert main(["judge", "--problem", str(tmp_path), "--solution", str(tmp_path / "sol.py")]) == 0


def test_problem_json_typo_names_the_field_it_meant(tmp_path):
    (tmp_path / "problem.json").write_text(json.dumps({"name": "x", "time_limit": 1}))
    _write_tests(tmp_path / "tests", [("1 2\n", "3\n")])
    with pytest.raises(ValueError, match="unknown field 'time_limit': did you mean 'time_limit_s'"):
        load_problem(tmp_path)


def test_cli_testlib_header_only_where_it_is_used(tmp_path, capsys):
    (tmp_path / "sol.py").write_text("print(2 * int(input()))\n")
    assert (
        main(
            [
                "judge",
                "--problem",
                str(FIXTURES / "kattis_scoring"),
                "--solution",
                str(tmp_path / "sol.py"),
                "--testlib-h",
                str(tmp_path / "testlib.h"),
            ]
        )
        == 2
    )
    assert "--testlib-h goes with --tests or a Polygon package" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("pypy3") is None, reason="pypy3 not installed: sudo bash .ci/setup_sandboxes.sh")
def test_cli_lang_takes_every_language_the_judge_runs(tmp_path, capsys):
    _write_tests(tmp_path / "tests", [("1 2\n", "3\n")])
    (tmp_path / "sol.txt").write_text(APLUSB)  # no suffix to go by: --lang says it
    argv = ["judge", "--tests", str(tmp_path / "tests"), "--solution", str(tmp_path / "sol.txt"), "--json"]
    assert main([*argv, "--lang", "pypy3"]) == 0  # the choices were py|cpp only
    assert json.loads(capsys.readouterr().out)["verdict"] == "AC"
    with pytest.raises(SystemExit):
        main([*argv, "--lang", "rust"])
    assert "Rust is not supported: expected one of python3" in capsys.readouterr().err
