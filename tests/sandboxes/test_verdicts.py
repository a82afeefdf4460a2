"""Every verdict produced by a small solution, checkers, floats, interactive problems (local backend)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from agentgspo.sandboxes import Limits, Verdict, judge, run_python
from agentgspo.sandboxes.judge.core import usable_cpus

FIXTURES = Path(__file__).parent / "fixtures"
LIMITS = Limits(time_limit_s=0.5, memory_limit_mb=128, output_limit_mb=1, wall_limit_s=1.5)
APLUSB = [("1 2\n", "3\n"), ("10 -4\n", "6\n"), ("0 0\n", "0\n")]

PY = {
    "AC": "a, b = map(int, input().split())\nprint(a + b)\n",
    "WA": "a, b = map(int, input().split())\nprint(a - b)\n",
    "TLE": "while True:\n    pass\n",
    "MLE": "x = bytearray(500 * 1024 * 1024)\nprint(len(x))\n",
    "RE": "raise ValueError('boom')\n",
    "CE": "def broken(:\n",
    "OLE": "while True:\n    print('y' * 1000)\n",
}


@pytest.mark.parametrize("expected", list(PY))
def test_python_verdicts(expected):
    result = judge(PY[expected], APLUSB, lang="py", limits=LIMITS)
    assert result.verdict.value == expected, result.to_dict()
    if expected not in ("CE",):
        assert result.tests and result.tests[0].verdict.value == expected


CPP = {
    "AC": '#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}',
    "WA": '#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a*b<<"\\n";}',
    "RE": "#include <bits/stdc++.h>\nint main(){int *p=nullptr; volatile int x=*p; return x;}",
    "MLE": (
        "#include <bits/stdc++.h>\nint main(){std::vector<char> v(600u<<20, 1); std::cout<<(int)v[12345]<<std::endl;}"
    ),
    "TLE": "int main(){volatile unsigned long x=0; for(;;) x++;}",
    "CE": "int main( { return 0; }",
}


@pytest.mark.slow
@pytest.mark.parametrize("expected", list(CPP))
def test_cpp_verdicts(expected):
    result = judge(CPP[expected], APLUSB, lang="cpp", limits=LIMITS)
    assert result.verdict.value == expected, result.to_dict()
    if expected == "CE":
        assert "error" in result.compile_output
    if expected == "MLE":  # a heap allocation: the (small) static image is not what the message is about
        assert "static" not in result.tests[0].message, result.to_dict()


THREAD_CPP = (
    "#include <bits/stdc++.h>\nint main(){long long a,b; std::cin>>a>>b; long long r=0;"
    "std::thread t([&]{r=a+b;}); t.join(); std::cout<<r<<std::endl;}"
)
# About 100 MB of stack in the main thread: the stack may use the whole memory limit, as on Codeforces.
DEEP_RECURSION_CPP = (
    "#include <bits/stdc++.h>\nlong long f(long long n){volatile char pad[64]; pad[0]=1;"
    "return n ? f(n-1)+pad[0] : 0;}\n"
    "int main(){long long a,b; std::cin>>a>>b; std::cout<<f(1000000)-1000000+a+b<<std::endl;}"
)
THREAD_PY = (
    "import sys, threading\nthreading.stack_size(64 << 20)\nsys.setrecursionlimit(10**6)\n"
    "def f(n):\n    return n and f(n - 1) + 1\n"
    "def main():\n    a, b = map(int, input().split())\n    print(f(100000) - 100000 + a + b)\n"
    "t = threading.Thread(target=main)\nt.start()\nt.join()\n"
)


@pytest.mark.parametrize(
    "source, lang",
    [
        pytest.param(THREAD_CPP, "cpp", marks=pytest.mark.slow),
        pytest.param(DEEP_RECURSION_CPP, "cpp", marks=pytest.mark.slow),
        (THREAD_PY, "py"),
    ],
    ids=["cpp-std-thread", "cpp-deep-recursion", "py-thread-with-big-stack"],
)
def test_threads_and_a_deep_stack_fit_in_the_memory_limit(source, lang):
    result = judge(source, APLUSB, lang=lang, limits=Limits(time_limit_s=2, memory_limit_mb=256, wall_limit_s=5))
    assert result.verdict == Verdict.AC, result.to_dict()


BIG_STATIC = "#include <bits/stdc++.h>\nchar a[%d<<20];\nint main(){int n; std::cin>>n; %s std::cout<<n<<std::endl;}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "megabytes, body, expected",
    [
        (600, "", Verdict.MLE),  # the static array alone is beyond the limit: the program cannot even start
        (600, "a[n << 20] = 1;", Verdict.MLE),
        (125, "", Verdict.MLE),  # the libraries no longer fit beside it (the loader fails)
        (64, "", Verdict.WA),  # fits: runs
        (64, "int *p = nullptr; *(volatile int *)p = n;", Verdict.RE),  # a plain segfault stays RE
    ],
    ids=["untouched", "touched", "no-room-for-libraries", "fits", "null-pointer"],
)
def test_cpp_static_array_beyond_the_memory_limit_is_mle(megabytes, body, expected):
    result = judge(BIG_STATIC % (megabytes, body), APLUSB[:1], lang="cpp", limits=LIMITS)
    assert result.verdict == expected, result.to_dict()
    if expected == Verdict.MLE:
        assert "static" in result.tests[0].message, result.to_dict()


def test_judge_reports_per_test_time_and_memory():
    result = judge(PY["AC"], APLUSB, limits=LIMITS)
    assert result.verdict == Verdict.AC and result.passed == 3
    for test in result.tests:
        assert 0 <= test.time_s < 0.5 and 0 < test.memory_mb < 128


def test_stop_on_failure_skips_the_rest():
    result = judge(PY["WA"], APLUSB, limits=LIMITS, stop_on_failure=True)
    assert [t.verdict for t in result.tests] == [Verdict.WA, Verdict.SKIPPED, Verdict.SKIPPED]


class RecordingSandbox:
    """The real local backend, recording the inputs each sandbox call receives."""

    def __init__(self):
        from agentgspo.sandboxes.registry import get_sandbox

        self.inner, self.calls = get_sandbox("local"), []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @contextlib.contextmanager
    def session(self, *args):
        with self.inner.session(*args) as box:
            recording = types.SimpleNamespace(**{name: getattr(box, name) for name in dir(box) if name[0] != "_"})

            def call(spec, inputs=None):
                self.calls.append(list(inputs or []))
                return box.call(spec, inputs)

            recording.call = call
            yield recording


def test_a_wrong_answer_on_the_small_first_tests_never_runs_the_large_ones():
    # The checker rejects an output only after the call that ran it: with stop_on_failure the small first tests run
    # in a call of their own, so a wrong answer there (most wrong programs) leaves the large tests unrun.
    large = "1 " * 50_000 + "\n"  # 100 KB: over FIRST_CALL_MAX_BYTES with the tests before it
    tests = [*APLUSB, (large, "x\n"), (large, "x\n")]
    sandbox = RecordingSandbox()
    result = judge(PY["WA"], tests, limits=LIMITS, stop_on_failure=True, backend=sandbox)
    assert [t.verdict for t in result.tests] == [Verdict.WA] + [Verdict.SKIPPED] * 4, result.to_dict()
    assert [len(call) for call in sandbox.calls] == [3], "the large tests reached the sandbox"
    # An accepted program runs every test (in two calls), and without stop_on_failure all run in one call.
    sandbox.calls.clear()
    summing = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
    tests = [*APLUSB, (large, "50000\n")]
    assert judge(summing, tests, limits=LIMITS, stop_on_failure=True, backend=sandbox).verdict == Verdict.AC
    assert judge(PY["WA"], tests, limits=LIMITS, backend=sandbox).verdict == Verdict.WA
    assert [len(call) for call in sandbox.calls] == [3, 1, 4]


def test_testlib_checker_accepts_a_valid_output_that_differs_from_the_answer():
    tests = [("10\n", "5 5\n"), ("7\n", "3 4\n")]
    solution = "n = int(input())\nprint(0, n)\n"
    checker = f"testlib:{FIXTURES / 'checker_sum.py'}"
    assert judge(solution, tests, checker=checker, limits=LIMITS).verdict == Verdict.AC
    assert judge(solution, tests, limits=LIMITS).verdict == Verdict.WA  # tokens would reject it
    assert judge("print(1, 1)", tests, checker=checker, limits=LIMITS).verdict == Verdict.WA
    assert judge("print('x')", tests, checker=checker, limits=LIMITS).verdict == Verdict.PE


def test_broken_checker_is_a_judge_error_not_the_solutions_fault(tmp_path):
    bad = tmp_path / "bad_checker.py"
    bad.write_text("import sys\nsys.exit(3)\n")
    result = judge(PY["AC"], APLUSB, checker=f"testlib:{bad}", limits=LIMITS)
    assert result.verdict == Verdict.JE


def test_crashing_python_checker_is_a_judge_error_but_its_exit_1_is_wrong_answer(tmp_path):
    crashes = tmp_path / "crashing_checker.py"
    crashes.write_text("import sys\nanswer = open(sys.argv[3]).read().split()\nprint(answer[5])\n")  # IndexError
    result = judge(PY["AC"], APLUSB, checker=f"testlib:{crashes}", limits=LIMITS)
    assert result.verdict == Verdict.JE and "IndexError" in result.tests[0].message, result.to_dict()
    rejects = tmp_path / "rejecting_checker.py"
    rejects.write_text("import sys\nprint('wrong', file=sys.stderr)\nsys.exit(1)\n")
    assert judge(PY["AC"], APLUSB, checker=f"testlib:{rejects}", limits=LIMITS).verdict == Verdict.WA
    says = tmp_path / "message_checker.py"
    says.write_text("import sys\nsys.exit('expected 3, got 4')\n")  # SystemExit with a message: exit 1, WA
    assert judge(PY["AC"], APLUSB, checker=f"testlib:{says}", limits=LIMITS).verdict == Verdict.WA


def test_float_checker():
    tests = [("3\n", "0.333333333\n"), ("7\n", "0.142857142857\n")]
    close = "print(1 / int(input()) + 4e-7)\n"
    far = "print(1 / int(input()) + 1e-4)\n"
    assert judge(close, tests, checker="float:1e-6", limits=LIMITS).verdict == Verdict.AC
    assert judge(close, tests, limits=LIMITS).verdict == Verdict.WA
    assert judge(far, tests, checker="float:1e-6", limits=LIMITS).verdict == Verdict.WA


BINARY_SEARCH = (FIXTURES / "interactive" / "binary_search.py").read_text()  # guess the number in log2(n) queries
LINEAR = """
n = int(input())
for x in range(1, n + 1):
    print("?", x, flush=True)
    if input() == "=":
        print("!", x, flush=True)
        break
