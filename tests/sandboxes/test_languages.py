"""Languages as the platforms define them: CPython (python3), PyPy (pypy3), C and C++, one table
(``sandboxes/judge/languages.py``); Kattis packages judged with problemtools' mapping (Python 3 under PyPy, ``.py3``
is Python 3, ``.c`` is C); PyPy's memory limit is its resident memory, not its address space; CodeForces-v0 and
the eval record which language judged each submission.

The packages fixtures/kattis_hello (modelled on problemtools' examples/hello: .py, .py3, a python2 .py and a C
program that spins until alarm(1)) and fixtures/kattis_lcg (a loop whose accepted Python solution is AC under its
1 s limit only with PyPy) are written for these tests. Tests needing pypy3 skip without it, naming the fix.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentgspo.sandboxes import (
    Limits,
    SandboxUnavailable,
    Verdict,
    get_sandbox,
    judge,
    judge_kattis,
    load_kattis_package,
    load_kattis_problem,
    load_problem,
)
from agentgspo.sandboxes.judge import core
from agentgspo.sandboxes.judge.formats.kattis import time_limit_of
from agentgspo.sandboxes.judge.languages import (
    LANGUAGES,
    kattis_language,
    language_of,
    normalize_language,
    submission_language,
)
from agentgspo.sandboxes.judge.problems import judged_language

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parents[2]
NEEDS_PYPY = pytest.mark.skipif(
    shutil.which("pypy3") is None,
    reason="pypy3 not installed: sudo bash .ci/setup_sandboxes.sh (apt-get install pypy3)",
)
APLUSB = [("1 2\n", "3\n"), ("10 -4\n", "6\n")]
SOURCES = {
    "python3": "a, b = map(int, input().split())\nprint(a + b)\n",
    "pypy3": "a, b = map(int, input().split())\nprint(a + b)\n",
    "c": '#include <stdio.h>\nint main(void){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}\n',
    "cpp": '#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n',
}
# Which interpreter ran it: the answer is the implementation's name, so only the right one is AC.
IMPLEMENTATION = "import platform\ninput()\nprint(platform.python_implementation())\n"


@pytest.fixture
def local():
    try:
        return get_sandbox("local")
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap unavailable: {exc}")


@pytest.fixture(autouse=True, scope="module")
def cache(tmp_path_factory):
    """Computed Kattis time limits are timed afresh (not read from a cache made before), once per module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTGSPO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def _needs(lang: str) -> None:
    if lang == "pypy3" and shutil.which("pypy3") is None:
        pytest.skip("pypy3 not installed: sudo bash .ci/setup_sandboxes.sh (apt-get install pypy3)")


# ------------------------------------------------------------------------------------------------- the table


def test_each_name_alias_and_suffix_belongs_to_one_language():
    assert set(LANGUAGES) == {"python3", "pypy3", "c", "cpp"}
    names = [alias for language in LANGUAGES.values() for alias in (language.name, *language.aliases)]
    suffixes = [suffix for language in LANGUAGES.values() for suffix in language.suffixes]
    assert len(names) == len(set(names)) and len(suffixes) == len(set(suffixes))
    assert [normalize_language(n) for n in ("py", "Python", "python3", "PyPy", "pypy3", "gcc", "C", "c++")] == [
        "python3",
        "python3",
        "python3",
        "pypy3",
        "pypy3",
        "c",
        "c",
        "cpp",
    ]
    assert (language_of("a.py"), language_of("a.py3"), language_of("a.c"), language_of("a.C")) == (
        "python3",
        "python3",
        "c",
        "cpp",  # problemtools' globs: *.C is C++
    )


@pytest.mark.parametrize(
    "lang, message",
    [("java", "Java is not supported: expected one of python3"), ("cobra", "unsupported language 'cobra'")],
)
def test_an_unknown_language_is_refused_naming_the_supported_ones(lang, message):
    with pytest.raises(ValueError, match=message) as refused:
        judge("print(1)\n", APLUSB, lang=lang)
    assert all(name in str(refused.value) for name in LANGUAGES)


