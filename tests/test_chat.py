"""Chat rendering: prompts, append-only continuations, and the prefix-preservation check of chat templates."""

from __future__ import annotations

import copy

import pytest

from agentgspo.rollouts.chat import SCRIPTED_CONVERSATION, ChatRenderer, check_template
from agentgspo.cli import main as cli_main
from agentgspo.policy.tiny import CHAT_TEMPLATE

# Like Qwen3's template: assistant turns before the last user message lose their <think>...</think> block, so a
# re-render of the conversation is not a prefix-extension of what the model sampled.
THINK_STRIPPING_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for message in messages -%}{%- if message.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for message in messages -%}"
    "{%- set content = message.content -%}"
    "{%- if message.role == 'assistant' and loop.index0 < ns.last_user and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip() -%}"
    "{%- endif -%}"
    "{%- if message.role == 'tool' -%}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


@pytest.fixture
def think_stripping_tokenizer(tokenizer):
    stripped = copy.deepcopy(tokenizer)
    stripped.chat_template = THINK_STRIPPING_TEMPLATE
    return stripped


def test_prompt_ends_with_the_generation_prompt_and_names_the_tools(renderer):
    tools = [{"type": "function", "function": {"name": "calculate", "description": "d", "parameters": {}}}]
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    text = renderer.render(messages, add_generation_prompt=True, tools=tools)
    assert (
        text == "<|im_start|>system\nS\nTools: calculate<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert renderer.prompt_ids(messages, tools) == renderer.encode(text)
    assert renderer.decode(renderer.prompt_ids(messages, tools)) == text


def test_tool_call_tags_and_end_of_turn_are_single_tokens(renderer):
    for token in ("<tool_call>", "</tool_call>", "<|im_end|>"):
        assert len(renderer.encode(token)) == 1
    assert renderer.end_of_turn_id == renderer.encode("<|im_end|>")[0]


def test_decode_is_the_exact_text_of_the_ids_whatever_the_tokenizer_cleanup_setting(tokenizer):
    # Llama-3-style tokenizer configs set clean_up_tokenization_spaces=True; the env must still get the text the
    # policy sampled (" ," and " ." inside code or string literals are not to be "cleaned").
    cleaning = copy.deepcopy(tokenizer)
    cleaning.clean_up_tokenization_spaces = True
    renderer = ChatRenderer(cleaning)
    text = "print('a , b') ; x = 1 . <tool_call>"
    assert renderer.decode(renderer.encode(text)) == text


def test_continuation_ids_append_exactly_what_a_full_render_adds(renderer):
    history = [
        {"role": "user", "content": "What is 2*3?"},
        {"role": "assistant", "content": '<tool_call>\n{"name": "calculate", "arguments": {}}\n</tool_call>'},
    ]
    new = [{"role": "tool", "name": "calculate", "content": "6"}, {"role": "tool", "name": "calculate", "content": "7"}]
    ids, exact = renderer.continuation_ids(history, new)
    assert exact
    sampled_so_far = renderer.encode(renderer.render(history, add_generation_prompt=False))
    sampled_so_far = sampled_so_far[: max(i for i, t in enumerate(sampled_so_far) if t == renderer.end_of_turn_id) + 1]
    full = renderer.encode(renderer.render([*history, *new], add_generation_prompt=True))
    assert sampled_so_far + ids == full
    assert (
        renderer.decode(ids) == "\n<|im_start|>user\n<tool_response>\n6\n</tool_response>\n"
        "<tool_response>\n7\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_continuation_falls_back_when_the_template_rewrites_history(think_stripping_tokenizer):
    renderer = ChatRenderer(think_stripping_tokenizer)
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nhm\n</think>\n\nb"}]
    ids, exact = renderer.continuation_ids(history, [{"role": "user", "content": "c"}])
    assert not exact and renderer.fallbacks == 1
    assert renderer.decode(ids) == "\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"


def test_a_tokenizer_without_chat_template_is_refused_with_the_fix(tokenizer):
    bare = copy.deepcopy(tokenizer)
    bare.chat_template = None
    with pytest.raises(ValueError, match="has no chat_template; set tokenizer.chat_template"):
        ChatRenderer(bare)
    with pytest.raises(ValueError, match="end_of_turn token '<eot>' is not in the tokenizer's vocabulary"):
        ChatRenderer(tokenizer, end_of_turn="<eot>")


def test_check_template_passes_the_tiny_template(tokenizer):
    assert tokenizer.chat_template == CHAT_TEMPLATE
    result = check_template(tokenizer)
    assert result.prefix_preserving
    assert len(result.turns) == sum(m["role"] == "assistant" for m in SCRIPTED_CONVERSATION) - 1


def test_check_template_flags_a_think_stripping_template(think_stripping_tokenizer):
    result = check_template(think_stripping_tokenizer)
    assert not result.prefix_preserving
    failed = [turn for turn in result.turns if not turn["prefix"]]
    # The first failure is the first boundary that crosses a new user message: the earlier <think> is gone.
    assert failed[0]["turn"] == 2
    assert "<think>" in failed[0]["sampled"] and "<think>" not in failed[0]["re_rendered"]
    assert result.turns[0]["prefix"]  # before the second user message nothing is stripped


def test_check_template_cli_exit_status(think_stripping_tokenizer, tmp_path, capsys):
    think_stripping_tokenizer.save_pretrained(tmp_path)
    assert cli_main(["check-template", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL assistant turn 2" in out and "NOT prefix-preserving" in out
    assert cli_main(["check-template", "tiny"]) == 0
    assert "template: prefix-preserving" in capsys.readouterr().out
    assert cli_main(["check-template", str(tmp_path / "missing")]) == 2
