"""Interactive tests: a rejection ends the test at once, tests run in parallel, the Docker backend hangs up the
solution's output when the interactor exits, as the local backend's pipes do, and a solution that exits after its
last answer is judged by the rule of the interactor's kind (Kattis: the validator decides; testlib: SIGPIPE is WA)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from agentgspo.sandboxes import Limits, Verdict, judge, judge_kattis, load_kattis_package

LIMITS = Limits(time_limit_s=1, memory_limit_mb=128, wall_limit_s=3)
# Reads the solution's first line, then exits with the status the input names (0 accept, 1 reject), or waits for a
# line first when the input says "wait" (the solution keeps running meanwhile).
EXIT_AFTER_ONE_LINE = textwrap.dedent("""\
    import sys
    status = int(open(sys.argv[1]).read().split()[0])
    print("go", flush=True)
    sys.stdin.readline()
    sys.exit(status)
""")
ANSWER_THEN_SPIN_PY = "input()\nprint('done', flush=True)\nwhile True:\n    pass\n"
ANSWER_THEN_SLEEP_PY = "import time\ninput()\nprint('done', flush=True)\ntime.sleep(60)\n"
FLOOD_PY = "input()\nwhile True:\n    print('x' * 100, flush=True)\n"
FLOOD_CPP = (
    "#include <cstdio>\nint main(){char b[16]; if(!fgets(b,16,stdin)) return 0;"
    'for(;;){fputs("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\n", stdout); fflush(stdout);}}'
)


@pytest.fixture
def exit_after_one_line(tmp_path):
    path = tmp_path / "exit_after_one_line.py"
    path.write_text(EXIT_AFTER_ONE_LINE)
    return path


@pytest.mark.parametrize("solution", [ANSWER_THEN_SPIN_PY, ANSWER_THEN_SLEEP_PY], ids=["spins", "sleeps"])
def test_a_rejection_stops_the_solution_and_the_interactors_verdict_wins(exit_after_one_line, solution):
    # The solution would reach TLE (spinning) or the wall guard (sleeping): the rejection ends it first.
    result = judge(solution, [("1\n", "")], interactor=exit_after_one_line, limits=LIMITS)
    assert result.verdict == Verdict.WA, result.to_dict()
    assert "stopped when the interactor rejected" in result.tests[0].message
    assert result.tests[0].time_s < LIMITS.time_limit_s


def test_an_accepting_interactor_does_not_stop_the_solution(exit_after_one_line):
    # (a generous wall guard: on a busy machine the spinner reaches its CPU limit well before it)
    limits = Limits(time_limit_s=0.5, memory_limit_mb=128, wall_limit_s=20)
    result = judge(ANSWER_THEN_SPIN_PY, [("0\n", "")], interactor=exit_after_one_line, limits=limits)
    assert result.verdict == Verdict.TLE, result.to_dict()


RENDEZVOUS = textwrap.dedent("""\
    # Test "a" and test "b" each wait for the other's marker file: they both pass only when they run at once.
    import os, sys, time
    me, other, folder = open(sys.argv[1]).read().split()
    open(os.path.join(folder, me), "w").close()
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(folder, other)):
        if time.monotonic() > deadline:
            sys.exit(3)  # FAIL: the other test never ran beside this one
        time.sleep(0.01)
    print("go", flush=True)
    sys.exit(0 if sys.stdin.readline().strip() == "ok" else 1)
