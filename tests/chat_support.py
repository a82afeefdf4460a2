"""Chat-template pieces shared by the chat and rollout tests (tests/core/test_chat.py,
tests/rollouts/test_rollout.py): a think-stripping template like Qwen3's, and a tokenizer that counts its renders."""

from __future__ import annotations

import copy

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


def counting_renders(tokenizer):
    """A copy of ``tokenizer`` whose chat template counts its renders in ``.renders``."""
    counted = copy.deepcopy(tokenizer)
    counted.renders = 0
    render = counted.apply_chat_template

    def apply_chat_template(*args, **kwargs):
        counted.renders += 1
        return render(*args, **kwargs)

    counted.apply_chat_template = apply_chat_template
    return counted
