"""SandboxFusion's and Piston's APIs on a real `agentgspo sandbox-server` app on 127.0.0.1 (docs/sandbox_apis.md).

The real ``sandbox-fusion`` client from PyPI (0.3.7, unchanged), verl's raw ``/run_code`` payload and open-r1's
Piston requests (``cf_scoring.py``'s shape) judge the same programs as our own ``/judge``, and must report its
verdicts: AC, WA, TLE, RE, CE, MLE, in Python and C++.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import httpx
import pytest
from servers import serve

from agentgspo.sandboxes import SandboxUnavailable
from agentgspo.sandboxes.judge.languages import LANGUAGES

sandbox_fusion = pytest.importorskip(
    "sandbox_fusion", reason="the sandbox-fusion client is not installed: pip install sandbox-fusion==0.3.7"
)

TOKEN = "test-token"
SECRET = "compat-secret-for-the-tests-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TIME_LIMIT_S, MEMORY_MB = 1, 64
TEST_INPUT, TEST_ANSWER = "2 3\n", "5\n"
TESTCASE = {"input": {"stdin": ""}, "output": {"stdout": "5"}}

PY_AC = "a, b = map(int, input().split())\nprint(a + b)\n"
CPP_HEAD = "#include <bits/stdc++.h>\nusing namespace std;\n"
CPP_AC = CPP_HEAD + "int main() { long long a, b; cin >> a >> b; cout << a + b << endl; }\n"
PROGRAMS = [
    ("python", "AC", PY_AC),
    ("python", "WA", "a, b = map(int, input().split())\nprint(a - b)\n"),
    ("python", "TLE", "while True:\n    pass\n"),
    ("python", "RE", "import sys\nsys.exit(3)\n"),
    ("python", "CE", "print((\n"),
    ("python", "MLE", "block = bytearray(512 * 1024 * 1024)\nprint(len(block))\n"),
    ("cpp", "AC", CPP_AC),
    ("cpp", "WA", CPP_HEAD + "int main() { long long a, b; cin >> a >> b; cout << a - b << endl; }\n"),
    ("cpp", "TLE", "int main() { volatile unsigned long x = 0; while (true) x++; }\n"),
    ("cpp", "RE", "int main() { return 3; }\n"),
    ("cpp", "CE", "int main() { undeclared(); }\n"),
    ("cpp", "MLE", CPP_HEAD + "int main() { vector<char> v(512 << 20, 1); cout << (int)v[12345] << endl; }\n"),
]


def make_app(**options):
    from agentgspo.sandboxes.server import create_app

    try:
        return create_app(TOKEN, max_concurrency=2, **options)
    except SandboxUnavailable as exc:
        pytest.skip(f"the local sandbox cannot run here (bubblewrap): {exc}")


@pytest.fixture(scope="module")
def server_url():
    with serve(make_app(compat_secret=SECRET)) as url:
        yield url


@pytest.fixture(scope="module")
def compat(server_url):
    return f"{server_url}/compat/{SECRET}"


def our_verdict(server_url, lang, source) -> str:
    """The verdict of our own API (/judge) on the one test."""
    import base64

    test = {"input_b64": base64.b64encode(TEST_INPUT.encode()).decode(), "answer_b64": "NQo="}
    request = {
        "source": source,
        "lang": "py" if lang == "python" else lang,
        "tests": [test],
        "limits": {"time_limit_s": TIME_LIMIT_S, "memory_limit_mb": MEMORY_MB},
    }
    return httpx.post(server_url + "/judge", headers=AUTH, json=request, timeout=120).json()["verdict"]


def open_r1_request(lang, source) -> dict:
    """open-r1's Codeforces request (src/open_r1/utils/competitive_programming/cf_scoring.py)."""
    config = {"TIME_LIMIT": TIME_LIMIT_S, "MEMORY_LIMIT": MEMORY_MB, "INPUT_MODE": "stdio"}
    return {
        "files": [
            {"name": f"main.{lang}", "content": source},
            {"name": "input.txt", "content": TEST_INPUT},
            {"name": "correct_output.txt", "content": TEST_ANSWER},
            {"name": "grader_config", "content": "\n".join(f"{key}={value}" for key, value in config.items())},
        ],
        "run_timeout": (TIME_LIMIT_S + 10) * 1000,
        "language": "cf_python3" if lang == "python" else "c++17",
        "version": "*",
    }


