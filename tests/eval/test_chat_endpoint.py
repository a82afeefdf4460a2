"""`agentgspo eval --agent chat` against a real OpenAI-compatible server on 127.0.0.1 (tests/eval/chat_server.py):
tool calls go out as OpenAI ``tool_calls``/``tool`` messages and come back as env actions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgspo.cli import main
from agentgspo.eval.agents import openai_messages, reply_text
from chat_server import TinyChatModel, chat_app  # tests/eval/chat_server.py
from servers import serve

FIXTURES = Path(__file__).parent / "fixtures"
DIGIT_SUM = "print(sum(map(int, input().strip())))\n"


def _eval(capsys, out: Path, url: str, model: str, *args: str) -> dict:
    capsys.readouterr()
    status = main(["eval", "--agent", "chat", "--chat-url", url + "/v1", "--chat-model", model, "--out", str(out),
                   "--no-progress", *args])
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    return json.loads(captured.out[captured.out.index("{"):])


def test_history_round_trips_through_openai_messages():
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
               {"role": "assistant", "content": 'Try.\n<tool_call>{"name": "run", "arguments": {"code": "x"}}'
                                                '</tool_call>'},
               {"role": "tool", "name": "run", "content": "out"}, {"role": "tool", "name": "error", "content": "e"}]
    out = openai_messages(history)
    call = out[2]["tool_calls"][0]
    assert out[2]["content"] == "Try." and call["function"] == {"name": "run", "arguments": '{"code": "x"}'}
    assert out[3] == {"role": "tool", "tool_call_id": call["id"], "content": "out"}
    assert out[4] == {"role": "user", "content": "e"}  # nothing left to answer: a user message
    text = reply_text({"content": "Go.", "tool_calls": [call]})
    assert text.startswith("Go.\n<tool_call>") and '"arguments": {"code": "x"}' in text


def test_a_chat_endpoint_solves_a_livecodebench_row_through_tool_calls(tmp_path, capsys, monkeypatch):
    app = chat_app({"digit": DIGIT_SUM})
    monkeypatch.setenv("TEST_CHAT_KEY", "sk-test")
    with serve(app) as url:
        summary = _eval(capsys, tmp_path / "solver", url, "solver", "--problems",
                        str(FIXTURES / "livecodebench_rows.jsonl"), "--chat-api-key-env", "TEST_CHAT_KEY")
    assert app.state.authorization == ["Bearer sk-test"] * 2  # the key from the named variable
    assert summary["pass@1"] == 1.0 and summary["verdicts"] == {"AC": 1}
    requests = app.state.requests
    assert len(requests) == 2  # run_samples, then submit (AC ends the episode)
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {"run", "run_samples", "submit"}
    assert requests[1]["messages"][-1]["role"] == "tool" and requests[1]["messages"][-1]["content"].startswith(
        "Examples: AC")


@pytest.mark.slow
def test_the_tiny_policy_served_over_the_chat_api_runs_end_to_end(tmp_path, capsys):
    app = chat_app(tiny=TinyChatModel())
    with serve(app) as url:
        summary = _eval(capsys, tmp_path / "tiny", url, "tiny", "--chat-api-key-env", "UNSET_AGENTGSPO_TEST_KEY", "--problems", "starter", "--only", "9000A",
                        "--samples", "2", "--k", "1,2", "--max-turns", "2", "--max-new-tokens", "32")
    assert summary["attempts"] == 2 and summary["pass@1"] == 0.0 and summary["judge_error_rate"] == 0.0
    rows = [json.loads(line) for line in (tmp_path / "tiny" / "results.jsonl").read_text().splitlines()]
    assert all(r["stop_reason"] != "env_error" for r in rows), [r["error"] for r in rows]
    assert all(body["model"] == "tiny" and body["max_tokens"] == 32 for body in app.state.requests)
    assert set(app.state.authorization) == {None}  # no key: no header
    assert (tmp_path / "tiny" / "report.html").exists()


def test_a_refusing_endpoint_is_an_env_error_not_a_failed_solution(tmp_path, capsys):
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    app.get("/health")(lambda: {"ok": True})
    app.post("/v1/chat/completions")(lambda: JSONResponse({"error": "no such model"}, status_code=404))
    with serve(app) as url:
        summary = _eval(capsys, tmp_path / "refused", url, "missing", "--problems", "starter", "--only", "9000A")
    assert summary["pass@1"] is None and summary["attempts"] == 1  # excluded, counted apart
    row = json.loads((tmp_path / "refused" / "results.jsonl").read_text())
    assert row["stop_reason"] == "env_error" and "refused the request: HTTP 404" in row["error"]
