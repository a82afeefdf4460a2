"""Our turns and messages as OpenAI chat messages and back (agentgspo/environments/interop/openai_chat.py): what the
verifiers bridge answers, what the exported harness gives our envs, what the oracle server serves."""

from __future__ import annotations

import json

import pytest

from agentgspo.environments.interop.openai_chat import (
    assistant_text,
    completion,
    completion_events,
    from_openai,
    to_openai_assistant,
    to_openai_replies,
)
from agentgspo.environments.tool_calls import ToolCall, parse_tool_calls

TURNS = [
    "<answer>42</answer>",
    "Adding first.\n" + ToolCall("add", {"a": 1, "b": [2, 3]}).to_text(),
    ToolCall("add", {"a": 1}).to_text() + "\n" + ToolCall("submit", {"code": 'print("hi")\n'}).to_text(),
    "<think>the tool knows</think>" + ToolCall("lookup", {"name": "Ada"}).to_text(),
]


@pytest.mark.parametrize("text", TURNS)
def test_a_turn_becomes_openai_and_back_with_the_same_calls_and_answer(text):
    message = to_openai_assistant(text, turn=3).message
    again = assistant_text(message)
    assert parse_tool_calls(again) == parse_tool_calls(text)
    assert [c["id"] for c in message.get("tool_calls", [])] == [
        f"call_3_{k}" for k in range(len(parse_tool_calls(text)[0]))
    ]
    if "<think>" in text:
        assert message["reasoning_content"] == "the tool knows" and again.startswith("<think>the tool knows</think>")


def test_a_block_that_does_not_parse_leaves_the_whole_turn_as_content_as_vllm_does():
    text = 'Try <tool_call>{"name": "add", "arguments": {"a": 1}</tool_call>'
    turn = to_openai_assistant(text)
    assert turn.parse_errors == 1 and turn.message == {"role": "assistant", "content": text}


def test_tool_replies_answer_their_calls_by_name_and_order():
    calls = to_openai_assistant(ToolCall("add", {}).to_text() + ToolCall("mul", {}).to_text()).message["tool_calls"]
    replies = [
        {"role": "tool", "name": "mul", "content": "6"},
        {"role": "tool", "name": "add", "content": "3"},
        {"role": "tool", "name": "add", "content": "extra"},
        {"role": "user", "content": "next question"},
    ]
    assert to_openai_replies(replies, calls) == [
        {"role": "tool", "tool_call_id": "call_0_1", "name": "mul", "content": "6"},
        {"role": "tool", "tool_call_id": "call_0_0", "name": "add", "content": "3"},
        {"role": "user", "content": "extra"},  # no call left to answer: OpenAI has no tool result without one
        {"role": "user", "content": "next question"},
    ]


def test_openai_messages_become_ours_with_tool_names_and_text_parts():
    messages = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "x", "content": "done"},
    ]
    assert from_openai(messages) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "a\nb"},
        {"role": "assistant", "content": ToolCall("f", {}).to_text()},
        {"role": "tool", "name": "f", "content": "done"},
    ]
    with pytest.raises(ValueError, match="user message 0: a 'image_url' content part cannot be rendered"):
        from_openai([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}])


def test_a_streamed_completion_carries_the_whole_message_then_usage_then_done():
    message = to_openai_assistant(ToolCall("add", {"a": 1}).to_text()).message
    body = completion(message, "m")
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    events = completion_events(body).decode().split("\n\n")
    first = json.loads(events[0].removeprefix("data: "))
    assert first["choices"][0]["delta"]["tool_calls"][0]["index"] == 0 and events[2] == "data: [DONE]"