@pytest.mark.slow
@pytest.mark.parametrize("lang,expected,source", PROGRAMS, ids=[f"{p[0]}-{p[1]}" for p in PROGRAMS])
def test_each_api_reports_the_verdict_our_judge_gives(server_url, compat, lang, expected, source):
    assert our_verdict(server_url, lang, source) == expected

    # SandboxFusion /submit through the real client: the completion's fenced block, judged on provided tests.
    completion = f"Here is my solution.\n```{lang}\n{source}```\nIt reads two numbers."
    tests = [{"input": {"stdin": TEST_INPUT}, "output": {"stdout": TEST_ANSWER}}]
    config = sandbox_fusion.TestConfig(
        dataset_type="CommonOJDataset",
        language=lang,
        run_timeout=TIME_LIMIT_S,
        provided_data={"id": 1, "content": "Print a + b.", "test": tests},
        extra={"memory_limit_MB": MEMORY_MB},
    )
    request = sandbox_fusion.SubmitRequest(dataset="a_plus_b", id=1, completion=completion, config=config)
    result = sandbox_fusion.submit(request, endpoint=compat, max_attempts=1)
    assert result.extra["verdict"] == expected and result.accepted == (expected == "AC")
    assert result.extracted_code.strip() == source.strip() and result.extracted_type == "fenced"
    assert [t.passed for t in result.tests] == [expected == "AC"]
    if expected in ("AC", "WA"):  # it ran cleanly: SandboxFusion's exec_info says Success either way
        assert result.tests[0].exec_info.status == "Success"
        assert result.tests[0].exec_info.run_result.stdout == ("5\n" if expected == "AC" else "-1\n")
    else:
        assert result.tests[0].exec_info.status == "Failed"

    # SandboxFusion /run_code with verl's payload (sandbox_fusion/utils.py: it sends memory_limit_MB).
    payload = {
        "code": source,
        "language": lang,
        "stdin": TEST_INPUT,
        "compile_timeout": 30,
        "run_timeout": TIME_LIMIT_S,
        "memory_limit_MB": MEMORY_MB,
        "files": {},
        "fetch_files": [],
    }
    ran = httpx.post(compat + "/run_code", json=payload, timeout=120).json()
    assert ran["verdict"] == ("OK" if expected in ("AC", "WA") else expected)
    assert ran["status"] == ("Success" if expected in ("AC", "WA") else "Failed")
    if expected == "TLE":
        assert ran["run_result"]["status"] == "TimeLimitExceeded" and ran["run_result"]["return_code"] is None
    if expected == "CE" and lang == "cpp":
        assert ran["compile_result"]["return_code"] == 1 and ran["run_result"] is None
    if expected == "RE":
        assert ran["run_result"]["return_code"] == 3

    # Piston, open-r1's codeforces request: stdout 1 or 0, compile.code for a C++ compile error.
    answer = httpx.post(compat + "/api/v2/execute", json=open_r1_request(lang, source), timeout=120).json()
    assert answer["run"]["verdict"] == expected
    compile_failed = expected == "CE" and lang == "cpp"
    assert (answer["compile"]["code"] != 0) == compile_failed  # open-r1 reads this first: no_compile_reward
    if compile_failed:
        assert answer["run"] == answer["compile"]  # Piston: no run stage after a failed compile
    else:
        assert answer["run"]["stdout"].strip() == ("1" if expected == "AC" else "0")
        assert answer["run"]["code"] == {"AC": 0, "WA": 0, "TLE": 124, "MLE": 134, "RE": 3, "CE": 1}[expected]
    open_r1_passed = answer["run"]["code"] == 0 and answer["run"]["stdout"].strip() == "1"
    assert open_r1_passed == (expected == "AC")


