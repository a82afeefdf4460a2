"""`agentgspo eval --agent chat` against a real OpenAI-compatible server on 127.0.0.1 (tests/eval/chat_server.py):
tool calls go out as OpenAI ``tool_calls``/``tool`` messages and come back as env actions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgspo.cli import main
from agentgspo.eval.agents import openai_messages, reply_text
from agentgspo.core.sampling import PolicyConfigurationError
from chat_server import TinyChatModel, chat_app  # tests/eval/chat_server.py
from servers import serve

FIXTURES = Path(__file__).parent / "fixtures"
DIGIT_SUM = "print(sum(map(int, input().strip())))\n"


def _eval(capsys, out: Path, url: str, model: str, *args: str) -> dict:
    capsys.readouterr()
    status = main(
        [
            "eval",
            "--agent",
            "chat",
            "--chat-url",
            url + "/v1",
            "--chat-model",
            model,
            "--out",
            str(out),
            "--no-progress",
            *args,
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    return json.loads(captured.out[captured.out.index("{") :])


def test_history_round_trips_through_openai_messages():
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": 'Try.\n<tool_call>{"name": "run", "arguments": {"code": "x"}}</tool_call>'},
        {"role": "tool", "name": "run", "content": "out"},
        {"role": "tool", "name": "error", "content": "e"},
    ]
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
        summary = _eval(
            capsys,
            tmp_path / "solver",
            url,
            "solver",
            "--problems",
            str(FIXTURES / "livecodebench_rows.jsonl"),
            "--chat-api-key-env",
            "TEST_CHAT_KEY",
        )
    assert app.state.authorization == ["Bearer sk-test"] * 2  # the key from the named variable
    assert summary["pass@1"] == 1.0 and summary["verdicts"] == {"AC": 1}
    requests = app.state.requests
    assert len(requests) == 2  # run_samples, then submit (AC ends the episode)
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {"run", "run_samples", "submit"}
    assert requests[1]["messages"][-1]["role"] == "tool" and requests[1]["messages"][-1]["content"].startswith(
        "Examples: AC"
    )


@pytest.mark.slow
def test_the_tiny_policy_served_over_the_chat_api_runs_end_to_end(tmp_path, capsys):
    app = chat_app(tiny=TinyChatModel())
    with serve(app) as url:
        summary = _eval(
            capsys,
            tmp_path / "tiny",
            url,
            "tiny",
            "--chat-api-key-env",
            "UNSET_AGENTGSPO_TEST_KEY",
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
            "32",
        )
    assert summary["attempts"] == 2 and summary["pass@1"] == 0.0 and summary["judge_error_rate"] == 0.0
    rows = [json.loads(line) for line in (tmp_path / "tiny" / "results.jsonl").read_text().splitlines()]
    assert all(r["stop_reason"] != "env_error" for r in rows), [r["error"] for r in rows]
    assert all(body["model"] == "tiny" and body["max_tokens"] == 32 for body in app.state.requests)
    assert set(app.state.authorization) == {None}  # no key: no header
    assert (tmp_path / "tiny" / "report.html").exists()


def test_a_refusing_endpoint_stops_the_eval_naming_the_fix_and_records_nothing(tmp_path, capsys):
    """A wrong model name (404) fails every attempt alike: the eval stops with one line naming the fix, and
    results.jsonl stays empty, so the corrected command plays every attempt (none is stored as an env error)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    app.get("/health")(lambda: {"ok": True})
    app.post("/v1/chat/completions")(lambda: JSONResponse({"error": "no such model"}, status_code=404))
    out = tmp_path / "refused"
    capsys.readouterr()
    with serve(app) as url:
        status = main(
            [
                "eval",
                "--agent",
                "chat",
                "--chat-url",
                url + "/v1",
                "--chat-model",
                "missing",
                "--out",
                str(out),
                "--no-progress",
                "--problems",
                "starter",
                "--only",
                "9000A",
            ]
        )
    err = capsys.readouterr().err
    assert status == 2 and "refused the request: HTTP 404" in err and "--chat-model" in err, err
    assert "Traceback" not in err
    results = out / "results.jsonl"
    assert not results.exists() or results.read_text() == ""


# What vLLM's OpenAI server (vllm/renderers/params.py, 0.32) answers a prompt longer than --max-model-len: HTTP 400
# with this body; and OpenAI's answer to the same.
VLLM_CONTEXT_ERROR = {
    "error": {
        "message": "This model's maximum context length is 2048 tokens. However, your prompt contains 2301 input "
        "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input "
        "prompt. (parameter=input_tokens, value=2301)",
        "type": "BadRequestError",
        "param": "input_tokens",
        "code": 400,
    }
}
OPENAI_CONTEXT_ERROR = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
        "tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


