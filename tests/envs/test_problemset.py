"""The built-in problem set and its validator: every shipped problem is sound, and the validator catches broken ones
(each broken copy below is a small problem written here, mutated in one way)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentgspo.cli import main
from agentgspo.commands import validate_problems
from agentgspo.commands.validate_problems import (
    CALIBRATION_PY,
    CALIBRATION_ROUNDS,
    MAX_TIME_RATIO,
    MachineSpeed,
    measure_machine_speed,
    statement_examples,
    validate_problem,
    validate_problemset,
)
from agentgspo.envs import problemset
from agentgspo.envs.problemset import (
    ProblemFolderError,
    folder_hash,
    load_set_problem,
    materialise_tests,
    problem_folders,
    read_problem_folder,
)
from agentgspo.sandboxes import Verdict, judge_problem

STATEMENT = """\
# Pair Sum

Print the sum of two integers.

## Input

One line with two integers $a$ and $b$ ($0 \\le a, b \\le 10^{12}$).

## Output

Print $a + b$.

## Examples

```
1 2
```

```
3
```
"""
GEN = """\
import random, sys
from pathlib import Path
out = Path(sys.argv[1])
rng = random.Random(7)
for i in range(10):
    (out / f"{i + 1}.in").write_text(f"{rng.randint(0, 10**12)} {rng.randint(0, 10**12)}\\n")
