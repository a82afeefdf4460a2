"""ICPC/Kattis packages judged as problemtools does: validators, groups, grading, interaction, refusals.

The packages under fixtures/kattis_* are written for these tests in the package format (legacy and 2023-07).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentgspo.sandboxes import Verdict, judge_kattis, judge_problem, load_kattis_package, load_kattis_problem
from agentgspo.sandboxes.judge.checkers import IcpcDefaultChecker
from agentgspo.sandboxes.judge.formats.kattis import time_limit_of
from agentgspo.sandboxes.judge.formats.kattis_grading import Graded, grade

FIXTURES = Path(__file__).parent / "fixtures"
SUM_PY = "n = int(input())\nprint(n // 2, n - n // 2)\n"
SUM_CPP = '#include <cstdio>\nint main(){long long n;scanf("%lld",&n);printf("%lld %lld\\n",n/2,n-n/2);}\n'
SUM_ZERO = "n = int(input())\nprint(0, n)\n"  # right except in the group whose flags ask for positive numbers
GUESS = (FIXTURES / "kattis_guess" / "submissions" / "accepted" / "binary_search.py").read_text()
GUESS_LINEAR = "for g in range(1, 101):\n    print(g, flush=True)\n    if input() == 'correct':\n        break\n"
DOUBLE = "print(2 * int(input()))\n"
DOUBLE_INT64 = '#include <cstdio>\nint main(){long long n;scanf("%lld",&n);printf("%lld\\n",2*n);}\n'


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


@pytest.mark.parametrize(
    "flags, output, answer, expected",
    [
        ("float_tolerance 1e-6", b"0x10", b"16", Verdict.AC),  # C's strtod reads hex floats
        ("float_tolerance 1e-6", b"0x1.8p1 -0x.8", b"3 -0.5", Verdict.AC),
        ("", b"0x10", b"16", Verdict.WA),  # without a tolerance: text
        ("float_absolute_tolerance 0.5", b"inf", b"1", Verdict.WA),  # only finite numbers are numbers
        ("float_tolerance 0.5", b"INF", b"inf", Verdict.AC),  # a non-number answer compares as text
        ("float_tolerance 1e-9", b"2.0e2", b"200", Verdict.AC),
        ("case_sensitive", b"Yes", b"yes", Verdict.WA),
        ("space_change_sensitive", b"1  2\n", b"1 2\n", Verdict.WA),
        ("", b"1 2\n\n", b"1\n2", Verdict.AC),
    ],
)
def test_default_validator_rules(flags, output, answer, expected):
    assert IcpcDefaultChecker.from_flags(flags).check(b"", output, answer)[0] == expected


def test_cpp_validator_with_group_flags_compiled_once(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))
    package = load_kattis_package(FIXTURES / "kattis_sum")
    assert package.fixed_time_limit_s == 1.0 and package.time_limit_source == ".timelimit"
    assert [t.name for t in package.tests()] == ["sample/1", "secret/plain/1", "secret/plain/2", "secret/strict/1"]
    binaries = list((tmp_path / "cache" / "kattis-validators").glob("*/validator"))
    assert len(binaries) == 1
    built = binaries[0].stat().st_mtime_ns
    assert judge_kattis(package, SUM_PY).verdict == Verdict.AC
    assert judge_kattis(load_kattis_package(FIXTURES / "kattis_sum"), SUM_CPP, "cpp").verdict == Verdict.AC
    assert binaries[0].stat().st_mtime_ns == built  # loaded again: the cached validator, not a new build
    zero = judge_kattis(package, SUM_ZERO)
    assert zero.verdict == Verdict.WA
    strict = next(t for t in zero.tests if t.name == "secret/strict/1")
    assert strict.verdict == Verdict.WA and "positive" in strict.message  # the group's flag reached the validator
    assert [g["name"] for g in zero.groups] == [
        "data/sample",
        "data/secret/plain",
        "data/secret/strict",
        "data/secret",
        "data",
    ]


def test_break_skips_the_rest_and_a_validator_crash_is_a_judge_error(tmp_path):
    wrong = "print(1, 1)\n"
    result = judge_kattis(load_kattis_package(FIXTURES / "kattis_sum"), wrong)
    assert result.verdict == Verdict.WA
    assert [t.verdict for t in result.tests][1:] == [Verdict.SKIPPED] * 3  # sample/1 is WA; on_reject: break
    package = _copy("kattis_sum", tmp_path)
    shutil.rmtree(package / "output_validators" / "sum_validator")
    (package / "output_validators" / "py").mkdir()
    (package / "output_validators" / "py" / "validate.py").write_text(
        "import sys\nprint('cannot parse', file=sys.stderr)\nsys.exit(1)\n"
    )
    broken = judge_kattis(load_kattis_package(package), SUM_PY)
    assert broken.verdict == Verdict.JE and "exited with 1" in broken.tests[0].message
    assert "cannot parse" in broken.tests[0].message


def test_interactive_package(tmp_path):
    package = load_kattis_package(FIXTURES / "kattis_guess")
    assert package.interactive and package.samples == [] and "lower" in package.sample_interactions[0]
    assert judge_kattis(package, GUESS).verdict == Verdict.AC
    linear = judge_kattis(package, GUESS_LINEAR)  # too many guesses for 37, 64 and 100
    assert linear.verdict == Verdict.WA and "no guesses left" in linear.tests[1].message
    silent = judge_kattis(package, "import time\ntime.sleep(30)\n")
    assert silent.verdict in (Verdict.TLE, Verdict.ILE)
    assert judge_kattis(package, "print('x', flush=True)\n").verdict == Verdict.WA
    with_input = _copy("kattis_guess", tmp_path)
    (with_input / "data" / "sample" / "1.in").write_text("25\n")  # a transcript's input, no .ans: not a test
    assert [t.name for t in load_kattis_package(with_input).tests()] == [t.name for t in package.tests()]


def test_scoring_package():
    package = load_kattis_package(FIXTURES / "kattis_scoring")
    assert package.scoring and package.max_score() == 100
    full = judge_kattis(package, DOUBLE)
    assert (full.verdict, full.score) == (Verdict.AC, 100)
    partial = judge_kattis(package, DOUBLE_INT64, "cpp")  # overflows in g2 only
    assert (partial.verdict, partial.score) == (Verdict.AC, 30)  # accept_if_any_accepted: AC with a partial score
    groups = {g["name"]: (g["verdict"], g["score"]) for g in partial.groups}
    assert groups["data/secret/g1"] == ("AC", 30) and groups["data/secret/g2"] == ("WA", 0)
    sample_only_wrong = "n = int(input())\nprint(7 if n == 3 else 2 * n)\n"
    ignored = judge_kattis(package, sample_only_wrong)  # ignore_sample: the sample's WA does not count
    assert (ignored.verdict, ignored.score) == (Verdict.AC, 100)


def test_default_grader_rules():
    children = [Graded("AC", 30.0), Graded("WA", 0.0), Graded("TLE", 0.0)]
    assert (grade(children, "").verdict, grade(children, "").score) == ("TLE", 30.0)  # worst_error, sum
    assert grade(children, "first_error").verdict == "WA"
    assert (grade(children, "min accept_if_any_accepted").verdict, grade(children, "min").score) == ("AC", 0.0)
    assert grade([Graded("AC", 0.0), Graded("RTE", 5.0)], "ignore_sample avg").verdict == "RTE"
    assert grade(children, "ignore_sample").verdict == "JE"  # only for [sample, secret]


def test_time_limit_is_computed_from_the_accepted_submissions_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))
    package_dir = _copy("kattis_sum", tmp_path)
    (package_dir / ".timelimit").unlink()
    (package_dir / "problem.yaml").write_text((package_dir / "problem.yaml").read_text() + "  time_multiplier: 3\n")
    with pytest.raises(ValueError, match="no Python or C\\+\\+ submission in submissions/accepted"):
        time_limit_of(load_kattis_package(package_dir))
    (package_dir / "submissions" / "accepted").mkdir(parents=True)
    (package_dir / "submissions" / "accepted" / "Sum.java").write_text("class Sum {}")  # not run, not counted
    (package_dir / "submissions" / "accepted" / "sum.py").write_text(SUM_PY)
    problem = load_kattis_problem(package_dir)
    assert problem.time_limit_s == 1.0  # max(1, ceil(tiny runtime x 3)) seconds
    assert (
        "sum.py" in problem.metadata["time_limit_source"]
        and "x ac_to_time_limit 3" in problem.metadata["time_limit_source"]
    )
    cached = list((tmp_path / "cache" / "kattis-timelimits").glob("*.json"))
    assert len(cached) == 1
    written = cached[0].stat().st_mtime_ns
    assert load_kattis_problem(package_dir).metadata["time_limit_source"] == problem.metadata["time_limit_source"]
    assert cached[0].stat().st_mtime_ns == written  # read from the cache, not timed again
    assert list((tmp_path / "cache" / "kattis-timelimits").glob("*.json")) == cached
    assert judge_problem(problem, SUM_PY).verdict == Verdict.AC


REFUSALS = {
    "multi-pass without a validator": ("validation: custom multi-pass\n", "needs a custom output validator"),
    "submit-answer": ("problem_format_version: 2023-07-draft\ntype: submit-answer\n", "submit-answer"),
    "unknown validation": ("validation: custom interactiv\n", "unknown validation options"),
    "unknown validator flag": ("validator_flags: float_tolerence 1e-6\n", "unknown flag 'float_tolerence'"),
    "unknown type": ("problem_format_version: 2023-07-draft\ntype: scoreing\n", "unknown problem type"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_unsupported_features_are_refused_not_judged(tmp_path, case):
    yaml_text, message = REFUSALS[case]
    package = _copy("kattis_scoring", tmp_path)
    (package / "problem.yaml").write_text("name: X\n" + yaml_text + "limits:\n  time_limit: 1\n")
    with pytest.raises(ValueError, match=message):
        load_kattis_package(package)


@pytest.mark.parametrize(
    "what, change, message",
    [
        ("custom grader", lambda p: (p / "data" / "testdata.yaml").write_text("grading: custom\n"), "custom grader"),
        (
            "grader flag",
            lambda p: (p / "data" / "testdata.yaml").write_text("grader_flags: wrost_error\n"),
            "unknown grader_flags",
        ),
        ("graders/", lambda p: (p / "graders").mkdir() or (p / "graders" / "g.py").write_text(""), "custom graders"),
        ("include/", lambda p: (p / "include" / "cpp").mkdir(parents=True), "included files"),
        ("input without answer", lambda p: (p / "data" / "secret" / "g1" / "9.in").write_text("1\n"), "has no answer"),
        (
            "java validator",
            lambda p: (p / "output_validator").mkdir() or (p / "output_validator" / "Validate.java").write_text(""),
            "C, C\\+\\+ or Python",
        ),
    ],
)
def test_broken_or_unsupported_packages_name_the_problem(tmp_path, what, change, message):
    package = _copy("kattis_scoring", tmp_path)
    change(package)
    with pytest.raises(ValueError, match=message):
        load_kattis_package(package)


def test_problem_metadata_for_loaders():
    problem = load_kattis_problem(FIXTURES / "kattis_sum")
    assert problem.name == "Split the Sum" and problem.time_limit_s == 1.0 and problem.memory_limit_mb == 256
    assert [t.name for t in problem.samples] == ["sample/1"] and problem.checker.startswith("kattis:")
    assert judge_problem(problem, "print(0)\n").verdict == Verdict.WA


@pytest.mark.slow
@pytest.mark.docker
def test_docker_judges_packages_like_local(docker_backend):
    cases = [
        ("kattis_sum", SUM_ZERO, "py"),
        ("kattis_sum", SUM_CPP, "cpp"),
        ("kattis_scoring", DOUBLE_INT64, "cpp"),
        ("kattis_guess", GUESS, "py"),
        ("kattis_guess", GUESS_LINEAR, "py"),
        ("kattis_multipass", "k, x = map(int, input().split())\nprint(2 * x if k == 1 else x)\n", "py"),
    ]
    for name, source, lang in cases:
        package = load_kattis_package(FIXTURES / name)
        here, there = judge_kattis(package, source, lang), judge_kattis(package, source, lang, backend=docker_backend)
        assert (there.verdict, there.score, there.groups) == (here.verdict, here.score, here.groups), name
        assert [t.verdict for t in there.tests] == [t.verdict for t in here.tests], name


def test_validator_scores_count_only_where_the_problem_has_custom_scores(tmp_path):
    writes_score = (
        "import sys\nopen(sys.argv[3] + 'score.txt', 'w').write('7')\n"
        "sys.exit(42 if sys.stdin.read().split() == open(sys.argv[2]).read().split() else 43)\n"
    )
    scoring = _copy("kattis_scoring", tmp_path)
    (scoring / "output_validator").mkdir()
    (scoring / "output_validator" / "validate.py").write_text(writes_score)
    result = judge_kattis(load_kattis_package(scoring), DOUBLE)
    assert (result.verdict, result.score) == (Verdict.AC, 14)  # g1: min(7, 7), g2: min(7, 7); summed
    wrong = judge_kattis(load_kattis_package(scoring), "print(0)\n")
    assert wrong.verdict == Verdict.JE and "score.txt with a wrong-answer verdict" in wrong.tests[0].message
    pass_fail = _copy("kattis_sum", tmp_path)
    shutil.rmtree(pass_fail / "output_validators" / "sum_validator")
    (pass_fail / "output_validators" / "v").mkdir()
    (pass_fail / "output_validators" / "v" / "validate.py").write_text(writes_score)
    refused = judge_kattis(load_kattis_package(pass_fail), "print(2, 2)\n")
    assert refused.verdict == Verdict.JE and "no custom scores" in refused.tests[0].message


def test_a_sample_only_package_is_judged_on_its_samples(tmp_path):
    package = _copy("kattis_sum", tmp_path)
    shutil.rmtree(package / "data" / "secret")
    loaded = load_kattis_package(package)
    assert [t.name for t in loaded.tests()] == ["sample/1"]
    assert judge_kattis(loaded, SUM_PY).verdict == Verdict.AC and judge_kattis(loaded, SUM_ZERO).verdict == Verdict.AC
    shutil.rmtree(package / "data" / "sample")
    with pytest.raises(ValueError, match="no tests"):
        load_kattis_package(package)


def test_multi_pass_runs_the_submission_again_on_each_nextpass(tmp_path):
    package = load_kattis_package(FIXTURES / "kattis_multipass")
    assert package.multi_pass and package.validation_passes == 3
    assert judge_kattis(package, "k, x = map(int, input().split())\nprint(2 * x)\n").verdict == Verdict.AC
    first_pass_only = "k, x = map(int, input().split())\nprint(2 * x if k == 1 else x)\n"
    wrong = judge_kattis(package, first_pass_only)  # right on the first pass: single-pass judging said AC
    assert wrong.verdict == Verdict.WA and "pass 2" in wrong.tests[0].message
    too_few = _copy("kattis_multipass", tmp_path)
    (too_few / "problem.yaml").write_text((too_few / "problem.yaml").read_text().replace("passes: 3", "passes: 2"))
    endless = judge_kattis(load_kattis_package(too_few), "k, x = map(int, input().split())\nprint(2 * x)\n")
    assert endless.verdict == Verdict.JE and "within validation_passes = 2" in endless.tests[0].message
    (too_few / "problem.yaml").write_text((too_few / "problem.yaml").read_text().replace("passes: 2", "passes: 1"))
    with pytest.raises(ValueError, match="validation_passes: expected a whole number of passes >= 2"):
        load_kattis_package(too_few)


def test_names_statements_and_default_limits(tmp_path):
    package = _copy("kattis_scoring", tmp_path)
    loaded = load_kattis_package(package)
    assert (loaded.memory_limit_mb, loaded.output_limit_mb) == (1024, 8)  # problemtools' defaults
    (package / "problem.yaml").write_text(
        (package / "problem.yaml").read_text().replace("name: Double It", "name:\n  sv: Dubbla\n  en: Double It")
    )
    statements = package / "statement"
    statements.mkdir()
    (statements / "problem.sv.md").write_text("Dubbla talet.")
    (statements / "problem.en.tex").write_text("\\problemname{Double It}\nPrint twice the number.")
    problem = load_kattis_problem(package)
    assert problem.name == "Double It" and problem.metadata["names"]["sv"] == "Dubbla"
    assert problem.statement.endswith("Print twice the number.")  # the English statement before another language's
    (statements / "problem.md").write_text("Markdown first.")
    assert load_kattis_problem(package).statement == "Markdown first."
    (package / "problem.yaml").write_text(
        (package / "problem.yaml").read_text().split("name:")[0] + "limits:\n  time_limit: 1\n"
    )
    assert load_kattis_problem(package).name == "Double It"  # from \problemname when problem.yaml has none


def test_a_validator_that_does_not_compile_is_refused_at_load(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))
    package = _copy("kattis_sum", tmp_path)
    (package / "output_validators" / "sum_validator" / "validate.cc").write_text("int main( {\n")
    with pytest.raises(ValueError, match="sum_validator: the output validator does not compile"):
        load_kattis_package(package)
    assert not list((tmp_path / "cache" / "kattis-validators").glob("*/validator*"))  # nothing half-built left


def test_interactive_multi_pass(tmp_path):
    """The validator talks to the submission on every pass; its feedback folder (and nextpass.in) persists."""
    package = tmp_path / "echo"
    (package / "data" / "secret").mkdir(parents=True)
    (package / "output_validator").mkdir()
    (package / "problem.yaml").write_text(
        "problem_format_version: 2023-07-draft\nname: Echo Up\n"
        "type: [interactive, multi-pass]\nlimits:\n  time_limit: 1\n"
    )
    (package / "data" / "secret" / "1.in").write_text("1\n")
    (package / "data" / "secret" / "1.ans").write_text("\n")
    (package / "output_validator" / "validate.py").write_text(
        "import sys\nk = int(open(sys.argv[1]).read())\nprint(k, flush=True)\n"
        "if sys.stdin.readline().split() != [str(k + 1)]:\n    sys.exit(43)\n"
        "if k < 2:\n    open(sys.argv[3] + 'nextpass.in', 'w').write(str(k + 1))\nsys.exit(42)\n"
    )
    loaded = load_kattis_package(package)
    assert judge_kattis(loaded, "print(int(input()) + 1, flush=True)\n").verdict == Verdict.AC
    assert judge_kattis(loaded, "k = int(input())\nprint(k + 1 if k == 1 else k, flush=True)\n").verdict == Verdict.WA