class Gateway:
    """The test chat server behind the checks a real API makes first (ASGI middleware): the API key (401), the
    model name (404, vLLM's body) and the context length (400, ``context_error``): a prompt with more characters of
    messages than ``context_chars`` is refused; ``context_chars=None``: the first prompt's size, i.e. a context that
    holds the statement but not what the tools answer."""

    def __init__(
        self,
        app,
        *,
        key: str | None = None,
        models=("solver", "tiny"),
        context_chars: int | None = 0,
        context_error: dict = VLLM_CONTEXT_ERROR,
    ):
        self.app, self.key, self.models, self.context_chars = app, key, models, context_chars
        self.context_error, self.refused = context_error, []
        self.state = app.state

    async def __call__(self, scope, receive, send):
        from fastapi.responses import JSONResponse

        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        body, headers = json.loads(raw), dict(scope["headers"])
        size = len(json.dumps(body["messages"]))
        if self.context_chars is None:
            self.context_chars = size
        if self.key and headers.get(b"authorization") != f"Bearer {self.key}".encode():
            refusal = (
                401,
                {
                    "error": {
                        "message": "Incorrect API key provided.",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                },
            )
        elif body.get("model") not in self.models:
            refusal = (
                404,
                {
                    "error": {
                        "message": f"The model `{body.get('model')}` does not exist.",
                        "type": "NotFoundError",
                        "param": "model",
                        "code": 404,
                    }
                },
            )
        elif self.context_chars and size > self.context_chars:
            refusal = (400, self.context_error)
        else:
            replayed = False

            async def replay():
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}

            return await self.app(scope, replay, send)
        self.refused.append(refusal[0])
        await JSONResponse(refusal[1], status_code=refusal[0])(scope, receive, send)


def test_a_prompt_over_the_endpoints_context_is_a_counted_failure_not_an_env_error(tmp_path, capsys):
    gateway = Gateway(chat_app({"digit": DIGIT_SUM}), context_chars=None)
    with serve(gateway) as url:
        summary = _eval(
            capsys, tmp_path / "overflow", url, "solver", "--problems", str(FIXTURES / "livecodebench_rows.jsonl")
        )
    assert gateway.refused == [400] and len(gateway.state.requests) == 1  # run_samples went, the next turn did not fit
    row = json.loads((tmp_path / "overflow" / "results.jsonl").read_text())
    assert row["stop_reason"] == "context_overflow" and row["error"] is None, row["error"]
    # counted: pass@1 0.0, like a policy that ran out of context, not None (excluded, as env errors are)
    assert summary["pass@1"] == 0.0 and summary["attempts"] == 1 and summary["verdicts"] == {"none": 1}


def _one_turn(url: str, model: str = "solver", api_key: str | None = None):
    import asyncio

    from agentgspo.eval.agents import ChatEndpointAgent, load_renderer
    from agentgspo.core.sampling import SampleRequest, SamplingParams

    agent = ChatEndpointAgent(url, model, load_renderer("tiny"), api_key=api_key, retries=2)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "digit sum " * 50}]
    return asyncio.run(agent.sample(SampleRequest([], messages, SamplingParams(max_new_tokens=16))))


def test_openais_context_length_error_ends_the_turn_with_no_room_left():
    gateway = Gateway(chat_app({"digit": DIGIT_SUM}), context_chars=100, context_error=OPENAI_CONTEXT_ERROR)
    with serve(gateway) as url:
        turn = _one_turn(url + "/v1")
    assert (turn.token_ids, turn.logprobs, turn.finish_reason) == ([], [], "context")
    assert gateway.refused == [400]  # not retried: the same prompt cannot fit on a second try


@pytest.mark.parametrize(
    "case, status, fix",
    [
        ("bad key", 401, "--chat-api-key-env"),
        ("wrong model", 404, "--chat-model"),
        ("wrong url", 404, "--chat-url"),
        ("other 400", 400, "top_p must be"),
    ],
)
def test_configuration_errors_name_the_status_and_the_fix(case, status, fix):
    gateway = Gateway(chat_app(), key="sk-right")
    if case == "other 400":  # a 400 that is not about the context: still an error, never a failed solution
        gateway = Gateway(
            chat_app(),
            context_chars=10,
            context_error={"error": {"message": "top_p must be in (0, 1]", "type": "BadRequestError"}},
        )
    with serve(gateway) as url:
        base = url if case == "wrong url" else url + "/v1"  # no /v1: the server has no such path
        # A refused key, model or URL is the user's setup (the eval stops); another 400 ends this attempt only.
        error = RuntimeError if case == "other 400" else PolicyConfigurationError
        with pytest.raises(error, match=rf"HTTP {status}.*{fix}"):
            _one_turn(base, "nope" if case == "wrong model" else "solver", None if case == "bad key" else "sk-right")
    assert len(gateway.refused) == (case != "wrong url")  # refused once, not retried


def test_top_k_goes_out_only_when_on_and_the_log_probs_are_none():
    import asyncio

    from agentgspo.eval.agents import ChatEndpointAgent, load_renderer
    from agentgspo.core.sampling import SampleRequest, SamplingParams

    app = chat_app({"digit": DIGIT_SUM})
    messages = [{"role": "user", "content": "digit sum"}]
    with serve(app) as url:
        agent = ChatEndpointAgent(url + "/v1", "solver", load_renderer("tiny"))
        for top_k in (0, 5):
            asyncio.run(agent.sample(SampleRequest([], messages, SamplingParams(max_new_tokens=16, top_k=top_k))))
    # 0 (off) is not sent: OpenAI's API has no top_k field; vLLM and SGLang take it when on
    assert ["top_k" in r for r in app.state.requests] == [False, True] and app.state.requests[1]["top_k"] == 5
    assert agent.logprob_semantics == "none"