"""
REF_CPP = '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}\n'
REF_PY = "a, b = map(int, input().split())\nprint(a + b)\n"
WRONG_PY = "a, b = map(int, input().split())\nprint((a + b) % 2**31)\n"  # 32-bit overflow, as contestants write


def write_problem(root: Path, slug: str = "001-pair-sum") -> Path:
    """A small valid problem folder of the set's format."""
    folder = root / slug
    (folder / "samples").mkdir(parents=True)
    (folder / "solutions").mkdir()
    (folder / "problem.json").write_text(
        json.dumps({"name": slug, "title": "Pair Sum", "rating": 800, "tags": ["math"], "time_limit_s": 2.0})
    )
    (folder / "statement.md").write_text(STATEMENT)
    (folder / "samples" / "1.in").write_text("1 2\n")
    (folder / "samples" / "1.ans").write_text("3\n")
    (folder / "gen.py").write_text(GEN)
    (folder / "solutions" / "ref.cpp").write_text(REF_CPP)
    (folder / "solutions" / "ref.py").write_text(REF_PY)
    (folder / "solutions" / "wrong_wa_overflow.py").write_text(WRONG_PY)
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private materialisation cache."""
    monkeypatch.setenv("AGENTGSPO_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def failed_checks(report) -> dict[str, str]:
    return {check.name: check.detail for check in report.checks if not check.ok}


@pytest.fixture
def here() -> MachineSpeed:
    """This machine's speed now, for a test that sizes work or limits by it: measured at the test, not once per
    process (``machine_speed()``), which may have been minutes ago under another load: a reference sized by a stale
    reading ran 1.7x longer than meant, and got TLE instead of failing the margin."""
    return measure_machine_speed()


def working_reference(seconds_here: float, here: MachineSpeed) -> str:
    """REF_PY after about ``seconds_here`` CPU seconds of work on this machine (speed ``here``): the calibration
    program's own work, so its time follows the machine's speed as the calibration's does (a CPU-seconds spin
    would not)."""
    rounds = max(1, round(seconds_here / here.seconds["python"] * CALIBRATION_ROUNDS["python"]))
    return CALIBRATION_PY + f"calibration_work({rounds})\n" + REF_PY


def limits_set_on_a_faster_machine(monkeypatch, factor: float, here: MachineSpeed) -> None:
    """Make the reference machine ``factor`` times faster than this one (speed ``here``): what a machine that much
    slower than the one the limits were set on measures."""
    faster = {lang: seconds / factor for lang, seconds in here.seconds.items()}
    monkeypatch.setattr(validate_problems, "REFERENCE_CALIBRATION_S", faster)


def set_time_limit(folder: Path, seconds: float) -> None:
    meta = json.loads((folder / "problem.json").read_text())
    (folder / "problem.json").write_text(json.dumps({**meta, "time_limit_s": seconds}))


# ----------------------------------------------------------------------------------------------- the shipped set


@pytest.mark.slow
@pytest.mark.timeout(3600)  # ~4 min on an idle fast machine, 12-15 min on a busy 2-core one: not a speed test
def test_every_builtin_problem_is_valid():
    # Too-slow solutions judged only to their verdict at the limit (a third of the time of the 3x certificate, which
    # `agentgspo validate-problems` gives the shipped set; the 3x rule itself: the synthetic test below).
    reports = validate_problemset(too_slow_ratio=1.0)
    from agentgspo.commands.validate_problems import format_table

    assert all(report.ok for report in reports), format_table(reports)
    assert len(reports) >= 20


def test_builtin_set_composition_without_generating():
    infos = [read_problem_folder(folder) for folder in problem_folders()]
    set_a = [info for info in infos if int(info.slug[:3]) <= 20]
    assert [info.slug[:3] for info in set_a] == [f"{i:03d}" for i in range(1, 21)]
    assert all(800 <= info.meta["rating"] <= 1700 for info in set_a)
    assert sum(info.meta.get("checker", "").startswith("testlib:") for info in set_a) >= 3
    assert sum(info.interactive for info in set_a) >= 2
    assert len({tag for info in set_a for tag in info.meta["tags"]}) >= 15
    for info in infos:
        assert all(w.kind in ("wa", "tle", "re", "mle") for w in info.wrong) and info.wrong, info.slug
        if not info.interactive:
            assert len(statement_examples(info.statement)) == len(info.samples), info.slug


def test_package_data_globs_ship_every_problemset_file():
    # the wheel carries envs/data through pyproject's package-data globs (a built wheel was checked against this)
    import glob
    import tomllib

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    data = root / "envs" / "data"
    shipped = {path for pattern in patterns["agentgspo.envs.data"] for path in glob.glob(pattern, root_dir=data)}
    every = {
        p.relative_to(data).as_posix()
        for p in (data / "problemset").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert every and not every - shipped, sorted(every - shipped)[:5]


# ----------------------------------------------------------------------------------------------- loading


def test_load_gives_samples_then_hidden_tests_and_metadata(tmp_path, cache):
    item = load_set_problem(write_problem(tmp_path))
    assert (item.title, item.rating, item.tags) == ("Pair Sum", 800, ["math"])
    assert [case.name for case in item.problem.tests[:2]] == ["sample/1", "hidden/1"]
    assert len(item.hidden_tests) == 10 and item.samples == item.problem.samples
    a, b = map(int, item.hidden_tests[0].input.split())
    assert int(item.hidden_tests[0].answer) == a + b  # answers are the reference's outputs
    assert item.problem.metadata["rating"] == 800
    assert set(item.references) == {"cpp", "python"} and [w.name for w in item.wrong] == ["wrong_wa_overflow"]
    assert judge_problem(item.problem, REF_PY).verdict == Verdict.AC


def test_load_problemset_in_folder_order_and_only(tmp_path, cache):
    for slug in ("002-pair-sum", "001-pair-sum"):
        write_problem(tmp_path, slug)
    assert [p.slug for p in problemset.load_problemset(tmp_path, jobs=2)] == ["001-pair-sum", "002-pair-sum"]
    assert [p.slug for p in problemset.load_problemset(tmp_path, only=["002"])] == ["002-pair-sum"]
    with pytest.raises(ValueError, match="no problem '003'"):
        problemset.load_problemset(tmp_path, only=["003"])


def test_repeated_load_reads_the_cache_and_an_edit_makes_a_new_entry(tmp_path, cache, monkeypatch):
    folder = write_problem(tmp_path)
    first = materialise_tests(folder)

    def no_generation(*args, **kwargs):
        raise AssertionError("generated again although the folder did not change")

    monkeypatch.setattr(problemset, "run_generator", no_generation)
    assert materialise_tests(folder) == first
    assert load_set_problem(folder).cache_dir == first
    monkeypatch.undo()
    monkeypatch.setenv("AGENTGSPO_CACHE", str(cache))
    before = folder_hash(folder)
    (folder / "gen.py").write_text(GEN.replace("Random(7)", "Random(8)"))
    assert folder_hash(folder) != before
    assert materialise_tests(folder) != first


def test_metadata_is_validated_by_the_problem_json_loader(tmp_path, cache):
    folder = write_problem(tmp_path)
    meta = json.loads((folder / "problem.json").read_text())
    for bad, needle in ((1250, "multiple of 100"), (700, "multiple of 100"), ("1200", "valid integer")):
        (folder / "problem.json").write_text(json.dumps({**meta, "rating": bad}))
        with pytest.raises(ProblemFolderError, match=needle) as caught:
            read_problem_folder(folder)
        assert "problem.json" in str(caught.value)
    (folder / "problem.json").write_text(json.dumps({**meta, "tags": "math"}))
    with pytest.raises(ProblemFolderError, match="tags"):
        read_problem_folder(folder)
    (folder / "problem.json").write_text(json.dumps({**meta, "tags": []}))
    with pytest.raises(ProblemFolderError, match="'tags' is required"):
        read_problem_folder(folder)


def test_tags_are_codeforces_tags_and_interactive_goes_with_an_interactor(tmp_path, cache):
    folder = write_problem(tmp_path)
    meta = json.loads((folder / "problem.json").read_text())
    (folder / "problem.json").write_text(json.dumps({**meta, "tags": ["maths"]}))
    with pytest.raises(ProblemFolderError, match="unknown tag 'maths' \\(did you mean 'math'\\?\\)"):
        read_problem_folder(folder)
    (folder / "problem.json").write_text(json.dumps({**meta, "tags": ["math", "interactive"]}))
    with pytest.raises(ProblemFolderError, match="the tag 'interactive' and an interactor go together"):
        read_problem_folder(folder)


def test_broken_folders_name_the_file_and_the_fix(tmp_path, cache):
    folder = write_problem(tmp_path)
    (folder / "solutions" / "ref.cpp").unlink()
    with pytest.raises(ProblemFolderError, match=r"ref\.cpp is missing: write the C\+\+17 reference"):
        read_problem_folder(folder)
    folder = write_problem(tmp_path / "b")
    (folder / "solutions" / "ok.py").write_text(REF_PY)
    with pytest.raises(ProblemFolderError, match=r"ok\.py: a solution file is ref\.cpp, ref\.py or wrong_KIND"):
        read_problem_folder(folder)
    folder = write_problem(tmp_path / "c")
    (folder / "solutions" / "ref.cpp").write_text("int main() { return 3; }\n")
    with pytest.raises(ProblemFolderError, match=r"ref\.cpp got RE"):
        materialise_tests(folder)
    folder = write_problem(tmp_path / "d")
    (folder / "gen.py").write_text("raise SystemExit('no seed given')\n")
    with pytest.raises(ProblemFolderError, match=r"gen\.py failed \(exit 1\): no seed given"):
        materialise_tests(folder)


def test_a_generator_is_limited_by_cpu_time(tmp_path, cache, monkeypatch):
    folder = write_problem(tmp_path)
    (folder / "gen.py").write_text("while True:\n    pass\n")
    monkeypatch.setattr(problemset, "GENERATOR_CPU_LIMIT_S", 1)
    with pytest.raises(ProblemFolderError, match=r"gen\.py used more than 1 s of CPU time"):
        problemset.run_generator(folder, tmp_path / "out")


# ----------------------------------------------------------------------------------------------- the validator


def test_a_sound_problem_passes_every_check(tmp_path, cache):
    report = validate_problem(write_problem(tmp_path))
    assert report.ok, failed_checks(report)
    assert report.hidden_tests == 10 and set(report.time_ratio) == set(report.slowdown) == {"cpp", "python"}
    assert report.wrong_verdicts == {"wrong_wa_overflow": "WA"}
    assert {"samples match the statement", "generator deterministic", "checker rejects an empty output"} <= {
        check.name for check in report.checks
    }


def test_validator_catches_a_wrong_reference(tmp_path, cache):
    folder = write_problem(tmp_path)
    (folder / "solutions" / "ref.py").write_text("a, b = map(int, input().split())\nprint(a + b + (a > 10**11))\n")
    failed = failed_checks(validate_problem(folder))
    assert list(failed) == ["reference python AC"] and failed["reference python AC"].startswith("WA on hidden/")


@pytest.mark.slow
def test_validator_catches_a_wrong_solution_that_passes(tmp_path, cache):
    folder = write_problem(tmp_path)
    (folder / "solutions" / "wrong_wa_fine.py").write_text(REF_PY)
    failed = failed_checks(validate_problem(folder))
    assert list(failed) == ["wrong_wa_fine rejected"] and "accepted" in failed["wrong_wa_fine rejected"]


@pytest.mark.slow
def test_validator_checks_the_verdict_a_wrong_solution_names(tmp_path, cache):
    folder = write_problem(tmp_path)
    shutil.move(folder / "solutions" / "wrong_wa_overflow.py", folder / "solutions" / "wrong_tle_overflow.py")
    failed = failed_checks(validate_problem(folder))
    assert list(failed) == ["wrong_tle_overflow rejected"]
    assert failed["wrong_tle_overflow rejected"] == "WA on hidden/1 (expected TLE)"


@pytest.mark.slow
def test_validator_catches_a_non_deterministic_generator(tmp_path, cache):
    folder = write_problem(tmp_path)
    (folder / "gen.py").write_text(GEN.replace("random.Random(7)", "random.Random()"))
    failed = failed_checks(validate_problem(folder))
    assert list(failed) == ["generator deterministic"]


@pytest.mark.slow
def test_validator_catches_too_few_tests(tmp_path, cache):
    folder = write_problem(tmp_path)
    (folder / "gen.py").write_text(GEN.replace("range(10)", "range(9)"))
    assert list(failed_checks(validate_problem(folder))) == [">= 10 hidden tests"]


@pytest.mark.slow
def test_validator_catches_a_sample_that_differs_from_the_statement(tmp_path, cache):
    folder = write_problem(tmp_path)
    (folder / "samples" / "1.ans").write_text("4\n")
    failed = failed_checks(validate_problem(folder))
    # the sample is also judged: the references now fail on it too
    assert failed["samples match the statement"] == "example 1's output in statement.md differs from sample/1.ans"


@pytest.mark.slow
def test_validator_catches_a_limit_set_far_too_low(tmp_path, cache, here):
    folder = write_problem(tmp_path)
    (folder / "solutions" / "ref.py").write_text(working_reference(0.15, here))
    # about 0.15 s here is 0.15 / slowdown s on the reference machine: make that half the limit (the start-up adds)
    set_time_limit(folder, round(0.15 / here.slowdown("python") / 0.5, 3))
    failed = failed_checks(validate_problem(folder))
    assert list(failed) == ["reference python within 0.33 of the limit"], failed
    assert "raise time_limit_s to at least" in failed["reference python within 0.33 of the limit"]


@pytest.mark.slow
def test_validator_catches_a_reference_doing_far_more_work_than_needed(tmp_path, cache, here):
    folder = write_problem(tmp_path)  # REF_PY needs microseconds; this one adds 0.3 reference-machine s, limit 0.5 s
    (folder / "solutions" / "ref.py").write_text(working_reference(0.3 * here.slowdown("python"), here))
    set_time_limit(folder, 0.5)
    failed = failed_checks(validate_problem(folder))
    assert list(failed) == ["reference python within 0.33 of the limit"], failed


@pytest.mark.slow
def test_a_sound_reference_passes_on_a_machine_slower_than_the_reference_one(tmp_path, cache, monkeypatch, here):
    # issue 19, item 8: on a machine about 2x slower than the one the limits were set on, references used 0.51-0.69
    # of their limits and failed a check of absolute CPU seconds. Here the limits' machine is made 4x faster than
    # this one, and a reference uses 0.7 of its limit in this machine's seconds: 0.175 on the reference machine.
    limits_set_on_a_faster_machine(monkeypatch, 4.0, here)
    folder = write_problem(tmp_path)
    (folder / "solutions" / "ref.py").write_text(working_reference(0.35, here))
    set_time_limit(folder, 0.5)
    report = validate_problem(folder, speed=here)
    assert report.ok, failed_checks(report)
    assert report.slowdown["python"] == 4.0 and report.time_ratio["python"] <= MAX_TIME_RATIO


@pytest.mark.slow
def test_a_slower_machine_still_catches_a_reference_too_slow_for_its_limit(tmp_path, cache, monkeypatch, here):
    # the same 4x slower machine: a reference that uses 0.6 of its limit on the reference machine takes 2.4 limits
    # here; it runs to the end (the limits are scaled by 4) and fails the margin, not with a TLE
    limits_set_on_a_faster_machine(monkeypatch, 4.0, here)
    folder = write_problem(tmp_path)
    (folder / "solutions" / "ref.py").write_text(working_reference(0.6, here))
    set_time_limit(folder, 0.25)
    failed = failed_checks(validate_problem(folder, speed=here))
    assert list(failed) == ["reference python within 0.33 of the limit"], failed
    assert "(this one takes 4.00x its time)" in failed["reference python within 0.33 of the limit"]


@pytest.mark.slow
def test_a_too_slow_solution_that_a_3x_faster_machine_accepts_fails_validation(tmp_path, cache, here):
    # 002-fence-painting's wrong_tle passed validation (TLE at the limit) and was accepted on another machine. A
    # too-slow solution needing 1.5x its limit: TLE here, AC on a machine 3x faster or under `eval
    # --time-limit-scale 2`. Validation judges it under 3x the limit, and fails it naming the fix.
    folder = write_problem(tmp_path)
    set_time_limit(folder, round(0.3 / here.slowdown("python"), 3))  # 0.3 s here
    (folder / "solutions" / "wrong_tle_spin.py").write_text(working_reference(0.45, here))
    failed = failed_checks(validate_problem(folder, speed=here))
    assert list(failed) == ["wrong_tle_spin rejected"], failed
    assert "accepted under 3x the time limit" in failed["wrong_tle_spin rejected"]


@pytest.mark.slow
def test_a_reference_slowed_by_the_machine_after_a_quiet_calibration_is_timed_again(tmp_path, cache, monkeypatch, here):
    # CI, session 30: the calibration ran in a quiet moment (0.69x the median slowdown), the reference under load
    # right after: 0.35 of its limit, 0.24 at the median speed. Here the first calibration reads this machine 5x
    # faster than it is; the reference (0.1-0.15 of its limit at the true speed) reads 0.5-0.75, is calibrated
    # and timed again, and passes. Without the retime it fails the margin.
    quiet = MachineSpeed({lang: seconds / 5 for lang, seconds in here.seconds.items()})
    calibrations = iter([quiet, here, here])
    monkeypatch.setattr(validate_problems, "measure_machine_speed", lambda backend="local": next(calibrations))
    folder = write_problem(tmp_path)
    (folder / "solutions" / "ref.py").write_text(working_reference(0.2, here))
    set_time_limit(folder, round(2.0 / here.slowdown("python"), 3))  # 2 s here
    report = validate_problem(folder)
    assert report.ok, failed_checks(report)
    assert report.slowdown["python"] == round(here.slowdown("python"), 3)  # the second calibration's


@pytest.mark.slow
def test_validator_catches_a_checker_that_accepts_anything(tmp_path, cache):
    folder = write_problem(tmp_path)
    (folder / "checker.py").write_text("import sys\nsys.exit(0)\n")
    meta = json.loads((folder / "problem.json").read_text())
    (folder / "problem.json").write_text(json.dumps({**meta, "checker": "testlib:checker.py"}))
    failed = failed_checks(validate_problem(folder))
    assert "checker rejects an empty output" in failed and "wrong_wa_overflow rejected" in failed


def test_validation_limits_are_the_problems_in_this_machines_seconds_with_a_wider_wall_guard():
    from agentgspo.commands.validate_problems import REFERENCE_CALIBRATION_S, REFERENCE_SPEED, validation_limits
    from agentgspo.sandboxes import Problem

    problem = Problem("p", [], time_limit_s=1.5, memory_limit_mb=64)
    limits = validation_limits(problem)
    assert (limits.time_limit_s, limits.memory_limit_mb, limits.wall_s) == (1.5, 64, 4 * 1.5 + 5)
    twice_slower = MachineSpeed({lang: 2 * seconds for lang, seconds in REFERENCE_CALIBRATION_S.items()})
    assert twice_slower.slowdown("py") == twice_slower.slowdown("cpp") == 2.0 and REFERENCE_SPEED.slowdown("py") == 1
    limits = validation_limits(problem, twice_slower.slowdown("python"))
    assert (limits.time_limit_s, limits.memory_limit_mb, limits.wall_s) == (3.0, 64, 4 * 3.0 + 5)


@pytest.mark.slow
def test_cli_exit_status_and_table(tmp_path, cache, capsys):
    write_problem(tmp_path / "set")
    assert main(["validate-problems", "--problems", str(tmp_path / "set")]) == 0
    captured = capsys.readouterr()
    assert "001-pair-sum" in captured.out and "1/1 problems valid" in captured.out
    assert captured.err == "[1/1] 001-pair-sum: ok\n"
    (tmp_path / "set" / "001-pair-sum" / "solutions" / "wrong_wa_fine.py").write_text(REF_PY)
    assert main(["validate-problems", "--problems", str(tmp_path / "set"), "--only", "001", "--json"]) == 1
    row = json.loads(capsys.readouterr().out)
    assert row["ok"] is False and row["wrong_verdicts"]["wrong_wa_fine"] == "AC"
    assert main(["validate-problems", "--problems", str(tmp_path / "set"), "--only", "999"]) == 2
    assert "no problem '999'" in capsys.readouterr().err