"""
NO_FLUSH = """
import sys
n = int(input())
sys.stdout.write("? 1\\n")  # never flushed: both sides wait for each other
r = sys.stdin.readline()
print("!", 1)
"""
INTERACTIVE_TESTS = [("1000 1\n", ""), ("1000 777\n", ""), ("1000 1000\n", "")]


@pytest.mark.parametrize(
    "solution, expected",
    [(BINARY_SEARCH, Verdict.AC), (LINEAR, Verdict.WA), (NO_FLUSH, Verdict.ILE)],
    ids=["binary-search", "too-many-queries", "no-flush"],
)
def test_interactive(solution, expected):
    start = time.time()
    result = judge(
        solution,
        INTERACTIVE_TESTS,
        interactor=FIXTURES / "interactive" / "interactor.py",
        limits=LIMITS,
        stop_on_failure=True,
    )
    assert result.verdict == expected, result.to_dict()
    assert time.time() - start < 3 * (LIMITS.wall_s + 2)


CRASH_MID_PY = (
    "n = int(input())\nprint('?', 1, flush=True)\ninput()\nraise RuntimeError('crashed while the interactor waits')\n"
)
CRASH_MID_CPP = (
    "#include <bits/stdc++.h>\nint main(){int n; std::string r; std::cin>>n; "
    'std::cout<<"? 1"<<std::endl;'
    'std::cin>>r; volatile int *p=nullptr; *p=n; std::cout<<"! 1"<<std::endl;}'
)
# Keeps asking; once the interactor rejects (too many queries) and hangs up, reading fails and it segfaults.
CRASH_AFTER_REJECT_CPP = (
    "#include <bits/stdc++.h>\nint main(){int n; std::string r; std::cin>>n;"
    'for(;;){std::cout<<"? 1"<<std::endl; if(!(std::cin>>r)){volatile int *p=nullptr; *p=n;}}}'
)


@pytest.mark.parametrize(
    "solution, lang, expected",
    [
        (CRASH_MID_PY, "py", Verdict.RE),
        pytest.param(CRASH_MID_CPP, "cpp", Verdict.RE, marks=pytest.mark.slow),
        pytest.param(CRASH_AFTER_REJECT_CPP, "cpp", Verdict.WA, marks=pytest.mark.slow),
    ],
    ids=["py-crash-while-interactor-waits", "cpp-segfault-while-interactor-waits", "cpp-segfault-after-rejection"],
)
def test_interactive_crash_is_re_unless_the_interactor_hung_up_first(solution, lang, expected):
    for _ in range(3):  # the order of the two ends must not depend on timing
        result = judge(
            solution,
            INTERACTIVE_TESTS[1:2],
            lang=lang,
            interactor=FIXTURES / "interactive" / "interactor.py",
            limits=LIMITS,
        )
        assert result.verdict == expected, result.to_dict()


def test_crashing_python_interactor_is_a_judge_error(tmp_path):
    crashes = tmp_path / "crashing_interactor.py"
    crashes.write_text(
        "import sys\nn, secret = open(sys.argv[1]).read().split()\nprint(n, flush=True)\n"
        "query = sys.stdin.readline().split()\nprint({}[query[0]])\n"
    )  # KeyError
    result = judge(BINARY_SEARCH, INTERACTIVE_TESTS[1:2], interactor=crashes, limits=LIMITS)
    assert result.verdict == Verdict.JE and "KeyError" in result.tests[0].message, result.to_dict()


def test_python_interactor_broken_pipe_after_the_solution_left_is_not_a_judge_error(tmp_path):
    floods = tmp_path / "flooding_interactor.py"  # writes until the pipe breaks: the solution ended without reading
    floods.write_text("import sys\nwhile True:\n    sys.stdout.write('1' * 4096 + '\\n')\n    sys.stdout.flush()\n")
    result = judge("print('! 1')\n", INTERACTIVE_TESTS[1:2], interactor=floods, limits=LIMITS)
    assert result.verdict == Verdict.WA, result.to_dict()


def test_native_interactor_killed_by_sigpipe_after_the_solution_left_is_wrong_answer(tmp_path):
    floods = tmp_path / "flooding_interactor"  # a native program: the broken pipe kills it with SIGPIPE
    floods.write_text("#!/bin/sh\nexec yes 1\n")
    floods.chmod(0o755)
    result = judge("print('! 1')\n", INTERACTIVE_TESTS[1:2], interactor=floods, limits=LIMITS)
    assert result.verdict == Verdict.WA, result.to_dict()
    crash = judge("raise ValueError\n", INTERACTIVE_TESTS[1:2], interactor=floods, limits=LIMITS)
    assert crash.verdict == Verdict.RE, crash.to_dict()  # the solution's own failure still comes first


@pytest.mark.parametrize(
    "checker, output, answer, expected",
    [
        ("tokens", b"3 3\n", b"3\n", Verdict.WA),  # wcmp: "Participant output contains extra tokens"
        ("tokens", b"", b"3\n", Verdict.WA),  # wcmp: "Unexpected EOF in the participants output"
        ("tokens", b"1\x0c2\n", b"1 2\n", Verdict.WA),  # a form feed is no blank for testlib: one token "1\f2"
        ("tokens", b"1\x0b2\n", b"1\x0b2\n", Verdict.AC),
        ("tokens", b" 1\t2\r\n\n", b"1 2", Verdict.AC),
        ("float:1e-6", b"3 3\n", b"3\n", Verdict.PE),  # rcmp: extra information in the output file
        ("float:1e-6", b"", b"3\n", Verdict.PE),  # rcmp: unexpected end of file
        ("float:1e-6", b"1\x0c2\n", b"1 2\n", Verdict.PE),  # rcmp: "1\f2" is no double
        ("float:1e-6", b"3\x0c\n", b"3\n", Verdict.PE),
        ("float:1e-6", b"abc\n", b"0.5\n", Verdict.PE),  # rcmp: expected double
        ("float:1e-6", b"0.6 abc\n", b"0.5 abc\n", Verdict.WA),
        ("float:1e-6", b"abd\n", b"abc\n", Verdict.WA),  # no number on the jury's side: compared as text
    ],
    ids=[
        "tokens-extra",
        "tokens-missing",
        "tokens-form-feed",
        "tokens-vertical-tab",
        "tokens-blanks",
        "float-extra",
        "float-missing",
        "float-form-feed",
        "float-form-feed-after",
        "float-not-a-number",
        "float-differs",
        "float-text",
    ],
)
def test_token_rules_of_the_built_in_checkers_are_testlibs(checker, output, answer, expected):
    from agentgspo.sandboxes.judge.checkers import make_checker

    assert make_checker(checker).check(b"", output, answer)[0] == expected


def test_run_python_tool_result():
    result = run_python("import sys\nprint(sys.stdin.read().upper())\nprint('err', file=sys.stderr)\nexit(3)", "abc")
    assert (result.stdout, result.stderr.strip(), result.exit_code, result.verdict) == ("ABC\n", "err", 3, Verdict.RE)
    assert run_python("print(1)").ok
    assert run_python("def f(:").verdict == Verdict.CE
    big = run_python("print('z' * 10**7)", limits=Limits(output_limit_mb=0.1))
    assert big.verdict == Verdict.OLE and big.stdout_truncated and len(big.stdout) <= 0.1 * 2**20


def test_file_io_mode():
    solution = "a, b = map(int, open('input.txt').read().split())\nopen('output.txt', 'w').write(str(a + b))\n"
    assert judge(solution, APLUSB, io_mode="file", limits=LIMITS).verdict == Verdict.AC


FILE_IO = "import os\na, b = map(int, open('input.txt').read().split())\nopen('output.txt', 'w').write(str(a + b))\n"


@pytest.mark.parametrize(
    "tamper, expected",
    [
        ("os.remove('input.txt'); os.mkdir('input.txt')", Verdict.AC),
        ("os.chmod('input.txt', 0o444)", Verdict.AC),
        ("os.remove('input.txt'); os.mkfifo('input.txt')", Verdict.AC),
        ("os.chmod('.', 0o555)", Verdict.AC),
        ("os.remove('output.txt'); os.mkfifo('output.txt')", Verdict.WA),  # no output: missing tokens
        ("os.remove('output.txt'); os.mkdir('output.txt')", Verdict.WA),
    ],
    ids=["input-dir", "input-read-only", "input-fifo", "dir-read-only", "output-fifo", "output-dir"],
)
def test_file_io_solution_cannot_turn_its_next_test_into_a_judge_error(tamper, expected):
    start = time.time()
    result = judge(FILE_IO + tamper + "\n", APLUSB, io_mode="file", limits=LIMITS, workers=1)
    assert result.verdict == expected and all(t.verdict != Verdict.JE for t in result.tests), result.to_dict()
    assert time.time() - start < 5, result.to_dict()


def test_concurrent_judging_from_threads():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda s: judge(s, APLUSB, limits=LIMITS).verdict, [PY["AC"], PY["WA"]] * 8))
    assert results == [Verdict.AC, Verdict.WA] * 8


@pytest.mark.docker
def test_docker_verdicts_and_interactive(docker_backend):
    assert judge(PY["AC"], APLUSB, limits=LIMITS, backend=docker_backend).verdict == Verdict.AC
    assert judge(PY["WA"], APLUSB, limits=LIMITS, backend=docker_backend).verdict == Verdict.WA
    assert judge(CPP["AC"], APLUSB, lang="cpp", limits=LIMITS, backend=docker_backend).verdict == Verdict.AC
    result = judge(
        BINARY_SEARCH,
        INTERACTIVE_TESTS,
        interactor=FIXTURES / "interactive" / "interactor.py",
        limits=LIMITS,
        backend=docker_backend,
    )
    assert result.verdict == Verdict.AC, result.to_dict()


@pytest.mark.docker
def test_docker_interactive_crash_while_the_interactor_waits_is_re(docker_backend):
    interactor = FIXTURES / "interactive" / "interactor.py"
    crash = judge(CRASH_MID_PY, INTERACTIVE_TESTS[1:2], interactor=interactor, limits=LIMITS, backend=docker_backend)
    assert crash.verdict == Verdict.RE, crash.to_dict()
    rejected = judge(LINEAR, INTERACTIVE_TESTS[1:2], interactor=interactor, limits=LIMITS, backend=docker_backend)
    assert rejected.verdict == Verdict.WA, rejected.to_dict()


# --- several tests of one submission at once (workers) --------------------------------------------------------
BY_INPUT = """
n = int(input())
if n == 5:
    raise SystemExit(3)
