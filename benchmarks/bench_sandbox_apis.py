"""The same 100-test judge through SandboxFusion's /submit and through our own /judge, beside a plain baseline.

    python benchmarks/bench_sandbox_apis.py [--tests 100] [--repeats 15] [--no-run-code]

One `agentgspo sandbox-server --compat-apis` subprocess on 127.0.0.1 (local backend) serves every side; each side
judges the a + b solution of ``bench_judge.py`` on the same tests, one submission at a time, and must accept it:

  /judge, raw             POST /judge from one httpx client (Limits(time_limit_s=2, memory_limit_mb=256))
  /submit, raw            POST /compat/SECRET/submit from one httpx client: CommonOJDataset, the tests in
                          ``config.provided_data``, run_all_cases, the same limits (run_timeout 2, memory 256 MB)
  /judge, our client      ``judge(..., backend=RemoteSandbox)`` (one client for the run, as get_sandbox keeps one)
  /submit, its client     the PyPI ``sandbox-fusion`` client's ``submit`` (requests, a connection per call, its
                          pydantic models), the same request
  /run_code per test      verl's pattern (verl/utils/reward_score/sandbox_fusion): one POST /run_code per test, as
                          many in flight as the server's concurrency cap, outputs compared here (--no-run-code: off)
  baseline                ``bench_judge.baseline_judge``: a plain ``python3`` subprocess per test, no isolation, as
                          many at once as the judge runs tests of one submission (the usable CPUs)

The sides alternate within each repeat (rotating which goes first); the table has the median seconds per judge, tests
per second, the median of the per-repeat ratios of /judge's (raw) time to the side's and of the baseline's time to
the side's, and the mean CPU milliseconds per judge of the server process itself (what the endpoint costs beyond the
sandboxes, which are the same for every side) and of the client (this process and its children: the baseline's
subprocesses). On a machine shared with other jobs the wall times swing; the CPU costs much less. Target: the
SandboxFusion endpoint within 10% of ours, i.e. the raw /submit takes at most 1.10x the raw /judge's time.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import sandbox_fusion
from bench_judge import SOLUTION, baseline_judge, make_tests

from agentgspo.sandboxes import Limits, judge
from agentgspo.sandboxes.judge.core import usable_cpus
from agentgspo.sandboxes.remote import RemoteSandbox

TOKEN = secrets.token_urlsafe(16)
SECRET = secrets.token_urlsafe(24)
LIMITS = Limits(time_limit_s=2, memory_limit_mb=256)


def start_server(concurrency: int) -> tuple[subprocess.Popen, str]:
    """A sandbox-server subprocess with the compat APIs; returns it and its base URL once it listens."""
    env = {**os.environ, "AGENTGSPO_SANDBOX_TOKEN": TOKEN, "AGENTGSPO_COMPAT_SECRET": SECRET}
    command = [sys.executable, "-m", "agentgspo.cli", "sandbox-server", "--port", "0", "--compat-apis"]
    server = subprocess.Popen(
        [*command, "--max-concurrency", str(concurrency)], stdout=subprocess.PIPE, text=True, env=env
    )
    line = server.stdout.readline()  # printed once the socket listens
    if "listening on " not in line:
        server.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    return server, line.split("listening on ")[1].split()[0]


def judge_payload(tests) -> dict:
    """Our /judge request for the tests."""
    encode = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
    return {
        "source": SOLUTION,
        "lang": "py",
        "limits": LIMITS.to_dict(),
        "tests": [{"input_b64": encode(stdin), "answer_b64": encode(answer)} for stdin, answer in tests],
    }


def submit_config(tests) -> dict:
    """SandboxFusion's TestConfig for the tests: CommonOJDataset, provided_data, our limits."""
    return {
        "dataset_type": "CommonOJDataset",
        "language": "python",
        "run_timeout": LIMITS.time_limit_s,
        "provided_data": {"test": [{"input": {"stdin": i}, "output": {"stdout": a}} for i, a in tests]},
        "extra": {"run_all_cases": True, "memory_limit_MB": int(LIMITS.memory_limit_mb)},
    }


COMPLETION = f"```python\n{SOLUTION}```"


def judge_raw(client: httpx.Client, url: str, payload: dict) -> bool:
    """POST /judge."""
    return (
        client.post(url + "/judge", json=payload, headers={"Authorization": f"Bearer {TOKEN}"}).json()["verdict"]
        == "AC"
    )


def submit_raw(client: httpx.Client, compat: str, payload: dict) -> bool:
    """POST /compat/SECRET/submit."""
    return client.post(compat + "/submit", json=payload).json()["accepted"]


def ours(remote: RemoteSandbox, tests) -> bool:
    """Our client and API: POST /judge (one client for the run, as ``get_sandbox("remote")`` keeps one)."""
    return judge(SOLUTION, tests, limits=LIMITS, backend=remote).accepted


