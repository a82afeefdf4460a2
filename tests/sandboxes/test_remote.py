"""The remote backend against a real `agentgspo sandbox-server` app started on 127.0.0.1."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from servers import serve

from agentgspo.sandboxes import Limits, Verdict, get_sandbox, judge, run_python
from agentgspo.sandboxes.remote import RemoteSandbox

TOKEN = "test-token"


@pytest.fixture(scope="module")
def server_url():
    from agentgspo.sandboxes.server import create_app

    with serve(create_app(TOKEN, max_concurrency=2)) as url:
        yield url


def test_health_and_auth(server_url):
    health = httpx.get(server_url + "/health").json()
    assert health["status"] == "ok" and health["max_concurrency"] == 2
    assert httpx.post(server_url + "/judge", json={}).status_code == 401
    wrong = RemoteSandbox([server_url], token="wrong", retries=0)
    assert judge("print(1)", [("", "1")], backend=wrong).verdict == Verdict.JE


def test_remote_judge_and_run(server_url):
    remote = get_sandbox("remote", endpoints=[server_url], token=TOKEN)
    result = judge("a, b = map(int, input().split())\nprint(a + b)\n", [("1 2", "3"), ("2 2", "5")], backend=remote)
    assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.WA] and result.verdict == Verdict.WA
    out = run_python("print(input() * 2)", "ab", backend=remote)
    assert out.stdout == "abab\n" and out.verdict == Verdict.OK
    tle = judge("while True: pass", [("", "")], limits=Limits(time_limit_s=0.3), backend=remote)
    assert tle.verdict == Verdict.TLE


def test_remote_retries_over_endpoints_and_runs_concurrently(server_url):
    dead = "http://127.0.0.1:9"  # nothing listens: the client must fall over to the live endpoint
    remote = RemoteSandbox([dead, server_url], token=TOKEN, retries=3, backoff_s=0.01, max_concurrency=4)

    async def many():
        return await asyncio.gather(*(remote.ajudge("print(input())", [(str(i), str(i))]) for i in range(6)))

    results = asyncio.run(many())
    assert [r.verdict for r in results] == [Verdict.AC] * 6


def test_remote_unreachable_is_judge_error():
    remote = RemoteSandbox(["http://127.0.0.1:9"], token=TOKEN, retries=1, backoff_s=0.01)
    result = judge("print(1)", [("", "1")], backend=remote)
    assert result.verdict == Verdict.JE and "unreachable" in result.message


KATTIS_VALIDATOR = """import sys
answer = open(sys.argv[2]).read().split()
sys.exit(42 if sys.stdin.read().split() == answer else 43)
"""


def test_remote_judge_ships_checker_programs(server_url, tmp_path):
    """testlib and Kattis checker programs travel with the request (a client path means nothing on the server)."""
    from pathlib import Path

    remote = get_sandbox("remote", endpoints=[server_url], token=TOKEN)
    testlib = Path(__file__).parent / "fixtures" / "checker_sum.py"  # accepts any a b with a + b == N
    result = judge("print(1, 4)", [("5", "2 3"), ("6", "2 3")], checker=f"testlib:{testlib}", backend=remote)
    assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.WA]
    validator = tmp_path / "validator.py"
    validator.write_text(KATTIS_VALIDATOR)
    result = judge("print(input())", [("7", "7"), ("8", "9")], checker=f"kattis:{validator}", backend=remote)
    assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.WA]
    with pytest.raises(ValueError, match="does not exist"):
        judge("print(1)", [("", "1")], checker=f"kattis:{tmp_path / 'missing.py'}", backend=remote)


def test_server_refuses_a_client_path_as_checker(server_url):
    response = httpx.post(
        server_url + "/judge",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={"source": "print(1)", "tests": [{"input_b64": "", "answer_b64": "MQ=="}], "checker": "testlib:/bin/true"},
    )
    assert response.status_code == 422 and "checker_program" in response.json()["detail"]


@pytest.mark.slow
def test_a_slow_request_is_not_retried_into_duplicate_work():
    """A read timeout means the server may still be judging: the client must not send the work again."""
    import time

    from agentgspo.sandboxes.server import create_app

    with serve(create_app(TOKEN, max_concurrency=4)) as url:
        remote = RemoteSandbox([url], token=TOKEN, retries=2, backoff_s=0.01, timeout_s=0.5)
        out = run_python("import time\ntime.sleep(2)", limits=Limits(time_limit_s=1, wall_limit_s=4), backend=remote)
        assert out.verdict == Verdict.JE and "may still be running" in out.error
        assert httpx.get(url + "/health").json()["in_flight"] == 1  # the first attempt only
        for _ in range(100):  # let it finish before the server stops
            if httpx.get(url + "/health").json()["in_flight"] == 0:
                break
            time.sleep(0.1)


def test_a_concurrency_limit_below_one_is_refused_instead_of_hanging(capsys):
    """A semaphore of 0 would make every request wait forever; the server and the client refuse it at start."""
    from agentgspo.cli import main
    from agentgspo.sandboxes.server import create_app

    with pytest.raises(ValueError, match="max_concurrency"):
        create_app(TOKEN, max_concurrency=0)
    assert main(["sandbox-server", "--token", TOKEN, "--max-concurrency", "0"]) == 2
    assert "max_concurrency" in capsys.readouterr().err
    with pytest.raises(ValueError, match="max_concurrency"):
        RemoteSandbox(["http://127.0.0.1:9"], token=TOKEN, max_concurrency=0)
    with pytest.raises(ValueError, match="retries"):
        RemoteSandbox(["http://127.0.0.1:9"], token=TOKEN, retries=-1)


def test_invalid_base64_is_a_422_not_silently_empty_input(server_url):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    response = httpx.post(
        server_url + "/run_python", headers=headers, json={"code": "print(input())", "stdin_b64": "not base64!"}
    )
    assert response.status_code == 422 and "stdin_b64" in response.json()["detail"]
    response = httpx.post(
        server_url + "/judge",
        headers=headers,
        json={"source": "print(input())", "tests": [{"input_b64": "1 2", "answer_b64": "Mw=="}]},
    )
    assert response.status_code == 422 and "input_b64" in response.json()["detail"]


def test_auth_comes_before_the_body_and_bodies_have_a_size_limit():
    """Without the token nothing is parsed (401, even for a broken body); an oversized body is 413, not buffered."""
    from agentgspo.sandboxes.server import create_app

    with serve(create_app(TOKEN, max_concurrency=1, max_body_mb=1)) as url:
        broken = httpx.post(url + "/judge", content=b"{not json", headers={"content-type": "application/json"})
        assert broken.status_code == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        big = {"code": "print(1)", "stdin_b64": "QUFB" * 400_000}  # 1.6 MB
        assert httpx.post(url + "/run_python", headers=headers, json=big).status_code == 413
        small = {"code": "print(input())", "stdin_b64": "QUFB"}
        assert httpx.post(url + "/run_python", headers=headers, json=small).json()["stdout"] == "AAA\n"


@pytest.mark.slow
def test_a_client_per_asyncio_run_is_freed_with_its_loop(server_url):
    """Each asyncio.run makes a new event loop; the remote backend's client of a closed loop is dropped, so repeated
    asyncio.run(remote.ajudge(...)) calls do not accumulate clients and open sockets."""
    import gc
    import os

    remote = RemoteSandbox([server_url], token=TOKEN)
    asyncio.run(remote.ajudge("print(1)", [("", "1")]))
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        assert asyncio.run(remote.ajudge("print(1)", [("", "1")])).verdict == Verdict.AC
    gc.collect()
    # The leak was about two descriptors per call (+60 here); a few may come and go with the in-process server's
    # own keep-alive connections.
    assert len(os.listdir("/proc/self/fd")) <= before + 12


def test_a_gateway_timeout_is_not_retried_into_duplicate_work():
    """504: a proxy stopped waiting, the server may still be judging; a retry would judge the submission twice."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    hits = []

    async def gateway_timeout(request):
        hits.append(request.url.path)
        return PlainTextResponse("upstream timed out", status_code=504)

    async def health(request):
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/judge", gateway_timeout, methods=["POST"]), Route("/health", health)])
    with serve(app) as url:
        remote = RemoteSandbox([url], token=TOKEN, retries=3, backoff_s=0.01)
        result = judge("print(1)", [("", "1")], backend=remote)
    assert result.verdict == Verdict.JE and "not retried" in result.message and hits == ["/judge"]