def test_the_real_client_runs_python_and_cpp(compat):
    python = sandbox_fusion.RunCodeRequest(code="print(input()[::-1])", stdin="abc", language="python")
    done = sandbox_fusion.run_code(python, endpoint=compat, max_attempts=1)
    assert done.status == "Success" and done.run_result.stdout == "cba\n" and done.compile_result is None
    cpp = sandbox_fusion.RunCodeRequest(code=CPP_AC, stdin="40 2", language="cpp")
    done = sandbox_fusion.run_code(cpp, endpoint=compat, max_attempts=1)
    assert done.status == "Success" and done.run_result.stdout == "42\n" and done.compile_result.return_code == 0
    import sandbox_fusion.config as client_config

    previous = client_config.SANDBOX_ENDPOINT, client_config.DATASET_ENDPOINT
    sandbox_fusion.set_endpoint(compat)  # the documented way
    try:
        assert sandbox_fusion.run_code(python, max_attempts=1).run_result.stdout == "cba\n"
    finally:
        client_config.SANDBOX_ENDPOINT, client_config.DATASET_ENDPOINT = previous
    assert httpx.get(compat + "/v1/ping").json() == "pong"


C_REVERSE = (
    "#include <stdio.h>\n#include <string.h>\n"
    'int main(void) { char s[64]; if (scanf("%63s", s) != 1) return 1;\n'
    "  for (int i = (int)strlen(s) - 1; i >= 0; i--) putchar(s[i]); putchar('\\n'); return 0; }\n"
)
REVERSE_BY_FAMILY = {"python3": "print(input()[::-1])\n", "c": C_REVERSE, "cpp": C_REVERSE}


@pytest.mark.parametrize("name", list(LANGUAGES))
def test_every_language_of_the_judge_runs_through_both_apis(compat, name):
    """Languages come from the judge's table: each one runs under its own name in /run_code and /execute, and
    /runtimes lists it (a language added to languages.py needs only a program here)."""
    language = LANGUAGES[name]
    if language.compiler and shutil.which(language.compiler[0], path="/usr/bin:/bin") is None:
        pytest.skip(f"{language.compiler[0]} is not installed: sudo bash .ci/setup_sandboxes.sh")
    assert language.family in REVERSE_BY_FAMILY, f"add a string-reversing program for the {language.family} family"
    source = REVERSE_BY_FAMILY[language.family]
    ran = httpx.post(compat + "/run_code", json={"code": source, "language": name, "stdin": "abc"}, timeout=120)
    assert ran.json()["run_result"]["stdout"] == "cba\n", ran.text
    job = {"language": name, "version": "*", "files": [{"content": source}], "stdin": "abc"}
    executed = httpx.post(compat + "/api/v2/execute", json=job, timeout=120).json()
    assert executed["run"]["stdout"] == "cba\n" and executed["run"]["verdict"] == "OK", executed
    listed = httpx.get(compat + "/api/v2/runtimes", timeout=120).json()
    assert any(name == r["language"] or name in r["aliases"] for r in listed)


def test_submit_runs_all_tests_when_asked_and_stops_at_the_first_failure_otherwise(compat):
    tests = [{"input": {"stdin": f"{i} {i}"}, "output": {"stdout": str(2 * i if i != 1 else 99)}} for i in range(4)]
    completion = f"```python\n{PY_AC}```"

    def submit(extra):
        config = {"dataset_type": "CommonOJDataset", "language": "python", "provided_data": {"test": tests}}
        body = {"dataset": "x", "id": "p1", "completion": completion, "config": {**config, "extra": extra}}
        return httpx.post(compat + "/submit", json=body, timeout=120).json()

    assert [t["passed"] for t in submit({})["tests"]] == [True, False]
    every = submit({"run_all_cases": True})
    assert [t["passed"] for t in every["tests"]] == [True, False, True, True]
    assert every["extra"]["test_verdicts"] == ["AC", "WA", "AC", "AC"] and every["id"] == "p1"


def test_code_extraction_follows_sandbox_fusions_rule():
    from agentgspo.sandboxes.sandbox_fusion_api import extract_code

    both = "```cpp\nint main(){}\n```\ntext\n```python\nprint(1)\n```"
    assert extract_code(both, "python") == ("print(1)", "fenced")
    assert extract_code(both, "cpp") == ("int main(){}", "fenced")
    untagged = "```\nprint(2)\n```\n```Python3\nprint(3)\n```"
    assert extract_code(untagged, "python") == ("print(3)", "fenced")  # tagged with the language wins
    assert extract_code("```\nprint(2)\n```", "cpp") == ("print(2)", "fenced")  # else the first block
    assert extract_code("so:\n```python\nprint(4)\n", "python") == ("print(4)\n", "incomplete_fenced")
    prose = "I would write\nimport math\ndef f(x):\n    return math.sqrt(x)\nand call it."
    assert extract_code(prose, "python") == ("import math\ndef f(x):\n    return math.sqrt(x)\n", "heuristic")
    assert extract_code("no code at all", "cpp") == ("", "empty")


