"""testlib jury programs from C++ source: compiled against a testlib.h, cached, exit codes read as testlib defines
them (a small testlib-compatible header of our own stands in for testlib: tests/sandboxes/fixtures/testlib_mini)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentgspo.sandboxes import Limits, Verdict, judge
from agentgspo.sandboxes.judge import testlib
from agentgspo.sandboxes.judge.checkers import make_checker

MINI = Path(__file__).parent / "fixtures" / "testlib_mini"
BINARY_SEARCH = (MINI.parent / "interactive" / "binary_search.py").read_text()
LIMITS = Limits(time_limit_s=1, memory_limit_mb=128, wall_limit_s=3)
SUM_TESTS = [("1 2\n", "3\n"), ("10 20 30\n", "60\n")]
SUM_PY = "print(sum(map(int, input().split())))\n"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile C++ jury programs")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private compile cache per test."""
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(testlib.HEADER_ENV, raising=False)
    return tmp_path / "cache"


@pytest.mark.parametrize(
    "solution, expected",
    [
        (SUM_PY, Verdict.AC),
        ("print(sum(map(int, input().split())) + 1)\n", Verdict.WA),
        ("print('three')\n", Verdict.PE),
        ("print(sum(map(int, input().split())), 0)\n", Verdict.PE),  # extra output after what the checker read
    ],
    ids=["ok", "wa", "pe-not-a-number", "pe-extra-output"],
)
def test_cpp_checker_source_is_compiled_and_its_exit_codes_read(cache, solution, expected):
    result = judge(solution, SUM_TESTS, checker=f"testlib:{MINI / 'sum_check.cpp'}", limits=LIMITS)
    assert result.verdict == expected, result.to_dict()
    assert all(t.score is None for t in result.tests)


def test_points_and_partial_scores_are_kept_as_a_score(cache):
    points = judge(
        "print(7.5)\n", [("", "8\n"), ("", "5\n")], checker=f"testlib:{MINI / 'points_check.cpp'}", limits=LIMITS
    )
    assert points.verdict == Verdict.AC and [t.score for t in points.tests] == [9.5, 7.5], points.to_dict()
    partial = judge(
        "print('a x c')\n", [("", "a b c\n")], checker=f"testlib:{MINI / 'partial_check.cpp'}", limits=LIMITS
    )
    assert partial.verdict == Verdict.AC and partial.tests[0].score == 2.0, partial.to_dict()
    assert "partially correct (2)" in partial.tests[0].message


def test_checker_fail_is_a_judge_error_naming_the_checkers_message(cache):
    result = judge("print(1)\n", [("", "fail\n")], checker=f"testlib:{MINI / 'points_check.cpp'}", limits=LIMITS)
    assert result.verdict == Verdict.JE
    assert "FAIL" in result.tests[0].message and "the jury's answer says the test is broken" in result.tests[0].message


def test_a_checker_that_does_not_compile_is_refused_before_judging(cache):
    with pytest.raises(ValueError, match=r"broken_check\.cpp.*does not compile(.|\n)*error"):
        judge(SUM_PY, SUM_TESTS, checker=f"testlib:{MINI / 'broken_check.cpp'}", limits=LIMITS)


def test_without_a_testlib_header_the_source_is_refused_naming_the_fix(cache, tmp_path):
    lonely = tmp_path / "alone" / "check.cpp"
    lonely.parent.mkdir()
    shutil.copy(MINI / "sum_check.cpp", lonely)
    with pytest.raises(ValueError, match=r"no testlib\.h was found(.|\n)*--testlib-h"):
        make_checker(f"testlib:{lonely}")
    # ...and found when named: the argument, or the environment
    assert make_checker(f"testlib:{lonely}", testlib_h=MINI / "testlib.h").check(b"1 2", b"3", b"3")[0] == Verdict.AC
    os.environ[testlib.HEADER_ENV] = str(MINI / "testlib.h")
    try:
        assert make_checker(f"testlib:{lonely}").check(b"", b"4", b"3")[0] == Verdict.WA
    finally:
        del os.environ[testlib.HEADER_ENV]
    with pytest.raises(ValueError, match="is not a file"):
        make_checker(f"testlib:{lonely}", testlib_h=tmp_path / "missing.h")