@pytest.mark.parametrize(
    "name, head, default, on_kattis",
    [
        ("hello.py", b"print(1)", "python3", "pypy3"),
        ("hello.py3", b"print(1)", "python3", "pypy3"),  # was refused unless --lang was given
        ("hello.py", b"#!/usr/bin/env python3\n", "python3", "pypy3"),
        ("hello_alarm.c", b"int main(){}", "c", "c"),  # was refused as "C: not supported"
        ("hello.C", b"int main(){}", "cpp", "cpp"),
        ("hello.cc", b"int main(){}", "cpp", "cpp"),
    ],
)
def test_submissions_get_the_language_kattis_gives_them(name, head, default, on_kattis):
    assert submission_language(name, head) == default
    assert submission_language(name, head, platform="kattis") == on_kattis == kattis_language(default)


@pytest.mark.parametrize("name", ["hello_py2.py", "Hello.java", "hello.py2"])
def test_python2_and_other_languages_are_refused_by_name(name):
    path = FIXTURES / "kattis_hello" / "submissions" / "accepted" / name
    head = path.read_bytes() if path.exists() else b""
    with pytest.raises(ValueError, match="is (Python 2|Java)"):
        submission_language(path, head, platform="kattis")


def test_kattis_packages_judge_python_3_under_pypy_other_problems_as_asked():
    kattis = load_kattis_problem(FIXTURES / "kattis_scoring")
    own = load_problem(FIXTURES / "own_sum")
    assert [judged_language(kattis, lang) for lang in ("py", "python3", "pypy3", "c", "cpp")] == [
        "pypy3",
        "pypy3",
        "pypy3",
        "c",
        "cpp",
    ]
    assert [judged_language(own, lang) for lang in ("python", "pypy3", "c")] == ["python3", "pypy3", "c"]


# ------------------------------------------------------------------------------------------------- judging


@pytest.mark.parametrize("lang", list(SOURCES))
def test_each_language_is_judged(local, lang):
    _needs(lang)
    result = judge(SOURCES[lang], APLUSB, lang=lang, backend=local)
    assert result.verdict == Verdict.AC, result.to_dict()


@pytest.mark.parametrize("lang, implementation", [("python3", "CPython"), ("pypy3", "PyPy")])
def test_python3_is_cpython_and_pypy3_is_pypy(local, lang, implementation):
    _needs(lang)
    result = judge(IMPLEMENTATION, [("\n", implementation)], lang=lang, backend=local)
    assert result.verdict == Verdict.AC, result.to_dict()


VERDICTS = Limits(time_limit_s=0.5, memory_limit_mb=128, output_limit_mb=1, wall_limit_s=1.5)
C_AND_PYPY = {
    ("c", "WA"): '#include <stdio.h>\nint main(void){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a*b);}\n',
    ("c", "RE"): "int main(void){volatile int *p = 0; return *p;}\n",
    ("c", "TLE"): "int main(void){volatile unsigned long x = 0; for (;;) x++;}\n",
    ("c", "MLE"): (  # a static array beyond the limit: its image counts, as a C++ one's does
        '#include <stdio.h>\nchar big[600u << 20];\nint main(void){int a,b;scanf("%d %d",&a,&b);big[a*1000]=b;'
        'printf("%d\\n",a+big[1000]);}\n'
    ),
    ("pypy3", "TLE"): "while True:\n    pass\n",
    ("pypy3", "RE"): "raise ValueError('boom')\n",
    ("pypy3", "OLE"): "while True:\n    print('y' * 1000)\n",
}


@pytest.mark.parametrize("lang, expected", list(C_AND_PYPY))
def test_c_and_pypy_programs_get_the_judges_verdicts(local, lang, expected):
    _needs(lang)
    result = judge(C_AND_PYPY[lang, expected], APLUSB, lang=lang, limits=VERDICTS, backend=local)
    assert result.verdict.value == expected, result.to_dict()