def test_piston_plain_runs_report_pistons_status_codes(compat):
    def run(language, source, **fields):
        job = {"language": language, "version": "*", "files": [{"name": "main", "content": source}], **fields}
        return httpx.post(compat + "/api/v2/execute", json=job, timeout=120).json()

    answer = run("python", "print(input()[::-1])", stdin="abc")
    assert answer["language"] == "python" and "compile" not in answer
    assert answer["run"]["stdout"] == "cba\n" and answer["run"]["code"] == 0 and answer["run"]["status"] is None
    timed_out = run("py3", "while True: pass", run_cpu_time=500, run_timeout=3000)["run"]
    assert (timed_out["status"], timed_out["signal"], timed_out["verdict"]) == ("TO", "SIGKILL", "TLE")
    crashed = run("c++", "int main() { int *p = nullptr; *p = 1; return 0; }")
    assert crashed["compile"]["code"] == 0 and crashed["run"]["status"] == "SG"
    assert crashed["run"]["signal"] == "SIGSEGV" and crashed["run"]["verdict"] == "RE"
    failed = run("cpp", "int main() { return 7; }")["run"]
    assert (failed["status"], failed["code"]) == ("RE", 7)
    broken = run("g++", "int main() { nope }")
    assert broken["compile"]["code"] == 1 and broken["run"] == broken["compile"]  # Piston: no run stage
    assert "nope" in broken["compile"]["stderr"]


def test_piston_lists_what_we_run_with_versions_from_the_sandbox(compat):
    listed = {r["language"]: r for r in httpx.get(compat + "/api/v2/runtimes", timeout=120).json()}
    assert {"python", "c++", "c++17", "python3"} <= set(listed)
    assert listed["python"]["version"].startswith("3.") and "py3" in listed["python"]["aliases"]
    assert "cf_c++17" in listed["c++17"]["aliases"] and listed["c++17"]["runtime"] == "codeforces"
    assert listed["c++"]["version"][0].isdigit() and listed["c++"]["version"] != "0.0.0"


def test_an_open_r1_checker_runs_in_the_sandbox(compat):
    """open-r1's generated checker.py decides (prints 1 for any answer with the right sum here); it runs in the box,
    so it cannot touch the server's files."""
    checker = (
        "import sys\n"
        "inp, correct, out = (open(p).read().split() for p in sys.argv[1:4])\n"
        "print(1 if sum(map(int, out)) == sum(map(int, inp)) else 0)\n"
    )
    job = open_r1_request("python", "print(1, 4)")
    job["files"].append({"name": "checker.py", "content": checker})
    answer = httpx.post(compat + "/api/v2/execute", json=job, timeout=120).json()
    assert answer["run"]["stdout"] == "1\n" and "checker" in answer["run"]["stderr"]
    escape = "import os\nopen('/etc/agentgspo-escaped', 'w').write('x')\nprint(1)\n"
    job["files"][-1]["content"] = escape
    answer = httpx.post(compat + "/api/v2/execute", json=job, timeout=120)
    assert answer.status_code == 500 and "checker.py failed" in answer.json()["message"]
    assert not os.path.exists("/etc/agentgspo-escaped")


def test_unknown_languages_are_refused_in_each_apis_format(compat):
    refused = httpx.post(compat + "/run_code", json={"code": "x", "language": "java"})
    assert refused.status_code == 422  # FastAPI's validation format, as SandboxFusion answers an unknown language
    detail = refused.json()["detail"][0]
    assert detail["loc"] == ["body", "language"] and "not run by this server" in detail["msg"]
    assert httpx.post(compat + "/run_code", json={"code": "x", "language": "brainfuck"}).status_code == 422
    for language in ("java", "cms_ioi", "cf_java"):
        job = {"language": language, "version": "*", "files": [{"content": "x"}]}
        answer = httpx.post(compat + "/api/v2/execute", json=job)
        assert answer.status_code == 400 and answer.json()["message"].startswith(f"{language}-* runtime is unknown")
    job = {"language": "python", "version": "2.7", "files": [{"content": "print 1"}]}
    answer = httpx.post(compat + "/api/v2/execute", json=job, timeout=120)
    assert answer.status_code == 400 and "python-2.7 runtime is unknown" in answer.json()["message"]