""")


def _rendezvous(tmp_path):
    interactor = tmp_path / "rendezvous.py"
    interactor.write_text(RENDEZVOUS)
    folder = tmp_path / "markers"
    folder.mkdir()
    return interactor, [(f"a b {folder}\n", ""), (f"b a {folder}\n", "")]


def test_interactive_tests_run_at_once(tmp_path):
    interactor, tests = _rendezvous(tmp_path)
    result = judge("input()\nprint('ok', flush=True)\n", tests, interactor=interactor, limits=LIMITS, workers=2)
    assert result.verdict == Verdict.AC, result.to_dict()
    assert [t.name for t in result.tests] == ["1", "2"]


def test_interactive_stop_on_failure_reports_up_to_the_first_failure(exit_after_one_line):
    tests = [("0\n", ""), ("1\n", ""), ("0\n", ""), ("0\n", "")]
    result = judge(
        "input()\nprint('x', flush=True)\n",
        tests,
        interactor=exit_after_one_line,
        limits=LIMITS,
        stop_on_failure=True,
        workers=2,
    )
    assert [t.verdict for t in result.tests[:2]] == [Verdict.AC, Verdict.WA], result.to_dict()
    assert all(t.verdict == Verdict.SKIPPED for t in result.tests[2:])


@pytest.mark.docker
@pytest.mark.parametrize("status", [0, 1], ids=["accepts", "rejects"])
@pytest.mark.parametrize("solution, lang", [(FLOOD_PY, "py"), (FLOOD_CPP, "cpp")], ids=["py", "cpp"])
def test_docker_hang_up_gives_the_local_verdict(docker_backend, exit_after_one_line, status, solution, lang):
    """The interactor exits while the solution keeps writing: the solution must see the hang-up on Docker too."""
    tests = [(f"{status}\n", "")]
    local = judge(solution, tests, lang=lang, interactor=exit_after_one_line, limits=LIMITS)
    docker = judge(solution, tests, lang=lang, interactor=exit_after_one_line, limits=LIMITS, backend=docker_backend)
    assert local.verdict not in (Verdict.TLE, Verdict.ILE, Verdict.JE), local.to_dict()
    assert docker.verdict == local.verdict, (local.to_dict(), docker.to_dict())


@pytest.mark.docker
def test_docker_interactive_tests_run_at_once_and_stop_on_rejection(docker_backend, tmp_path, exit_after_one_line):
    interactor, tests = _rendezvous(tmp_path)
    result = judge(
        "input()\nprint('ok', flush=True)\n",
        tests,
        interactor=interactor,
        limits=LIMITS,
        workers=2,
        backend=docker_backend,
    )
    assert result.verdict == Verdict.AC, result.to_dict()
    rejected = judge(
        ANSWER_THEN_SPIN_PY, [("1\n", "")], interactor=exit_after_one_line, limits=LIMITS, backend=docker_backend
    )
    assert rejected.verdict == Verdict.WA and "stopped" in rejected.tests[0].message, rejected.to_dict()


def test_interactor_gets_the_answer_file_as_its_third_argument(tmp_path):
    interactor = tmp_path / "reads_answer.py"
    interactor.write_text(
        "import sys\nsecret = open(sys.argv[3]).read().strip()\nprint('go', flush=True)\n"
        "sys.exit(0 if sys.stdin.readline().strip() == secret else 1)\n"
    )
    assert judge("input()\nprint('42')\n", [("", "42\n")], interactor=interactor, limits=LIMITS).accepted
    assert judge("input()\nprint('41')\n", [("", "42\n")], interactor=interactor, limits=LIMITS).verdict == Verdict.WA


def test_a_checker_other_than_tokens_judges_the_interactors_log(tmp_path):
    interactor = tmp_path / "logs.py"
    interactor.write_text("import sys\nprint('go', flush=True)\nopen(sys.argv[2], 'w').write(sys.stdin.readline())\n")
    checker = tmp_path / "check.py"
    checker.write_text("import sys\nsys.exit(0 if open(sys.argv[2]).read().split() == ['7'] else 1)\n")
    good = judge("input()\nprint(7)\n", [("", "")], interactor=interactor, checker=f"testlib:{checker}", limits=LIMITS)
    bad = judge("input()\nprint(8)\n", [("", "")], interactor=interactor, checker=f"testlib:{checker}", limits=LIMITS)
    assert (good.verdict, bad.verdict) == (Verdict.AC, Verdict.WA), (good.to_dict(), bad.to_dict())


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


# The solution asks its question without flushing, then waits for the reply: it and the interactor wait for each
# other for ever.
DEADLOCK_PY = "import sys\ninput()\nsys.stdout.write('? 1\\n')\nsys.stdin.readline()\n"
# Replies to one line after computing (CPU, not sleeping) for as many seconds as its input says.
SLOW_INTERACTOR = textwrap.dedent("""\
    import sys, time
    seconds = float(open(sys.argv[1]).read().split()[0])
    print("go", flush=True)
    sys.stdin.readline()
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    print("reply", flush=True)
    sys.exit(0 if sys.stdin.readline().strip() == "ok" else 1)