@pytest.mark.parametrize(
    "lang, source, says",
    [
        ("pypy3", "def f(:\n    pass\n", 'File "solution.py", line 1'),
        ("python3", "def f(:\n    pass\n", "SyntaxError"),
        ("c", "int main(void) { return 0 }\n", "error"),
    ],
)
def test_a_source_that_does_not_compile_is_ce(local, lang, source, says):
    _needs(lang)
    result = judge(source, APLUSB, lang=lang, backend=local)
    assert result.verdict == Verdict.CE and says in result.compile_output, result.to_dict()


def test_pypy_programs_see_the_argv_and_tracebacks_of_pypy3_solution_py(local):
    _needs("pypy3")
    source = "import sys\nprint(len(sys.argv), __name__)\nraise ValueError('boom')\n"
    result = judge(source, [("", "1 __main__\n")], lang="pypy3", backend=local)
    test = result.tests[0]
    assert test.verdict == Verdict.RE and "line 3" in test.message and "ValueError: boom" in test.message, test


def test_a_missing_interpreter_is_a_judge_error_not_the_solutions(local, monkeypatch):
    monkeypatch.setattr(core.shutil, "which", lambda *args, **kwargs: None)
    result = judge(SOURCES["pypy3"], APLUSB, lang="pypy3", backend=local)
    assert result.verdict == Verdict.JE and "pypy3" in result.message and "setup_sandboxes" in result.message


# PyPy maps address space it never touches: setrecursionlimit reserves a shadow stack of about 1.3 GB, a thread
# with a 128 MiB stack another: 2.8 GB of virtual memory at about 57 MB resident. An RLIMIT_AS at the memory
# limit made this MemoryError (MLE) under any real limit; a cgroup-style limit (resident memory) accepts it.
PYPY_LITTLE = """import sys, threading
sys.setrecursionlimit(10**6)
threading.stack_size(1 << 27)
def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)
def main():
    a, b = map(int, input().split())
    print(a + b + depth(20000) - 20000)
thread = threading.Thread(target=main)
thread.start()
thread.join()
"""
PYPY_OVER = {
    "objects": "kept = [i * 7 for i in range(40_000_000)]\nprint(len(kept))\n",
    "bytes": "kept = [b'x' * (1 << 20) for _ in range(300)]\nprint(len(kept))\n",
    "array": "import array\nkept = array.array('b', bytes(300 << 20))\nprint(len(kept))\n",
}