def test_fields_we_do_not_honour_are_refused_not_dropped(compat):
    def run_code(**fields):
        return httpx.post(compat + "/run_code", json={"code": "print(1)", "language": "python", **fields})

    assert run_code(files={"data.txt": "aGk="}).status_code == 422
    assert run_code(fetch_files=["out.txt"]).status_code == 422
    assert run_code(memory_limit_MB=4).status_code == 422
    assert run_code(unknown_field=1).status_code == 422
    assert run_code(files={"ignored.txt": None}).json()["status"] == "Success"  # SandboxFusion skips None too

    def submit(config_fields=None, **fields):
        config = {"dataset_type": "CommonOJDataset", "language": "python", "provided_data": {"test": [TESTCASE]}}
        body = {"dataset": "x", "id": 1, "completion": "```python\nprint(5)\n```", "config": config}
        body["config"].update(config_fields or {})
        return httpx.post(compat + "/submit", json={**body, **fields}, timeout=120)

    assert submit().json()["accepted"] is True
    assert submit({"custom_extract_logic": "submit_code_blocks([])"}).status_code == 422
    assert submit({"extra": {"total_timeout": 30}}).status_code == 400
    assert submit({"extra": {"checker": "testlib:/bin/true"}}).status_code == 400
    assert submit({"dataset_type": "HumanEvalDataset"}).json()["detail"].startswith("eval class HumanEvalDataset")
    assert submit({"dataset_type": None}).json()["detail"].startswith("no eval class found for dataset x")
    assert submit({"provided_data": None}).status_code == 400
    files_test = {"input": {"stdin": "", "in.txt": "1"}, "output": {"stdout": "5"}}
    assert submit({"provided_data": {"test": [files_test]}}).status_code == 400
    assert submit({"language": None}).json()["detail"].startswith("config.language field must exist")
    assert submit({"extra": {"checker": "icpc"}}).json()["accepted"] is True  # an accepted extension

    def execute(**fields):
        job = {"language": "python", "version": "*", "files": [{"name": "a.py", "content": "print(1)"}], **fields}
        return httpx.post(compat + "/api/v2/execute", json=job, timeout=120)

    assert execute(args=["--fast"]).json()["message"].startswith("args ['--fast']: not supported")
    assert execute(files=[{"content": "print(1)"}, {"name": "lib.py", "content": ""}]).status_code == 400
    assert execute(run_memory_limit="lots").status_code == 400
    assert execute(callback_url="http://example.com").status_code == 400
    codeforces = open_r1_request("python", PY_AC)
    codeforces["files"][3]["content"] += "\nOUTPUT_LIMIT=5"
    answer = httpx.post(compat + "/api/v2/execute", json=codeforces)
    assert answer.status_code == 400 and "grader_config" in answer.json()["message"]
    codeforces = open_r1_request("python", PY_AC)
    del codeforces["files"][2]  # correct_output.txt
    assert "correct_output.txt is missing" in httpx.post(compat + "/api/v2/execute", json=codeforces).json()["message"]


ECHO = "import sys\nsys.stdout.write(sys.stdin.read())\n"  # its output is the test's input


def test_submit_compares_outputs_as_sandbox_fusion_does_and_tokens_on_request(compat):
    """SandboxFusion's compare (lines, stripped, lower-cased, numbers within a relative 1e-5) by default; our tokens
    checker (testlib's wcmp) when config.extra.checker asks for it."""
    cases = [  # (the program's output, the expected output)
        ("YES\n", "yes"),  # case-insensitive
        ("3.0000001\n", "3"),  # relative 3e-8
        ("1  2\n", "1 2"),  # whitespace inside a line counts
        ("3.1\n", "3"),
        ("1\n2\n", "1 2"),  # line by line
        ("  a \r\n", "a"),  # each line stripped
    ]
    tests = [{"input": {"stdin": out}, "output": {"stdout": want}} for out, want in cases]

    def verdicts(extra):
        config = {"dataset_type": "CommonOJDataset", "language": "python", "provided_data": {"test": tests}}
        config["extra"] = {"run_all_cases": True, **extra}
        body = {"dataset": "x", "id": 1, "completion": f"```python\n{ECHO}```", "config": config}
        answer = httpx.post(compat + "/submit", json=body, timeout=120)
        assert answer.status_code == 200, answer.text
        return answer.json()["extra"]["test_verdicts"]

    assert verdicts({}) == ["AC", "AC", "WA", "WA", "WA", "AC"]
    assert verdicts({"checker": "sandbox_fusion"}) == ["AC", "AC", "WA", "WA", "WA", "AC"]
    assert verdicts({"checker": "tokens"}) == ["WA", "WA", "AC", "WA", "AC", "AC"]