def through_sandbox_fusion(compat: str, tests) -> bool:
    """The sandbox-fusion client's submit: POST /compat/SECRET/submit with the tests in provided_data."""
    config = sandbox_fusion.TestConfig(**submit_config(tests))
    request = sandbox_fusion.SubmitRequest(dataset="a_plus_b", id=0, completion=COMPLETION, config=config)
    result = sandbox_fusion.submit(request, endpoint=compat, max_attempts=1, client_timeout=600)
    return result.accepted and len(result.tests) == len(tests)


def run_code_per_test(compat: str, tests, concurrency: int) -> bool:
    """verl's pattern: one /run_code per test (its payload), outputs compared by the caller."""
    with httpx.Client(timeout=600) as client:

        def one(test) -> bool:
            stdin, answer = test
            payload = {
                "code": SOLUTION,
                "language": "python",
                "stdin": stdin,
                "compile_timeout": 10,
                "run_timeout": LIMITS.time_limit_s,
                "memory_limit_MB": int(LIMITS.memory_limit_mb),
                "files": {},
                "fetch_files": [],
            }
            done = client.post(compat + "/run_code", json=payload).json()
            return done["status"] == "Success" and done["run_result"]["stdout"].split() == answer.split()

        with ThreadPoolExecutor(concurrency) as pool:
            return all(pool.map(one, tests))


def cpu_seconds(server_pid: int) -> tuple[float, float]:
    """CPU seconds used so far by the server process itself (HTTP, parsing, the judge's orchestration: not the
    sandboxes, whose processes it does not reap one by one) and by this process with its reaped children (the
    clients, the baseline's subprocesses)."""
    with open(f"/proc/{server_pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    server = sum(map(int, fields[11:13])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    own = os.times()
    return server, own.user + own.system + own.children_user + own.children_system


def ratio(numerators: list[float], denominators: list[float]) -> float:
    """The median of the per-repeat ratios."""
    return statistics.median(n / d for n, d in zip(numerators, denominators))


def main() -> None:
    """Alternate the sides over the repeats and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--no-run-code", action="store_true", help="leave out verl's one-/run_code-per-test side")
    args = parser.parse_args()
    tests, cpus = make_tests(args.tests), usable_cpus()
    server, url = start_server(concurrency=cpus)
    compat = f"{url}/compat/{SECRET}"
    remote = RemoteSandbox([url], token=TOKEN, timeout_s=600)
    client = httpx.Client(timeout=600)
    judge_body = judge_payload(tests)
    submit_body = {"dataset": "a_plus_b", "id": 0, "completion": COMPLETION, "config": submit_config(tests)}
    sides = {
        "/judge, raw (httpx)": lambda: judge_raw(client, url, judge_body),
        "/submit, raw (httpx)": lambda: submit_raw(client, compat, submit_body),
        "/judge, our client (RemoteSandbox)": lambda: ours(remote, tests),
        "/submit, the sandbox-fusion client": lambda: through_sandbox_fusion(compat, tests),
        f"baseline: subprocess per test, {cpus} at once": lambda: baseline_judge(tests, cpus),
    }
    if not args.no_run_code:
        sides[f"/run_code per test, {cpus} in flight (verl)"] = lambda: run_code_per_test(compat, tests, cpus)
    names = list(sides)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    server_cpu: dict[str, list[float]] = {name: [] for name in names}
    client_cpu: dict[str, list[float]] = {name: [] for name in names}
    try:
        for fn in sides.values():  # warm-up: page cache, the server's sandbox probe, imports
            assert fn(), "a side did not accept the solution"
        for repeat in range(args.repeats):
            for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                (server_start, client_start), start = cpu_seconds(server.pid), time.perf_counter()
                assert sides[name](), name
                seconds[name].append(time.perf_counter() - start)
                server_end, client_end = cpu_seconds(server.pid)
                server_cpu[name].append(server_end - server_start)
                client_cpu[name].append(client_end - client_start)
    finally:
        server.terminate()
        server.wait(timeout=30)
    load = os.getloadavg()[0]
    print(
        f"{args.tests} tests, {args.repeats} alternated repeats, {cpus} usable CPUs, one submission at a time, "
        f"load average {load:.1f} at the end"
    )
    print("| side | median s | tests/s | /judge raw time / side's | vs baseline | server CPU ms | client CPU ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    reference, baseline_name = names[0], names[4]
    for name in names:
        median = statistics.median(seconds[name])
        print(
            f"| {name} | {median:.3f} | {args.tests / median:,.0f} | {ratio(seconds[reference], seconds[name]):.2f}x "
            f"| {ratio(seconds[baseline_name], seconds[name]):.2f}x | {1000 * statistics.mean(server_cpu[name]):.0f} "
            f"| {1000 * statistics.mean(client_cpu[name]):.0f} |"
        )
    for what, ours_side, theirs in (("the /submit endpoint", 0, 1), ("through the clients, /submit", 2, 3)):
        wall = ratio(seconds[names[theirs]], seconds[names[ours_side]])
        met = "met" if wall <= 1.10 else "not met"
        print(f"{what} takes {wall:.3f}x /judge's time (target <= 1.10x: {met})")


if __name__ == "__main__":
    main()