@pytest.mark.parametrize("backend_name", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_pypy_memory_limit_counts_resident_memory_not_address_space(request, backend_name):
    _needs("pypy3")
    backend = request.getfixturevalue("local" if backend_name == "local" else "docker_backend")
    tight = Limits(time_limit_s=5, memory_limit_mb=96, output_limit_mb=1)
    small = judge(PYPY_LITTLE, APLUSB, lang="pypy3", limits=tight, backend=backend)
    assert small.verdict == Verdict.AC, small.to_dict()
    assert all(test.memory_mb < 96 for test in small.tests)
    limits = Limits(time_limit_s=10, memory_limit_mb=128, output_limit_mb=1)
    for name, source in PYPY_OVER.items():
        over = judge(source, APLUSB[:1], lang="pypy3", limits=limits, backend=backend)
        assert over.verdict == Verdict.MLE, (name, over.to_dict())


# ------------------------------------------------------------------------------------------------- Kattis packages


def _kattis_submissions(languages: tuple[str, ...]) -> list[Path]:
    """The accepted submissions of this repository's Kattis fixtures that Kattis runs in one of ``languages``."""
    found = []
    for root in (FIXTURES, REPO / "tests" / "eval" / "fixtures" / "kattis"):
        for accepted in sorted(root.glob("*/submissions/accepted")):
            if (accepted.parents[1] / "problem.yaml").is_file():
                for path in sorted(p for p in accepted.iterdir() if p.is_file()):
                    try:
                        if submission_language(path, platform="kattis") in languages:
                            found.append(path)
                    except ValueError:  # Python 2, Java...: not run here (nor timed)
                        pass
    return found


@NEEDS_PYPY
@pytest.mark.parametrize("path", _kattis_submissions(("pypy3", "c")), ids=lambda p: f"{p.parents[2].name}/{p.name}")
def test_every_accepted_python_and_c_submission_of_the_fixtures_is_ac_as_kattis_runs_it(path):
    package = load_kattis_package(path.parents[2])
    limit, _ = time_limit_of(package)
    result = judge_kattis(package, path.read_text(), submission_language(path))  # as a user passes it: .py is python3
    assert result.verdict == Verdict.AC, (path.name, result.to_dict())
    assert max(t.time_s for t in result.tests) <= limit, (path.name, limit, result.to_dict())


@NEEDS_PYPY
def test_a_kattis_python_solution_is_accepted_because_it_runs_under_pypy(local):
    package = load_kattis_package(FIXTURES / "kattis_lcg")
    source = (FIXTURES / "kattis_lcg" / "submissions" / "accepted" / "lcg.py").read_text()
    judged = judge_kattis(package, source, "python3", backend=local)
    assert judged.verdict == Verdict.AC, judged.to_dict()
    slowest = max(t.time_s for t in judged.tests)
    assert slowest < 0.5 * package.fixed_time_limit_s, judged.to_dict()
    cpython = judge(
        source,
        [(t.input_path.read_bytes(), t.answer_path.read_bytes()) for t in package.tests()],
        lang="python3",
        limits=Limits(time_limit_s=package.fixed_time_limit_s, memory_limit_mb=256),
        backend=local,
    )
    assert cpython.verdict == Verdict.TLE, cpython.to_dict()  # what this judge said before Kattis' mapping


@NEEDS_PYPY
def test_hello_time_limit_comes_from_the_c_alarm_submission_and_skips_python_2(local):
    package = load_kattis_package(FIXTURES / "kattis_hello")
    limit, source = time_limit_of(package)
    # alarm(1) rings after a second of wall time: about a second of CPU x time_multiplier 5 = 5 s on an idle
    # machine (6 s when the CPU time is a hair over 1 s: rounded up), less when the CPUs are shared; whatever the load
    # it is the slowest, and the limit is whole seconds.
    assert "hello_alarm.c" in source and limit in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (limit, source)
    alarm = (FIXTURES / "kattis_hello" / "submissions" / "accepted" / "hello_alarm.c").read_text()
    result = judge_kattis(package, alarm, "c", backend=local)
    assert result.verdict == Verdict.AC and result.tests[0].wall_time_s >= 0.9, result.to_dict()


# ------------------------------------------------------------------------------------------------- the records


@NEEDS_PYPY
def test_codeforces_v0_records_the_language_that_judged_each_submission():
    from agentgspo.envs.codeforces import CodeforcesEnv

    def submit(env, lang):
        call = {"name": "submit", "arguments": {"code": "print(0)\n", "lang": lang}}
        return env.step("<tool_call>" + json.dumps(call) + "</tool_call>")[4]["submissions"][-1]["lang"]

    kattis = CodeforcesEnv(data_files=str(REPO / "tests" / "eval" / "fixtures" / "kattis" / "meanvalue"))
    kattis.reset(seed=0)
    assert [submit(kattis, lang) for lang in ("python", "pypy3", "c")] == ["pypy3", "pypy3", "c"]
    own = CodeforcesEnv(data_files=str(FIXTURES / "own_sum"))
    own.reset(seed=0)
    assert [submit(own, lang) for lang in ("python", "pypy3", "cpp")] == ["python3", "pypy3", "cpp"]


@NEEDS_PYPY
def test_the_eval_records_the_language_of_each_attempt(tmp_path, capsys):
    from agentgspo.cli import main

    out = tmp_path / "eval"
    folder = REPO / "tests" / "eval" / "fixtures" / "kattis" / "meanvalue"
    status = main(["eval", "--out", str(out), "--no-progress", "--problems", str(folder), "--agent", "reference"])
    assert status == 0, capsys.readouterr().err[-2000:]
    (line,) = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert line["verdict"] == "AC" and line["language"] == "pypy3", {k: line[k] for k in ("verdict", "language")}
    assert [s["lang"] for s in line["submissions"]] == ["pypy3"]
