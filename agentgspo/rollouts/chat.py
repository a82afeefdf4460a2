"""Chat rendering for token-exact multi-turn trajectories.

The learner trains on the exact ids the sampler produced. After a sampled assistant turn we never re-render and
re-tokenize the conversation: we tokenize only the environment's new messages, as the chat template renders them
after the existing prefix, and append those ids (see :meth:`ChatRenderer.continuation_ids`).

Some templates rewrite history (Qwen3's drops ``<think>`` blocks of earlier turns), so a full re-render of the
conversation is not always a prefix-extension of what was sampled. :func:`check_template` finds out for a given
tokenizer; the rollout records per trajectory whether its ids equal a full re-render (a metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatRenderer", "TemplateCheck", "check_template"]

Message = dict[str, Any]

# A neutral history to render new messages after when a template is not prefix-preserving for the real one.
_NEUTRAL_HISTORY: list[Message] = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]


class ChatRenderer:
    """Renders messages with a tokenizer's chat template and tokenizes them for the policy.

    Args:
        tokenizer: a ``transformers`` tokenizer with a ``chat_template``.
        end_of_turn: the token that ends an assistant turn; defaults to ``<|im_end|>`` when the vocabulary has it,
            else the tokenizer's ``eos_token``.
    """

    def __init__(self, tokenizer: Any, *, end_of_turn: str | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat_template; set "
                "tokenizer.chat_template to a Jinja template (see agentgspo.policy.tiny.CHAT_TEMPLATE for an example)"
            )
        self.tokenizer = tokenizer
        vocab = tokenizer.get_vocab()
        if end_of_turn is None:
            end_of_turn = "<|im_end|>" if "<|im_end|>" in vocab else tokenizer.eos_token
        if end_of_turn not in vocab:
            raise ValueError(f"end_of_turn token {end_of_turn!r} is not in the tokenizer's vocabulary")
        self.end_of_turn = end_of_turn
        self.end_of_turn_id: int = vocab[end_of_turn]
        self._fast = getattr(tokenizer, "_tokenizer", None)  # the Rust tokenizer: skips Python-side overhead
        self.fallbacks = 0  # continuations rendered after a neutral history (template not prefix-preserving)

    def render(
        self, messages: Sequence[Message], *, add_generation_prompt: bool, tools: list[dict[str, Any]] | None = None
    ) -> str:
        """The chat template's text for ``messages``."""
        return self.tokenizer.apply_chat_template(
            list(messages), tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens in the text are parsed; none are added)."""
        if self._fast is not None:
            return self._fast.encode(text, add_special_tokens=False).ids
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens included (so tool-call tags survive), never "cleaned up" (a tokenizer
        with ``clean_up_tokenization_spaces`` would turn a sampled ``" ,"`` into ``","``)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def prompt_ids(self, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        """Ids of the opening conversation followed by the assistant generation prompt."""
        return self.encode(self.render(messages, add_generation_prompt=True, tools=tools))

    def sampled_text(self, history: Sequence[Message], tools: list[dict[str, Any]] | None = None) -> str:
        """Text of the sequence up to the end of ``history``'s last (assistant) turn as it was sampled: the
        generation prompt rendered after the earlier messages, the turn's content, the end-of-turn token."""
        if not history or history[-1].get("role") != "assistant":
            raise ValueError("history: expected it to end with the assistant turn just sampled")
        prompt = self.render(history[:-1], add_generation_prompt=True, tools=tools)
        return prompt + str(history[-1].get("content") or "") + self.end_of_turn

    def continuation_ids(
        self, history: Sequence[Message], new_messages: Sequence[Message], tools: list[dict[str, Any]] | None = None
    ) -> tuple[list[int], bool]:
        """Ids of ``new_messages`` (and the next generation prompt) as rendered after ``history``.

        ``history`` ends with the assistant turn whose sampled ids end with the end-of-turn token; the returned
        ids start right after that token (so template glue such as the newline after it is included).
        Returns ``(ids, exact)``: ``exact`` is False when the template rewrote ``history`` when extended, in which
        case the new messages are rendered after a neutral two-message history instead.
        """
        # What the sequence holds so far, as text: the prompt the turn was sampled after, then the sampled turn.
        # (Not a render of `history`: a template may decorate its last assistant message, e.g. Qwen3 adds an empty
        # <think></think> block there that the model never sampled.)
        before = self.sampled_text(history, tools)
        after = self.render([*history, *new_messages], add_generation_prompt=True, tools=tools)
        if after.startswith(before):
            return self.encode(after[len(before) :]), True
        self.fallbacks += 1
        before = self.render(_NEUTRAL_HISTORY, add_generation_prompt=False, tools=tools)
        after = self.render([*_NEUTRAL_HISTORY, *new_messages], add_generation_prompt=True, tools=tools)
        cut = before.rfind(self.end_of_turn) + len(self.end_of_turn)
        return self.encode(after[cut:]), False


@dataclass
class TemplateCheck:
    """Result of :func:`check_template`: one entry per checked turn boundary."""

    turns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def prefix_preserving(self) -> bool:
        """True when every rendered turn is a token-exact prefix of the next rendering."""
        return all(turn["prefix"] for turn in self.turns)


# A scripted conversation that exercises what breaks templates: reasoning blocks, tool calls, several user turns.
SCRIPTED_CONVERSATION: list[Message] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 12*34?"},
    {
        "role": "assistant",
        "content": "<think>\nI should use the tool.\n</think>\n\n"
        '<tool_call>\n{"name": "calculate", "arguments": {"expression": "12*34"}}'
        "\n</tool_call>",
    },
    {"role": "tool", "content": "408"},
    {"role": "assistant", "content": "<think>\nThe tool said 408.\n</think>\n\nThe answer is 408."},
    {"role": "user", "content": "And 408+1?"},
    {"role": "assistant", "content": "<think>\nEasy.\n</think>\n\n409"},
    {"role": "user", "content": "Thanks."},
    {"role": "assistant", "content": "You are welcome."},
]


def check_template(tokenizer: Any, messages: Sequence[Message] = SCRIPTED_CONVERSATION) -> TemplateCheck:
    """Render ``messages`` turn by turn and check each rendering is a token-exact prefix of the next.

    For every assistant turn k, the ids of the conversation as sampled up to and including k (the generation prompt
    rendered after the earlier messages, then turn k's content and end-of-turn token) must be a prefix of the ids of
    the conversation rendered up to the next assistant turn. A template that drops earlier
    ``<think>`` blocks fails at the first turn after a new user message.
    """
    renderer = ChatRenderer(tokenizer)
    ends = [i + 1 for i, m in enumerate(messages) if m["role"] == "assistant"]
    result = TemplateCheck()
    for here, nxt in zip(ends, ends[1:]):
        # The sequence as sampled up to turn `here` (ending with its end-of-turn token) must prefix the next render.
        sampled = renderer.encode(renderer.sampled_text(messages[:here]))
        longer = renderer.encode(renderer.render(messages[:nxt], add_generation_prompt=False))
        ok = longer[: len(sampled)] == sampled
        mismatch = next((i for i, (a, b) in enumerate(zip(sampled, longer)) if a != b), None)
        turn: dict[str, Any] = {"turn": len([e for e in ends if e <= here]), "messages": here, "prefix": ok}
        if not ok:
            at = mismatch if mismatch is not None else len(longer)
            turn["first_difference"] = at
            turn["sampled"] = renderer.decode(sampled[at : at + 24])
            turn["re_rendered"] = renderer.decode(longer[at : at + 24])
        result.turns.append(turn)
    return result
