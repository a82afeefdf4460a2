"""A small OpenAI-compatible chat-completions server for the tests (a real HTTP server on 127.0.0.1).

``POST /v1/chat/completions`` takes ``messages`` and ``tools`` as the OpenAI API does and checks them as a strict
API would (every ``tool`` message answers an earlier assistant ``tool_calls`` id; tools are function schemas);
the reply is a message with ``content`` and ``tool_calls``. Two models:

- ``tiny``: the embedded tiny policy: the conversation rendered with its chat template (tool calls as its
  ``<tool_call>`` blocks), sampled with transformers ``generate``, tool calls parsed out of the text;
- ``solver``: scripted: ``run_samples`` with the program the test registered for the statement, then ``submit``
  when the examples pass.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from fastapi import Request  # at module level: the endpoint's string annotation is resolved here

from agentgspo.environments.tool_calls import parse_tool_calls


class TinyChatModel:
    """The tiny policy behind the chat API (one generate at a time)."""

    def __init__(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentgspo.core.chat import ChatRenderer
        from agentgspo.models.tiny import tiny_policy_path

        path = tiny_policy_path()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.renderer = ChatRenderer(self.tokenizer)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.lock = threading.Lock()

    @staticmethod
    def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """OpenAI messages back in the template's form: tool calls as <tool_call> text."""
        out = []
        for m in messages:
            if m["role"] == "assistant" and m.get("tool_calls"):
                blocks = "".join(
                    "<tool_call>\n"
                    + json.dumps({"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])})
                    + "\n</tool_call>"
                    for c in m["tool_calls"]
                )
                out.append({"role": "assistant", "content": (m.get("content") or "") + blocks})
            else:
                out.append({"role": m["role"], "content": m.get("content") or ""})
        return out

    def reply(self, body: dict[str, Any]) -> tuple[str, str]:
        """``(text, finish_reason)`` sampled for the request."""
        import torch

        prompt = self.renderer.render(
            self.template_messages(body["messages"]), add_generation_prompt=True, tools=body.get("tools")
        )
        ids = torch.tensor([self.renderer.encode(prompt)])
        temperature = float(body.get("temperature", 1.0))
        with self.lock, torch.no_grad():
            torch.manual_seed(int(body.get("seed", 0)))
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=int(body["max_tokens"]),
                do_sample=temperature > 0,
                temperature=temperature or None,
                top_p=None,
                top_k=None,
                eos_token_id=self.renderer.end_of_turn_id,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out[0, ids.shape[1] :].tolist()
        finish = "stop" if new and new[-1] == self.renderer.end_of_turn_id else "length"
        return self.renderer.decode(new[:-1] if finish == "stop" else new), finish


def _check(body: dict[str, Any]) -> str | None:
    """What a strict API would refuse in ``body`` (None: fine)."""
    issued: set[str] = set()
    for i, m in enumerate(body.get("messages") or []):
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            return f"messages[{i}]: unknown role {m.get('role')!r}"
        for call in m.get("tool_calls") or []:
            if call.get("type") != "function" or not isinstance(call["function"].get("arguments"), str):
                return f"messages[{i}]: tool_calls need type 'function' and arguments as a JSON string"
            json.loads(call["function"]["arguments"])
            issued.add(call["id"])
        if m.get("role") == "tool" and m.get("tool_call_id") not in issued:
            return f"messages[{i}]: tool message answers no tool call id ({m.get('tool_call_id')!r})"
    for tool in body.get("tools") or []:
        if tool.get("type") != "function" or "name" not in tool.get("function", {}):
            return f"tools: expected function schemas, got {tool!r}"
    return None


def chat_app(solutions: dict[str, str] | None = None, tiny: TinyChatModel | None = None):
    """The FastAPI app; ``solutions``: statement substring -> Python program for the ``solver`` model.
    ``app.state.requests`` keeps every request body, ``app.state.authorization`` every Authorization header."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    app.state.requests = []
    app.state.authorization = []

    @app.get("/health")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def completions(body: dict, request: Request) -> Any:
        app.state.requests.append(body)
        app.state.authorization.append(request.headers.get("authorization"))
        problem = _check(body)
        if problem:
            return JSONResponse({"error": {"message": problem}}, status_code=400)
        if body.get("model") == "tiny":
            text, finish = await asyncio.to_thread(tiny.reply, body)
            calls, _ = parse_tool_calls(text)
            content = text.split("<tool_call>", 1)[0] if calls else text
            tool_calls = [
                {"id": f"c{n}", "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for n, c in enumerate(calls)
            ]
        else:
            content, tool_calls, finish = _solver_turn(body["messages"], solutions or {}), [], "stop"
            if isinstance(content, dict):
                content, tool_calls = None, [content]
        message = {"role": "assistant", "content": content, **({"tool_calls": tool_calls} if tool_calls else {})}
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }

    return app


def _solver_turn(messages: list[dict[str, Any]], solutions: dict[str, str]) -> str | dict[str, Any]:
    """The scripted solver: examples first, submit once they pass, then stop."""
    statement = next(m["content"] for m in messages if m["role"] == "user")
    code = next((c for key, c in solutions.items() if key in statement), "print(0)\n")
    tool_replies = [m["content"] for m in messages if m["role"] == "tool"]
    if not tool_replies:
        name = "run_samples"
    elif len(tool_replies) == 1 and tool_replies[0].startswith("Examples: AC"):
        name = "submit"
    else:
        return "Done."
    n = len(tool_replies)
    return {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"code": code, "lang": "python"})},
    }