def test_the_codeforces_package_compares_as_it_does_and_tokens_on_request(compat):
    """open-r1's Codeforces package upper-cases whole-word yes/no and squeezes whitespace before its diff; our tokens
    checker (case-sensitive) when grader_config asks for it with CHECKER=tokens."""

    def passed(output, answer, checker=None):
        job = open_r1_request("python", f"print({output!r}, end='')")
        job["files"][2]["content"] = answer  # correct_output.txt
        if checker:
            job["files"][3]["content"] += f"\nCHECKER={checker}"
        ran = httpx.post(compat + "/api/v2/execute", json=job, timeout=120)
        assert ran.status_code == 200, ran.text
        return ran.json()["run"]["stdout"] == "1\n"

    assert passed("Yes\nno  3", "YES NO\n3\n")
    assert not passed("Yess", "YES") and not passed("a", "A")  # whole words only; other words keep their case
    assert not passed("Yes", "YES", checker="tokens")
    assert passed("YES", "YES", checker="tokens")
    job = open_r1_request("python", "print(5)")
    job["files"][3]["content"] += "\nCHECKER=testlib:/bin/true"
    refused = httpx.post(compat + "/api/v2/execute", json=job, timeout=120)
    assert refused.status_code == 400 and "grader_config CHECKER='testlib:/bin/true'" in refused.json()["message"]


def test_limits_over_the_servers_caps_are_refused_in_each_apis_format():
    """--max-time-limit 5 and --max-memory-mb 256 (create_app's max_time_limit_s, max_memory_mb): a limit a request
    names above them is refused as each API refuses a bad field (Piston: its "cannot exceed the configured limit");
    a default the server picks is lowered to the cap."""
    from agentgspo.sandboxes.server import create_app

    for bad in ({"max_time_limit_s": float("inf")}, {"max_time_limit_s": 0}, {"max_memory_mb": 8}):
        with pytest.raises(ValueError, match="--max-time-limit|--max-memory-mb"):
            create_app(TOKEN, compat_secret=SECRET, **bad)
    with serve(make_app(compat_secret=SECRET, max_time_limit_s=5, max_memory_mb=256)) as url:
        base = f"{url}/compat/{SECRET}"

        def run_code(**fields):
            return httpx.post(
                base + "/run_code", json={"code": "print(1)", "language": "python", **fields}, timeout=120
            )

        for field, value in (("run_timeout", 6), ("compile_timeout", 30), ("memory_limit_MB", 512)):
            refused = run_code(**{field: value})
            assert refused.status_code == 422, refused.text
            error = refused.json()["detail"][0]
            assert error["loc"] == ["body", field] and f"{field} cannot exceed the configured limit" in error["msg"]
            assert "--max-" in error["msg"]
        assert run_code(run_timeout=5, memory_limit_MB=256).json()["status"] == "Success"
        assert run_code().json()["status"] == "Success"  # the defaults (10 s, no memory limit) within the caps
        hungry = run_code(code="block = bytearray(400 << 20)\nprint(len(block))\n")
        assert hungry.json()["verdict"] == "MLE"  # no limit asked: 1024 MB elsewhere, the cap's 256 MB here

        def submit(**config):
            tests = [{"input": {"stdin": ""}, "output": {"stdout": "1"}}]
            config = {
                "dataset_type": "CommonOJDataset",
                "language": "python",
                "provided_data": {"test": tests},
                **config,
            }
            body = {"dataset": "x", "id": 1, "completion": "```python\nprint(1)\n```", "config": config}
            return httpx.post(base + "/submit", json=body, timeout=120)

        refused = submit(run_timeout=6)
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "config", "run_timeout"]
        refused = submit(extra={"memory_limit_MB": 512})
        assert refused.status_code == 400
        assert refused.json()["detail"].startswith("config.extra.memory_limit_MB cannot exceed the configured limit")
        assert submit().json()["accepted"] is True  # the default run_timeout (20 s for Python) lowered to 5 s

        def execute(job):
            return httpx.post(base + "/api/v2/execute", json=job, timeout=120)

        plain = {"language": "python", "version": "*", "files": [{"content": "print(1)"}]}
        for field, value, shown in (("run_timeout", 6000, "5000"), ("run_memory_limit", 512 << 20, "268435456")):
            refused = execute({**plain, field: value})
            assert refused.status_code == 400
            assert refused.json()["message"].startswith(f"{field} cannot exceed the configured limit of {shown} ")
        assert execute({**plain, "run_timeout": 5000}).json()["run"]["stdout"] == "1\n"
        for key, value in (("TIME_LIMIT", 6), ("MEMORY_LIMIT", 512)):
            job = open_r1_request("python", PY_AC)
            job["files"][3]["content"] += f"\n{key}={value}"  # the later line wins, as the package's `source`
            job["run_timeout"] = 5000  # open-r1's (time limit + 10 s) would be refused first
            refused = execute(job)
            assert refused.status_code == 400
            assert refused.json()["message"].startswith(f"grader_config {key} cannot exceed the configured limit")