""")


def test_a_deadlock_ends_at_once_as_idleness(exit_after_one_line, backend):
    # Both sides blocked for DEADLOCK_S with nothing in flight: ILE from the deadlock rule, not from the wall guard
    # (whose message has no "deadlock"; its guard here is 20 s, so the wall time tells the two apart too).
    limits = Limits(time_limit_s=1, memory_limit_mb=128, wall_limit_s=20)
    result = judge(DEADLOCK_PY, [("0\n", "")] * 3, interactor=exit_after_one_line, limits=limits, backend=backend)
    assert [t.verdict for t in result.tests] == [Verdict.ILE] * 3, result.to_dict()
    assert all(t.message.startswith("deadlock:") and "flush" in t.message for t in result.tests), result.to_dict()
    assert all(t.wall_time_s < limits.wall_s for t in result.tests), result.to_dict()


def test_a_busy_interactor_or_solution_is_not_a_deadlock(tmp_path, backend):
    # One side waits (blocked) while the other computes for several DEADLOCK_S: not idle, so the test passes.
    interactor = tmp_path / "slow.py"
    interactor.write_text(SLOW_INTERACTOR)
    slow_solution = (
        "import time\ninput()\nprint('q', flush=True)\ninput()\nend = time.process_time() + 0.8\n"
        "while time.process_time() < end:\n    pass\nprint('ok', flush=True)\n"
    )
    limits = Limits(time_limit_s=2, memory_limit_mb=128, wall_limit_s=20)
    slow_peer = judge(
        "input()\nprint('q', flush=True)\ninput()\nprint('ok', flush=True)\n",
        [("0.8\n", "")],
        interactor=interactor,
        limits=limits,
        backend=backend,
    )
    assert slow_peer.verdict == Verdict.AC, slow_peer.to_dict()
    slow_own = judge(slow_solution, [("0\n", "")], interactor=interactor, limits=limits, backend=backend)
    assert slow_own.verdict == Verdict.AC, slow_own.to_dict()


# Kattis's rule for a solution that leaves before the validator is done (problemtools' interactive.cc keeps the
# read end of the validator's output open): the validator's exit code decides. tests/sandboxes/fixtures/
# kattis_exit_early's C++ validator writes a final line the solution never reads; its "eof-first" tests make that
# write land after the solution has exited every time (a short line, and one of 256 KiB: more than a pipe and the
# Docker relay's last read hold). tests/sandboxes/stress_interactive_exit.py judges the timing-dependent order
# ("reply-first") many times on both backends.
EXIT_EARLY = Path(__file__).parent / "fixtures" / "kattis_exit_early"
SUMS_THEN_EXIT = {
    "py": "k = int(input())\nfor _ in range(k):\n    a, b = map(int, input().split())\n    print(a + b, flush=True)\n",
    "cpp": (
        '#include <cstdio>\nint main(){int k; if(scanf("%d",&k)!=1) return 1; while(k--){long long a,b;'
        ' scanf("%lld %lld",&a,&b); printf("%lld\\n",a+b); fflush(stdout);}}\n'
    ),
}


@pytest.mark.parametrize("lang", ["py", "cpp"])
def test_a_kattis_validator_that_writes_after_the_solution_exited_decides(backend, lang):
    result = judge_kattis(load_kattis_package(EXIT_EARLY), SUMS_THEN_EXIT[lang], lang, backend=backend)
    assert result.verdict == Verdict.AC, result.to_dict()
    assert [t.verdict for t in result.tests] == [Verdict.AC] * 3, result.to_dict()


@pytest.mark.docker
def test_a_testlib_interactor_writing_after_the_solution_left_is_wa_on_docker_as_locally(docker_backend, tmp_path):
    """testlib's rule stays (docs/judge.md): the interactor killed by SIGPIPE is the solution's WA. The Docker relay
    used to keep reading the interactor after the box had gone and then block, so the interactor never ended (JE)."""
    floods = tmp_path / "flooding_interactor"  # a native program: the broken pipe kills it with SIGPIPE
    floods.write_text("#!/bin/sh\nexec yes 1\n")
    floods.chmod(0o755)
    local = judge("print('! 1')\n", [("1\n", "")], interactor=floods, limits=LIMITS)
    docker = judge("print('! 1')\n", [("1\n", "")], interactor=floods, limits=LIMITS, backend=docker_backend)
    assert local.verdict == docker.verdict == Verdict.WA, (local.to_dict(), docker.to_dict())
    assert "closed its input" in docker.tests[0].message, docker.to_dict()