def test_input_the_server_refuses_is_a_clear_error_not_a_judge_error(server_url):
    """Bad input raises as it does with the local backend, instead of a JE result a training loop would skip."""
    remote = RemoteSandbox([server_url], token=TOKEN, retries=0)
    with pytest.raises(ValueError, match="refused the request.*float:EPS"):  # judge() checks it before sending
        asyncio.run(remote.ajudge("print(1)", [("", "1")], checker="float:nan"))


def test_a_missing_token_is_refused_naming_the_setting(monkeypatch):
    """Without a token httpx used to fail on the first request with "Illegal header value b'Bearer '"."""
    from agentgspo.sandboxes import SandboxUnavailable

    monkeypatch.delenv("AGENTGSPO_SANDBOX_TOKEN", raising=False)
    for token in (None, "", "  "):
        with pytest.raises(SandboxUnavailable, match="AGENTGSPO_SANDBOX_TOKEN=<token>.*token="):
            RemoteSandbox(["http://127.0.0.1:9"], token=token)


def test_sandbox_server_says_where_it_listens():
    import os
    import subprocess
    import sys

    env = {**os.environ, "AGENTGSPO_SANDBOX_TOKEN": TOKEN}
    server = subprocess.Popen(
        [sys.executable, "-m", "agentgspo.cli", "sandbox-server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = server.stdout.readline()  # printed once the socket listens
        assert line.startswith("agentgspo sandbox-server: listening on http://127.0.0.1:"), line
        url = line.split("listening on ")[1].split()[0]
        assert httpx.get(url + "/health", timeout=30).json()["status"] == "ok"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_a_kattis_package_judges_the_same_remotely(server_url):
    from pathlib import Path

    from agentgspo.sandboxes import judge_kattis, load_kattis_package

    fixtures = Path(__file__).parent / "fixtures"
    remote = get_sandbox("remote", endpoints=[server_url], token=TOKEN)
    cases = [
        ("kattis_sum", "n = int(input())\nprint(0, n)\n"),
        ("kattis_scoring", "print(2 * int(input()))\n"),
        (
            "kattis_guess",
            "for g in range(1, 101):\n    print(g, flush=True)\n    if input() == 'correct':\n        break\n",
        ),
        ("kattis_multipass", "k, x = map(int, input().split())\nprint(2 * x if k < 3 else x)\n"),
    ]
    for name, source in cases:
        package = load_kattis_package(fixtures / name)
        here, there = judge_kattis(package, source), judge_kattis(package, source, backend=remote)
        assert (there.verdict, there.score, there.groups) == (here.verdict, here.score, here.groups), name
        assert [t.verdict for t in there.tests] == [t.verdict for t in here.tests], name


def test_a_package_archive_that_escapes_or_is_not_a_tar_is_refused(server_url):
    import io
    import tarfile
    import tempfile
    from pathlib import Path

    remote = RemoteSandbox([server_url], token=TOKEN, retries=0)
    with pytest.raises(ValueError, match="not a readable package archive"):
        remote.judge_package_remote(b"not a tar", "print(1)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escape.txt")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ValueError, match="not a readable package archive"):
        remote.judge_package_remote(buffer.getvalue(), "print(1)")
    assert not (Path(tempfile.gettempdir()) / "escape.txt").exists()  # the server unpacks under the temp folder


def test_a_capture_checker_travels_and_shows_the_output_with_the_inner_verdict(server_url):
    remote = get_sandbox("remote", endpoints=[server_url], token=TOKEN)
    program = "print(float(input()) / 3)\n"
    tests = [("1", "0.3333"), ("1", "0.5")]
    for backend in ("local", remote):
        result = judge(program, tests, checker="capture:float:1e-3", backend=backend)
        assert [t.verdict for t in result.tests] == [Verdict.AC, Verdict.WA]
        assert [t.message for t in result.tests] == ["0.3333333333333333\n"] * 2  # the output, not a diff
    assert judge(program, [("3", "")], checker="capture", backend=remote).tests[0].message == "1.0\n"
    with pytest.raises(ValueError, match="bad checker 'capture:nonsense': unknown checker 'nonsense'"):
        judge(program, tests, checker="capture:nonsense", backend="local")