def test_nan_and_infinity_are_refused_in_each_apis_format(compat):
    """JSON has no NaN or Infinity, but Python's json reads them (and 1e999 as infinity): an infinite timeout ran
    into a judge error, a NaN made FastAPI fail to write its own 422 (a 500 in plain text)."""
    headers = {"content-type": "application/json"}

    def post(path, body):
        return httpx.post(compat + path, content=body, headers=headers, timeout=120)

    for constant in ("NaN", "Infinity", "-Infinity", "1e999"):
        refused = post("/run_code", f'{{"code": "print(1)", "language": "python", "run_timeout": {constant}}}')
        assert refused.status_code == 422, refused.text
        error = refused.json()["detail"][0]
        assert error["loc"] == ["body", "run_timeout"] and "not a finite number" in error["msg"]
        submit = (
            '{"dataset": "x", "id": 1, "completion": "print(1)", "config": {"language": "python", '
            f'"dataset_type": "CommonOJDataset", "run_timeout": {constant}, "provided_data": {{"test": []}}}}}}'
        )
        refused = post("/submit", submit)
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "config", "run_timeout"]
        job = (
            f'{{"language": "python", "version": "*", "files": [{{"content": "print(1)"}}], "run_timeout": {constant}}}'
        )
        refused = post("/api/v2/execute", job)
        assert refused.status_code == 400 and refused.json()["message"].startswith("run_timeout: ")
        assert "not a finite number" in refused.json()["message"]
    for value in ("inf", "nan"):
        job = open_r1_request("python", PY_AC)
        job["files"][3]["content"] += f"\nTIME_LIMIT={value}"
        refused = httpx.post(compat + "/api/v2/execute", json=job, timeout=120)
        assert refused.status_code == 400 and "expected a finite number" in refused.json()["message"]


def test_the_compat_apis_are_absent_unless_enabled():
    with serve(make_app()) as url:
        base = f"{url}/compat/{SECRET}"
        assert httpx.get(base + "/v1/ping").status_code == 404
        assert httpx.get(base + "/api/v2/runtimes").status_code == 404
        job = {"code": "print(1)", "language": "python"}
        assert httpx.post(base + "/run_code", json=job).status_code == 401  # no credentials: refused first
        assert httpx.post(base + "/run_code", json=job, headers=AUTH).status_code == 404


def test_the_secret_guards_the_compat_paths_and_nothing_else(server_url, compat):
    job = {"code": "print(1)", "language": "python"}
    wrong = f"{server_url}/compat/{SECRET[:-1]}x"
    assert httpx.post(wrong + "/run_code", json=job).status_code == 401
    assert httpx.get(wrong + "/v1/ping").status_code == 404
    with pytest.raises(Exception, match="401"):
        sandbox_fusion.run_code(sandbox_fusion.RunCodeRequest(**job), endpoint=wrong, max_attempts=1)
    assert httpx.post(compat + "/judge", json={}).status_code == 404  # our own API is not under the prefix
    assert httpx.post(server_url + "/judge", json={}).status_code == 401  # and still needs the token
    assert SECRET not in httpx.get(server_url + "/openapi.json").text  # the routes are out of the schema
    for path in ("../judge", "%2e%2e/run_python", "/judge"):  # dot segments and // reach no route of our own API
        assert raw_post(server_url, f"/compat/{SECRET}/{path}", b'{"code": "print(1)"}').startswith(b"HTTP/1.1 404")