def test_compiled_programs_are_cached_by_content(cache, tmp_path):
    first = testlib.compile_testlib_program(MINI / "sum_check.cpp")
    stamp = first.stat().st_mtime_ns
    assert testlib.compile_testlib_program(MINI / "sum_check.cpp") == first and first.stat().st_mtime_ns == stamp
    edited = tmp_path / "edited" / "sum_check.cpp"
    edited.parent.mkdir()
    edited.write_text((MINI / "sum_check.cpp").read_text() + "\n// edited\n")
    shutil.copy(MINI / "testlib.h", edited.parent / "testlib.h")
    assert testlib.compile_testlib_program(edited) != first
    # one precompiled testlib.h per header content, shared by the programs compiled against it
    assert len(list((cache / "testlib" / "headers").glob("*/testlib.h.gch"))) == 1


@pytest.mark.parametrize(
    "code, message, expected",
    [
        (0, "ok 3", (Verdict.AC, None)),
        (1, "wrong answer", (Verdict.WA, None)),
        (2, "wrong output format", (Verdict.PE, None)),
        (4, "wrong output format Extra information", (Verdict.PE, None)),  # _dirt
        (8, "unexpected eof", (Verdict.PE, None)),  # builds with ENABLE_UNEXPECTED_EOF
        (3, "FAIL bad test", (Verdict.JE, None)),
        (7, "points 12.5 close", (Verdict.AC, 12.5)),
        (7, "debug line\npoints 3 close", (Verdict.AC, 3.0)),
        (7, "points points_info=x", (Verdict.AC, None)),  # quitpi: information, no points value to keep
        (7, "points", (Verdict.JE, None)),
        (16, "partially correct (0)", (Verdict.AC, 0.0)),
        (66, "partially correct (50)", (Verdict.AC, 50.0)),
        (5, "?", (Verdict.JE, None)),
        (-11, "", (Verdict.JE, None)),
    ],
)
def test_testlib_exit_code_table(code, message, expected):
    verdict, text, score = testlib.testlib_outcome(code, message)
    assert (verdict, score) == expected
    if verdict == Verdict.JE:
        assert message in text


def test_read_points():
    assert testlib.read_points("points 1e3 x") == 1000.0
    assert testlib.read_points("points nan") is None and testlib.read_points("ok 1") is None


WRONG_GUESS = "n = int(input())\nprint('!', n + 1, flush=True)\n"
GUESS_TESTS = [("100 37\n", ""), ("1000 1\n", ""), ("16 16\n", "")]


@pytest.mark.parametrize(
    "solution, expected",
    [
        (BINARY_SEARCH, Verdict.AC),
        (WRONG_GUESS, Verdict.WA),
        ("n = int(input())\nprint('hello', flush=True)\n", Verdict.PE),
    ],
)
def test_cpp_interactor_source_is_compiled_and_its_exit_codes_read(cache, solution, expected):
    result = judge(solution, GUESS_TESTS, interactor=MINI / "guess_interactor.cpp", limits=LIMITS)
    assert result.verdict == expected, result.to_dict()


def test_an_interactor_that_does_not_compile_is_refused_before_judging(cache, tmp_path):
    broken = tmp_path / "interactor.cpp"
    broken.write_text('#include "testlib.h"\nint main() { return }\n')
    with pytest.raises(ValueError, match="does not compile"):
        judge(BINARY_SEARCH, GUESS_TESTS, interactor=broken, testlib_h=MINI / "testlib.h", limits=LIMITS)


def test_interactor_fail_beats_the_solutions_own_failure(cache):
    """Verdict rule 1: the interactor's FAIL (a broken test) is a judge error even when the solution also fails."""
    spinning = "while True:\n    pass\n"
    result = judge(spinning, [("not numbers\n", "")], interactor=MINI / "guess_interactor.cpp", limits=LIMITS)
    assert result.verdict == Verdict.JE and "FAIL" in result.tests[0].message, result.to_dict()


def test_remote_backend_gets_the_checker_compiled_here(cache):
    """The server has no testlib.h: the checker compiled on the client travels instead of its source."""
    from servers import serve

    from agentgspo.sandboxes import get_sandbox
    from agentgspo.sandboxes.server import create_app

    with serve(create_app("token", max_concurrency=1)) as url:
        remote = get_sandbox("remote", endpoints=[url], token="token")
        result = judge(
            SUM_PY,
            SUM_TESTS + [("1 1\n", "3\n")],
            checker=f"testlib:{MINI / 'sum_check.cpp'}",
            limits=LIMITS,
            backend=remote,
        )
    assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.AC, Verdict.WA], result.to_dict()