print(n * 3 if n == 8 else n * 2)
"""


def test_parallel_results_match_serial_and_keep_test_order():
    tests = [(f"{i}\n", f"{i * 2}\n") for i in range(12)]
    serial = judge(BY_INPUT, tests, limits=LIMITS, workers=1)
    parallel = judge(BY_INPUT, tests, limits=LIMITS, workers=3)
    assert [(t.name, t.verdict) for t in parallel.tests] == [(t.name, t.verdict) for t in serial.tests]
    assert [t.verdict for t in parallel.tests][4:9] == [Verdict.AC, Verdict.RE, Verdict.AC, Verdict.AC, Verdict.WA]
    assert parallel.verdict == serial.verdict == Verdict.RE


def test_parallel_cpu_time_is_each_tests_own():
    solution = (
        "import time\nif input() == 'burn':\n    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end:\n        pass\nelse:\n    time.sleep(0.3)\nprint('ok')\n"
    )
    tests = [("burn", "ok"), ("sleep", "ok")] * 2
    result = judge(solution, tests, limits=Limits(time_limit_s=2, wall_limit_s=5), workers=2)
    assert result.verdict == Verdict.AC, result.to_dict()
    burn, sleep = result.tests[0::2], result.tests[1::2]
    assert all(t.time_s >= 0.25 for t in burn) and all(t.time_s < 0.1 for t in sleep), result.to_dict()


@pytest.mark.parametrize(
    "slow, expected",
    [
        ("", [Verdict.AC, Verdict.AC, Verdict.RE] + [Verdict.SKIPPED] * 5),
        ("0", [Verdict.AC, Verdict.RE] + [Verdict.SKIPPED] * 6),  # test 1 fails while the slow test 0 still runs
    ],
    ids=["in-order", "later-test-fails-first"],
)
def test_parallel_stop_on_failure(slow, expected):
    solution = (
        f"import time\nn = int(input())\nif str(n) in {slow!r}.split():\n    time.sleep(0.4)\n"
        f"if n == {expected.index(Verdict.RE)}:\n    raise ValueError(n)\nprint(n)\n"
    )
    tests = [(f"{i}\n", f"{i}\n") for i in range(8)]
    result = judge(solution, tests, limits=Limits(time_limit_s=1, wall_limit_s=3), stop_on_failure=True, workers=3)
    assert [t.verdict for t in result.tests] == expected, result.to_dict()


def test_parallel_stop_on_wrong_answer_skips_the_rest():
    result = judge(
        BY_INPUT, [(f"{i}\n", f"{i * 2}\n") for i in range(7, 12)], limits=LIMITS, stop_on_failure=True, workers=2
    )
    assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.WA] + [Verdict.SKIPPED] * 3


@pytest.mark.slow
def test_python_memory_limit_does_not_shrink_with_the_other_tests_inputs():
    # 40 MB under a 64 MB limit fits; the 15 MB of the other tests' inputs must not count against it.
    solution = "import sys\nline = sys.stdin.readline()\nx = bytearray(40 << 20)\nprint(len(line))\n"
    limits = Limits(time_limit_s=1, memory_limit_mb=64, wall_limit_s=3)
    small = judge(solution, [("1\n", "2")] * 2, limits=limits)
    assert small.verdict == Verdict.AC, small.to_dict()
    for size in (300_000, 60_000):  # large inputs and many medium ones
        tests = [("1\n" + "x" * size, "2")] * (15_000_000 // size)
        result = judge(solution, tests, limits=limits, workers=2)
        assert result.verdict == Verdict.AC, (size, result.tests[0].to_dict())
        assert max(t.memory_mb for t in result.tests) < small.tests[0].memory_mb + 4, result.tests[0].to_dict()


def test_a_solution_starved_of_cpu_by_a_busy_machine_is_not_tle():
    """The wall guard is for sleepers: a solution that was runnable but waited for the CPU (other processes busy on
    it) and used less CPU time than the limit is not TLE."""
    import os
    import subprocess

    burn = "import time\nend = time.process_time() + 0.1\nwhile time.process_time() < end:\n    pass\nprint(input())\n"
    sleep = "import time\ntime.sleep(1)\nprint(input())\n"
    limits = Limits(time_limit_s=0.5, wall_limit_s=0.3)
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})  # the sandbox inherits it: the busy loops below share its CPU
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(5)]
    try:
        time.sleep(0.1)
        starved = judge(burn, [("1", "1")], limits=limits)
        idle = judge(sleep, [("1", "1")], limits=limits)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        os.sched_setaffinity(0, saved)
    assert starved.verdict == Verdict.AC, starved.to_dict()
    assert idle.verdict == Verdict.TLE, idle.to_dict()


@pytest.mark.slow
def test_cpp_peak_memory_does_not_include_the_other_tests_inputs():
    # A C++ child's peak RSS starts from what the runner held when it forked (kept across exec): inputs included.
    limits = Limits(time_limit_s=1, memory_limit_mb=64, wall_limit_s=3)
    small = judge(CPP["AC"], APLUSB[:2], lang="cpp", limits=limits)
    big = judge(CPP["AC"], [("1 2\n" + " " * 300_000, "3")] * 50, lang="cpp", limits=limits, workers=2)
    assert small.verdict == big.verdict == Verdict.AC, big.to_dict()
    assert max(t.memory_mb for t in big.tests) < small.tests[0].memory_mb + 4, big.tests[0].to_dict()


def test_each_test_gets_fresh_ordinary_stdio():
    facts = run_python(
        "import sys\nprint(sys.stdin.seekable(), sys.stdout.seekable(), sys.stdin.encoding, "
        "sys.stderr.line_buffering, sys.stdin.buffer.read().decode()[::-1])",
        "abc",
    )
    assert facts.stdout == "True True utf-8 True cba\n", facts
    echo = "import sys\nsys.stdout.write(sys.stdin.read())\n"
    tests = [(f"line {i}\n" * (i + 1), f"line {i}\n" * (i + 1)) for i in range(6)]
    assert judge(echo, tests, limits=LIMITS, workers=2).verdict == Verdict.AC


def test_workers_setting_is_validated_and_capped():
    from agentgspo.sandboxes.judge.core import batch_workers

    class Box:
        memory_budget_mb = 2048

    assert batch_workers(8, 3, Limits(), Box()) == 3  # no more than the tests
    assert batch_workers(8, 100, Limits(memory_limit_mb=1024), Box()) == 2  # the box's memory budget
    assert batch_workers(None, 100, Limits(), Box(), concurrent=10**6) == 1
    with pytest.raises(ValueError, match="workers"):
        judge(PY["AC"], APLUSB, workers=0)


def test_bad_io_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="io_mode 'files'.*'stdio' or 'file'"):
        judge(PY["AC"], APLUSB, io_mode="files", limits=LIMITS)


def test_missing_interactor_is_a_clear_error_not_a_verdict(tmp_path):
    with pytest.raises(ValueError, match=r"interactor .*missing\.py.* does not exist"):
        judge(BINARY_SEARCH, INTERACTIVE_TESTS, interactor=tmp_path / "missing.py", limits=LIMITS)


@pytest.mark.parametrize("spec", ["float:nan", "float:-1e-6", "float:inf"])
def test_float_checker_rejects_a_meaningless_epsilon(spec):
    with pytest.raises(ValueError, match="float:EPS"):
        judge(PY["AC"], APLUSB, checker=spec, limits=LIMITS)


def test_float_checker_numbers_are_plain_decimals():
    from agentgspo.sandboxes.judge.checkers import FloatChecker

    assert FloatChecker(1e-6).check(b"", b"1_000", b"1000")[0] == Verdict.PE  # no number, as rcmp: "expected double"
    assert FloatChecker(1e-6).check(b"", b"1000.0000001 -0 1E3", b"1000 0 1000")[0] == Verdict.AC


def test_icpc_default_checker_flags():
    from agentgspo.sandboxes.judge.checkers import make_checker

    def verdict(spec, output, answer):
        return make_checker(spec).check(b"", output, answer)[0]

    assert verdict("icpc", b"Yes  NO\n", b"yes no") == Verdict.AC  # case and spacing ignored by default
    assert verdict("icpc", b"yes", b"yes no") == Verdict.WA  # missing tokens: WA, the format has no PE
    assert verdict("icpc:case_sensitive", b"Yes", b"yes") == Verdict.WA
    assert verdict("icpc:space_change_sensitive", b"yes  no", b"yes no") == Verdict.WA
    assert verdict("icpc:space_change_sensitive", b"YES no\n", b"yes no\n") == Verdict.AC
    assert verdict("icpc", b"1.0", b"1") == Verdict.WA  # no tolerance: numbers compare as text
    assert verdict("icpc:float_relative_tolerance 1e-6", b"1000000.5", b"1000000") == Verdict.AC
    assert verdict("icpc:float_relative_tolerance 1e-6", b"0.0000005", b"0") == Verdict.WA  # relative only
    assert verdict("icpc:float_tolerance 1e-6", b"0.0000005", b"0") == Verdict.AC  # absolute or relative
    with pytest.raises(ValueError, match="unknown flag"):
        make_checker("icpc:ignore_case")


@pytest.mark.parametrize("wall", [0, -1.0])
def test_non_positive_wall_limit_is_a_clear_error(wall):
    with pytest.raises(ValueError, match="wall_limit_s"):
        Limits(wall_limit_s=wall)


KILLS_ITS_RUNNER = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"


@pytest.mark.parametrize("stop_on_failure", [False, True])
def test_a_solution_that_kills_its_runner_is_a_runtime_error_not_a_judge_error(stop_on_failure):
    result = judge(KILLS_ITS_RUNNER, APLUSB, limits=LIMITS, stop_on_failure=stop_on_failure)
    assert result.verdict == Verdict.RE and result.tests[0].verdict == Verdict.RE, result.to_dict()
    assert "runner" in result.tests[0].message


def test_an_interactive_solution_that_kills_its_runner_is_a_runtime_error():
    result = judge(
        "input()\n" + KILLS_ITS_RUNNER,
        INTERACTIVE_TESTS[:1],
        interactor=FIXTURES / "interactive" / "interactor.py",
        limits=LIMITS,
    )
    assert result.verdict == Verdict.RE, result.to_dict()


def test_host_deadline_covers_the_runners_starvation_extension():
    """A test starved of CPU may run to wall + 2 x cpu in the runner; the host's bound on the call must outlast
    that, or a starved solution ends as a judge error instead of its verdict."""
    from agentgspo.sandboxes.protocol import call_deadline_s

    spec = {"limits": {"wall_s": 3.0, "cpu_s": 1.0}}
    assert call_deadline_s(spec, 4, overhead_s=15.0) >= 15.0 + 4 * (3.0 + 2 * 1.0)


# Spins until alarm(1) rings, then greets (problemtools' hello_alarm idea, in C++): its running time is set by the
# clock, so its CPU time is its share of a core times about a second of wall time, on any backend.
ALARM_CPP = (
    "#include <csignal>\n#include <cstdio>\n#include <unistd.h>\nvolatile std::sig_atomic_t rang = 0;\n"
    "void ring(int) { rang = 1; }\n"
    'int main() { std::signal(SIGALRM, ring); alarm(1); while (!rang) {} std::puts("Hello World!"); }\n'
)
SPINNER = "print('spinning', flush=True)\nwhile True:\n    pass\n"


@pytest.mark.docker
@pytest.mark.slow
def test_an_alarm_driven_spinner_gets_the_same_verdict_on_local_and_docker_while_the_other_cores_are_busy(
    docker_backend,
):
    """Both backends measure CPU time alike (the runner's wait4 on the test's child; docs/judge.md, "CPU time on a
    busy machine"). Under a time limit above its wall time the alarm program is AC on both, and the bound that makes
    the verdicts agree holds on each: the CPU time of one thread never exceeds its wall time, whatever share of a
    core the load leaves it."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, text=True)
        for _ in range(max(1, usable_cpus() - 1))
    ]
    try:
        for spinner in spinners:  # each one is running (it has printed) before the solutions start
            assert spinner.stdout.readline() == "spinning\n"
        limits = Limits(time_limit_s=2, memory_limit_mb=256)
        local = judge(ALARM_CPP, [("", "Hello World!\n")], lang="cpp", limits=limits)
        docker = judge(ALARM_CPP, [("", "Hello World!\n")], lang="cpp", limits=limits, backend=docker_backend)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert local.verdict == docker.verdict == Verdict.AC, (local.to_dict(), docker.to_dict())
    for result in (local, docker):
        test = result.tests[0]
        assert test.time_s <= test.wall_time_s + 0.001, result.to_dict()  # rounding of both to 0.1 ms