def raw_post(url: str, path: str, body: bytes) -> bytes:
    """POST ``path`` exactly as written (an HTTP client would normalise dot segments); the response's bytes."""
    import socket

    host, port = url.split("//")[1].split(":")
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_a_secret_that_cannot_guard_is_refused():
    from agentgspo.sandboxes.server import create_app

    for bad in ("short", "has/a/slash-0123456789"):
        with pytest.raises(ValueError, match="at least 16 characters"):
            create_app(TOKEN, compat_secret=bad)
    with pytest.raises(ValueError, match="differ from the bearer token"):
        create_app(SECRET, compat_secret=SECRET)


def test_the_body_limit_applies_to_the_compat_paths():
    with serve(make_app(compat_secret=SECRET, max_body_mb=1)) as url:
        big = {"code": "#" * 1_500_000, "language": "python"}
        answer = httpx.post(f"{url}/compat/{SECRET}/run_code", json=big)
        assert answer.status_code == 413 and "limit" in answer.json()["detail"]
        piston = {"language": "python", "version": "*", "files": [{"content": "#" * 1_500_000}]}
        answer = httpx.post(f"{url}/compat/{SECRET}/api/v2/execute", json=piston)
        assert answer.status_code == 413 and "limit" in answer.json()["message"]


@pytest.mark.slow
def test_compat_requests_share_the_servers_concurrency_cap(server_url, compat):
    """A /run_code in flight is counted by /health like any judge request (it waits in the same gate)."""
    done = threading.Event()
    sleeper = "import time\nwhile True:\n    time.sleep(0.01)\n"  # sleeps until the wall limit ends it
    request = {"code": sleeper, "language": "python", "run_timeout": 2}

    def slow():
        try:
            httpx.post(compat + "/run_code", json=request, timeout=60)
        finally:
            done.set()

    thread = threading.Thread(target=slow)
    thread.start()
    seen = 0
    while seen == 0 and not done.wait(0.01):
        seen = httpx.get(server_url + "/health").json()["in_flight"]
    thread.join()
    assert seen >= 1


def test_sandbox_server_serves_the_compat_apis_only_when_asked(capsys):
    from agentgspo.cli import main

    assert main(["sandbox-server", "--token", TOKEN, "--compat-secret", SECRET]) == 2
    assert "--compat-apis" in capsys.readouterr().err
    assert main(["sandbox-server", "--token", TOKEN, "--max-memory-mb", "512"]) == 2  # it caps the compat APIs only
    assert "--max-memory-mb caps the compat APIs' requests and needs --compat-apis" in capsys.readouterr().err
    assert main(["sandbox-server", "--token", TOKEN, "--compat-apis", "--max-time-limit", "inf"]) == 2
    assert "--max-time-limit must be a finite number" in capsys.readouterr().err
    env = {**os.environ, "AGENTGSPO_SANDBOX_TOKEN": TOKEN, "AGENTGSPO_COMPAT_SECRET": SECRET}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgspo.cli",
            "sandbox-server",
            "--port",
            "0",
            "--compat-apis",
            "--max-time-limit",
            "5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        server.stdout.readline()  # listening on ...
        line = server.stdout.readline()
        assert "SandboxFusion at http://127.0.0.1:" in line and "$AGENTGSPO_COMPAT_SECRET" in line, line
        base = line.split("SandboxFusion at ")[1].split()[0].replace("$AGENTGSPO_COMPAT_SECRET", SECRET)
        assert httpx.get(base + "/v1/ping", timeout=30).json() == "pong"
        over = httpx.post(base + "/run_code", json={"code": "", "language": "python", "run_timeout": 6}, timeout=30)
        assert over.status_code == 422 and "--max-time-limit 5 s" in over.json()["detail"][0]["msg"]
    finally:
        server.terminate()
        server.wait(timeout=30)
