"""Chat rendering: prompts, append-only continuations, and the prefix-preservation check of chat templates."""

from __future__ import annotations

import copy

import pytest

from agentgspo.core.chat import SCRIPTED_CONVERSATION, ChatRenderer, check_template
from agentgspo.cli import main as cli_main
from agentgspo.models.tiny import CHAT_TEMPLATE

from chat_support import THINK_STRIPPING_TEMPLATE, counting_renders  # tests/chat_support.py


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


# ---------------------------------------------------------------------- the renderer's caches (issue 46, item 5)

TOOLS = [{"type": "function", "function": {"name": "calculate", "description": "d", "parameters": {}}}]


def test_renders_and_ids_from_the_caches_are_what_the_tokenizer_makes(tokenizer):
    cached, fresh = ChatRenderer(tokenizer), ChatRenderer(tokenizer, caching=False)
    for end in range(1, len(SCRIPTED_CONVERSATION) + 1):
        for _ in range(2):  # the second time from the caches
            for prompt, tools in ((False, None), (True, None), (True, TOOLS)):
                text = cached.render(SCRIPTED_CONVERSATION[:end], add_generation_prompt=prompt, tools=tools)
                assert text == fresh.render(SCRIPTED_CONVERSATION[:end], add_generation_prompt=prompt, tools=tools)
                assert cached.encode(text) == fresh.encode(text)
    ids = cached.encode("<|im_start|>user\nhi<|im_end|>")
    ids.append(-1)  # a caller's list is its own: the cache keeps its copy
    assert cached.encode("<|im_start|>user\nhi<|im_end|>") == fresh.encode("<|im_start|>user\nhi<|im_end|>")


def test_a_render_is_computed_once_for_the_same_messages_and_tools(tokenizer):
    renderer = ChatRenderer(counting_renders(tokenizer))
    messages = [{"role": "user", "content": "What is 2*3?"}]
    first = renderer.render(messages, add_generation_prompt=True, tools=TOOLS)
    assert renderer.render([dict(m) for m in messages], add_generation_prompt=True, tools=copy.deepcopy(TOOLS)) == first
    assert renderer.tokenizer.renders == 1
    renderer.render(messages, add_generation_prompt=False, tools=TOOLS)  # another generation prompt: another render
    renderer.render(messages, add_generation_prompt=True)  # no tools
    assert renderer.tokenizer.renders == 3
    renderer.tokenizer.chat_template = "[changed]" + CHAT_TEMPLATE  # the template is part of what a render depends on
    assert renderer.render(messages, add_generation_prompt=True, tools=TOOLS) == "[changed]" + first
    assert renderer.tokenizer.renders == 4


def test_equal_values_of_other_types_are_rendered_for_themselves(tokenizer):
    # 1 == 1.0 == True (and they hash alike): a cache keyed on equality would answer the first one's render.
    renderer = ChatRenderer(tokenizer)
    texts = [
        renderer.render([{"role": "tool", "content": value}], add_generation_prompt=False) for value in (1, 1.0, True)
    ]
    assert [t.split("<tool_response>\n")[1].split("\n")[0] for t in texts] == ["1", "1.0", "True"]


def test_a_template_that_can_render_differently_each_time_is_never_cached(tokenizer):
    dated = counting_renders(tokenizer)
    dated.chat_template = "{{ strftime_now('%H:%M:%S.%f') }}" + CHAT_TEMPLATE  # the time of day, as Llama 3's date
    renderer = ChatRenderer(dated)
    texts = {renderer.render([{"role": "user", "content": "hi"}], add_generation_prompt=True) for _ in range(3)}
    assert dated.renders == 3 and len(texts) == 3


def test_inputs_that_are_not_plain_data_are_rendered_every_time(tokenizer):
    class Content(str):
        """A str subclass: equal to a plain str, and possibly rendered otherwise by a template that tests it."""

    renderer = ChatRenderer(counting_renders(tokenizer))
    for _ in range(2):
        renderer.render([{"role": "user", "content": Content("hi")}], add_generation_prompt=True)
    assert renderer.tokenizer.renders == 2


def test_continuation_with_the_kept_prompt_text_is_continuation_ids(renderer):
    history = [
        {"role": "user", "content": "What is 2*3?"},
        {"role": "assistant", "content": '<tool_call>\n{"name": "calculate", "arguments": {}}\n</tool_call>'},
    ]
    new = [{"role": "tool", "name": "calculate", "content": "6"}]
    prompt_text = renderer.render(history[:-1], add_generation_prompt=True, tools=TOOLS)
    ids, exact, next_prompt_text = renderer.continuation(history, new, TOOLS, prompt_text=prompt_text)
    assert (ids, exact) == renderer.continuation_ids(history, new, TOOLS)
    assert next_prompt_text == renderer.render([*history, *new], add_generation_prompt=True, tools=TOOLS)
    assert renderer.sampled_text(history, TOOLS, prompt_text=prompt_text) == renderer.sampled_text(history, TOOLS)


def test_continuation_with_the_kept_prompt_text_still_falls_back(think_stripping_tokenizer):
    renderer = ChatRenderer(think_stripping_tokenizer)
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nhm\n</think>\n\nb"}]
    prompt_text = renderer.render(history[:-1], add_generation_prompt=True)
    ids, exact, next_prompt_text = renderer.continuation(
        history, [{"role": "user", "content": "c"}], prompt_text=prompt_text
    )
    assert not exact and renderer.decode(ids) == "\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"
    assert "<think>" not in next_prompt_text  # the template's render of the real history, as the next turn's prompt


def test_decode_takes_the_rust_tokenizer_path_with_the_same_text(tokenizer):
    renderer = ChatRenderer(tokenizer)
    assert renderer._fast_decode  # the tiny tokenizer is a plain transformers fast tokenizer
    ids = renderer.encode('<|im_start|>assistant\n<tool_call>\n{"name": "calculate"}\n</tool_call><|im_end|>')
    for end in range(len(ids) + 1):
        expected = tokenizer.decode(ids[:end], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        assert renderer.decode(ids[:end]) == expected
        assert renderer.decode(tuple(ids[:end])) == expected
