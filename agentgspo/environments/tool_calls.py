"""Parse tool calls in the Hermes/Qwen format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Parsing never raises: each block that cannot be read becomes an error string the model will see. Only the text after
the last ``</think>`` can call tools: blocks inside the reasoning are thoughts (as vLLM's and SGLang's reasoning
parsers strip it before their tool parsers run).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall", "final_content", "parse_tool_calls"]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_CLOSE = "</think>"
_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)(?:" + re.escape(TOOL_CALL_CLOSE) + r"|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_TOO_DEEP = (
    "could not parse the tool call: its JSON is nested too deeply; write "
    '<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>'
)


@dataclass(frozen=True)
class ToolCall:
    """A parsed call: the tool's name and its JSON arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_text(self) -> str:
        """The call as the model writes it (the inverse of :func:`parse_tool_calls`)."""
        payload = json.dumps({"name": self.name, "arguments": self.arguments})
        return f"{TOOL_CALL_OPEN}\n{payload}\n{TOOL_CALL_CLOSE}"


def _parse_block(body: str) -> ToolCall | str:
    body = _FENCE.sub("", body.strip())
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        return (
            f"could not parse the tool call as JSON ({exc.msg} at char {exc.pos}); write "
            '<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>'
        )
    except RecursionError:
        return _TOO_DEEP
    if not isinstance(payload, dict):
        return f"expected a JSON object with 'name' and 'arguments' in <tool_call>, got {type(payload).__name__}"
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        return "the tool call has no 'name' (expected a string naming the tool)"
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):  # some models emit arguments as a JSON string, as OpenAI's API does
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return f"the arguments of {name!r} are a string that is not valid JSON"
        except RecursionError:
            return _TOO_DEEP
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return f"the arguments of {name!r} must be a JSON object, got {type(arguments).__name__}"
    return ToolCall(name=name, arguments=arguments)


def final_content(text: str) -> str:
    """The part of an assistant turn after its last ``</think>`` (all of it without one): what a reasoning parser
    returns as ``content``, where tool calls and final answers are read.

    >>> final_content("<think>maybe <answer>1</answer></think> <answer>2</answer>")
    ' <answer>2</answer>'
    """
    return text[text.rfind(THINK_CLOSE) + len(THINK_CLOSE) :] if THINK_CLOSE in text else text


def parse_tool_calls(text: str) -> tuple[list[ToolCall], list[str]]:
    """All tool calls in ``text`` (after its last ``</think>``) and one error message per block that could not be
    parsed.

    >>> calls, errors = parse_tool_calls('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>')
    >>> calls, errors
    ([ToolCall(name='f', arguments={'x': 1})], [])
    >>> parse_tool_calls('<tool_call>{"name": "f", "argu')[1][0].startswith('could not parse')
    True
    """
    text = final_content(text)
    if TOOL_CALL_OPEN not in text:
        return [], []
    calls: list[ToolCall] = []
    errors: list[str] = []
    for match in _BLOCK.finditer(text):
        parsed = _parse_block(match.group(1))
        (calls if isinstance(parsed, ToolCall) else errors).append(parsed)
    return calls, errors
