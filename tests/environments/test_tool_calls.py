"""Parsing Hermes/Qwen ``<tool_call>{json}</tool_call>`` blocks: never raises, one error per unreadable block."""

from __future__ import annotations


import pytest

from agentgspo.environments.env import Action
from agentgspo.environments.tool_calls import ToolCall, parse_tool_calls


def test_text_without_tool_calls_has_neither_calls_nor_errors():
    assert parse_tool_calls("The answer is 42.") == ([], [])


def test_several_calls_in_order_with_text_around_them():
    text = (
        'Let me check. <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> and '
        '<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call> done'
    )
    assert parse_tool_calls(text) == ([ToolCall("a", {"x": 1}), ToolCall("b", {})], [])


@pytest.mark.parametrize(
    "body",
    [
        '```json\n{"name": "f", "arguments": {"x": 1}}\n```',  # fenced
        '{"name": "f", "arguments": "{\\"x\\": 1}"}',  # arguments as a JSON string, as OpenAI's API sends them
        '{"name": "f", "parameters": {"x": 1}}',  # "parameters" instead of "arguments"
    ],
)
def test_common_variants_are_accepted(body):
    assert parse_tool_calls(f"<tool_call>{body}</tool_call>") == ([ToolCall("f", {"x": 1})], [])


def test_missing_arguments_mean_no_arguments():
    assert parse_tool_calls('<tool_call>{"name": "f"}</tool_call>') == ([ToolCall("f", {})], [])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("{not json", "could not parse the tool call as JSON"),
        ("[1, 2]", "expected a JSON object with 'name' and 'arguments' in <tool_call>, got list"),
        ('{"arguments": {}}', "the tool call has no 'name'"),
        ('{"name": "f", "arguments": [1]}', "the arguments of 'f' must be a JSON object, got list"),
        ('{"name": "f", "arguments": "{bad"}', "the arguments of 'f' are a string that is not valid JSON"),
    ],
)
def test_each_unreadable_block_is_an_error_message(body, expected):
    calls, errors = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert calls == [] and len(errors) == 1 and expected in errors[0]


def test_an_unclosed_block_at_the_end_is_parsed_or_reported():
    assert parse_tool_calls('<tool_call>{"name": "f", "arguments": {}}') == ([ToolCall("f", {})], [])
    calls, errors = parse_tool_calls('<tool_call>{"name": "f", "argu')
    assert calls == [] and len(errors) == 1


def test_good_and_bad_blocks_in_one_turn_are_separated():
    text = '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>oops</tool_call>'
    calls, errors = parse_tool_calls(text)
    assert calls == [ToolCall("f", {})] and len(errors) == 1


def test_to_text_round_trips():
    call = ToolCall("calculate", {"expression": "1+2", "nested": {"a": [1, "b"]}})
    assert parse_tool_calls(call.to_text()) == ([call], [])


def test_action_from_text_keeps_text_calls_and_errors():
    action = Action.from_text('hi <tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>x</tool_call>')
    assert action.text.startswith("hi ")
    assert action.tool_calls == (ToolCall("f", {}),) and len(action.parse_errors) == 1


@pytest.mark.parametrize(
    "body",
    [
        "["
        * 100_000,  # a degenerate sample repeating one character: json.loads raises RecursionError, not a decode error
        '{"name": "f", "arguments": "' + "[" * 100_000 + '"}',  # the same inside arguments sent as a JSON string
    ],
)
def test_deeply_nested_json_is_an_error_message_not_an_exception(body):
    calls, errors = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert calls == [] and len(errors) == 1 and "nested too deeply" in errors[0]


def test_calls_inside_think_are_reasoning_not_calls():
    # As vLLM/SGLang's reasoning parsers do before the tool parser: only what follows </think> can call tools.
    thought = (
        '<think>\nI could call <tool_call>{"name": "f", "arguments": {}}</tool_call> or <tool_call>{bad\n</think>\n'
    )
    assert parse_tool_calls(thought + "The answer is 3.") == ([], [])
    assert parse_tool_calls(thought + '<tool_call>{"name": "g", "arguments": {}}</tool_call>') == (
        [ToolCall("g", {})],
        [],
    )
    # a template that opens <think> in the prompt: the completion starts inside the thought
    assert parse_tool_calls('<tool_call>{"name": "f"}</tool_call></think>done') == ([], [])
