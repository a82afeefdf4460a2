"""Our chat messages and assistant text, as OpenAI chat-completions messages, and back.

Our envs read an assistant turn as text with Hermes/Qwen ``<tool_call>{json}</tool_call>`` blocks
(:mod:`agentgspo.environments.tool_calls`) and answer with ``{"role": "tool", "name": ..., "content": ...}``
messages; OpenAI-compatible servers and the programs that call them speak ``tool_calls`` on the assistant message
and ``tool`` messages keyed by ``tool_call_id``. The conversion is the one vLLM's Hermes tool parser and a
reasoning parser apply to a sampled turn:

- the text before the last ``</think>`` is ``reasoning_content``; tool calls are read after it;
- every block parses: the calls become ``tool_calls`` (ids ``call_<turn>_<k>``), the text outside the blocks is
  ``content`` (``None`` when empty);
- a block that does not parse: no ``tool_calls`` at all, the whole text after the reasoning is ``content`` (as
  vLLM's parser returns a turn it cannot read).

Text content only: an image part is an error naming the message.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgspo.environments.tool_calls import (
    THINK_CLOSE,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    ToolCall,
    final_content,
    parse_tool_calls,
)

__all__ = [
    "OpenAITurn",
    "assistant_text",
    "completion",
    "completion_events",
    "from_openai",
    "text_of",
    "to_openai_assistant",
    "to_openai_replies",
]

Message = dict[str, Any]
# A whole block, as the parser reads one (an unclosed block runs to the end of the text).
_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r".*?(?:" + re.escape(TOOL_CALL_CLOSE) + r"|$)", re.DOTALL)


def text_of(content: Any, where: str) -> str:
    """The text of an OpenAI message ``content``: a string, ``None`` (empty) or a list of text parts joined by
    newlines (as vLLM renders them); any other part is a ``ValueError`` naming ``where``.

    >>> text_of([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "user message 0")
    'a\\nb'
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            if kind != "text":
                raise ValueError(
                    f"{where}: a {kind!r} content part cannot be rendered by a text chat template; agentgspo's chat "
                    "envs carry text only (drop the part, or describe it in text)"
                )
            texts.append(part.get("text") or "")
        return "\n".join(texts)
    raise ValueError(f"{where}: expected content as a string or a list of text parts, got {type(content).__name__}")


def assistant_text(message: Message, where: str = "assistant message") -> str:
    """An OpenAI assistant message as the turn text our envs read: ``<think>reasoning</think>`` when it has
    reasoning, its content, then one ``<tool_call>`` block per call (arguments that are not a JSON object stay the
    raw string, which the env reports as a parse error to the model).

    >>> assistant_text({"role": "assistant", "content": "Adding.", "tool_calls": [
    ...     {"id": "c", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]})
    'Adding.\\n<tool_call>\\n{"name": "add", "arguments": {"a": 1}}\\n</tool_call>'
    """
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    parts = [f"<think>{reasoning}{THINK_CLOSE}"] if isinstance(reasoning, str) and reasoning else []
    content = text_of(message.get("content"), where)
    if content:
        parts.append(content)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = raw
        if isinstance(arguments, dict) or arguments is None:
            parts.append(ToolCall(str(function.get("name", "")), arguments or {}).to_text())
        else:  # kept as the model wrote it: the env's parser reports it
            payload = json.dumps({"name": function.get("name", ""), "arguments": raw})
            parts.append(f"{TOOL_CALL_OPEN}\n{payload}\n{TOOL_CALL_CLOSE}")
    return "\n".join(parts)


def from_openai(messages: Sequence[Message]) -> list[Message]:
    """OpenAI chat messages as our chat messages: ``system`` (and ``developer``) and ``user`` keep their text, an
    ``assistant`` message becomes its turn text (:func:`assistant_text`), a ``tool`` message carries the name of
    the call it answers (its own ``name``, else the earlier call with its ``tool_call_id``).

    >>> from_openai([{"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": "3"}])[1]
    {'role': 'tool', 'name': 'add', 'content': '3'}
    """
    names: dict[str, str] = {}
    out: list[Message] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        where = f"{role} message {index}"
        if role in ("system", "developer", "user"):
            out.append(
                {"role": "user" if role == "user" else "system", "content": text_of(message.get("content"), where)}
            )
        elif role == "assistant":
            for call in message.get("tool_calls") or []:
                names[call.get("id", "")] = (call.get("function") or {}).get("name", "")
            out.append({"role": "assistant", "content": assistant_text(message, where)})
        elif role == "tool":
            name = message.get("name") or names.get(message.get("tool_call_id", ""), "")
            out.append({"role": "tool", "name": name, "content": text_of(message.get("content"), where)})
        else:
            raise ValueError(f"{where}: unknown role {role!r}; expected system, developer, user, assistant or tool")
    return out


@dataclass
class OpenAITurn:
    """An assistant turn as an OpenAI message, and how many of its ``<tool_call>`` blocks did not parse."""

    message: Message
    parse_errors: int = 0
    call_names: list[str] = field(default_factory=list)


def to_openai_assistant(text: str, turn: int = 0) -> OpenAITurn:
    """Our assistant turn text as an OpenAI assistant message (the rules are in the module docstring); call ids are
    ``call_<turn>_<k>``, the same for the same turn of the same episode.

    >>> to_openai_assistant('<think>add</think>Sure. <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    ... # doctest: +NORMALIZE_WHITESPACE
    OpenAITurn(message={'role': 'assistant', 'content': 'Sure.', 'reasoning_content': 'add',
    'tool_calls': [{'id': 'call_0_0', 'type': 'function', 'function': {'name': 'add', 'arguments': '{"a": 1}'}}]},
    parse_errors=0, call_names=['add'])
    """
    content = final_content(text)
    message: Message = {"role": "assistant", "content": content}
    if THINK_CLOSE in text:
        message["reasoning_content"] = text[: text.rfind(THINK_CLOSE)].removeprefix("<think>").strip()
    calls, errors = parse_tool_calls(text)
    if errors or not calls:
        return OpenAITurn(message, parse_errors=len(errors))
    message["content"] = _BLOCK.sub("", content).strip() or None
    message["tool_calls"] = [
        {
            "id": f"call_{turn}_{k}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for k, call in enumerate(calls)
    ]
    return OpenAITurn(message, call_names=[call.name for call in calls])


def to_openai_replies(messages: Sequence[Message], calls: Sequence[Message]) -> list[Message]:
    """Our env's new messages as OpenAI messages after an assistant message with ``calls`` (its ``tool_calls``):
    each ``tool`` message answers the first unanswered call of its name (a message named ``error``, our parse-error
    reply, the first unanswered call); a tool message no call is left for, and ``user`` and ``system`` messages,
    keep their role and text (the first as a ``user`` message: OpenAI has no tool result without a call).

    >>> to_openai_replies([{"role": "tool", "name": "add", "content": "3"}],
    ...                   [{"id": "c1", "function": {"name": "add"}}])
    [{'role': 'tool', 'tool_call_id': 'c1', 'name': 'add', 'content': '3'}]
    """
    open_calls = [(call.get("id", ""), (call.get("function") or {}).get("name", "")) for call in calls]
    out: list[Message] = []
    for message in messages:
        role, content = message.get("role"), message.get("content", "")
        if role != "tool":
            out.append({"role": role, "content": content})
            continue
        name = message.get("name", "")
        match = next((i for i, (_, called) in enumerate(open_calls) if called == name), None)
        if match is None and name == "error" and open_calls:
            match = 0
        if match is None:
            out.append({"role": "user", "content": content})
            continue
        call_id, called = open_calls.pop(match)
        out.append({"role": "tool", "tool_call_id": call_id, "name": called, "content": content})
    return out


def completion(message: Message, model: str, completion_id: str = "chatcmpl-agentgspo") -> dict[str, Any]:
    """A ``chat.completion`` object answering with ``message`` (``finish_reason`` ``tool_calls`` when it has
    calls, else ``stop``; usage is not counted: zeros)."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def completion_events(body: dict[str, Any]) -> bytes:
    """A ``chat.completion`` object as the server-sent events of a streamed answer: one chunk with the whole
    message, one with the usage, then ``[DONE]``."""
    choice = body["choices"][0]
    delta = {key: value for key, value in choice["message"].items() if value is not None}
    if delta.get("tool_calls"):
        delta["tool_calls"] = [{**call, "index": index} for index, call in enumerate(delta["tool_calls"])]
    head = {key: body[key] for key in ("id", "created", "model")}
    chunks = [
        {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}],
        },
        {**head, "object": "chat.completion.chunk", "choices": [], "usage": body["usage"]},
    ]
    return b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + b"data: [DONE]\n\n"
