"""Chat rendering for token-exact multi-turn trajectories.

The learner trains on the exact ids the sampler produced. After a sampled assistant turn we never re-render and
re-tokenize the conversation: we tokenize only the environment's new messages, as the chat template renders them
after the existing prefix, and append those ids (see :meth:`ChatRenderer.continuation_ids`).

Some templates rewrite history (Qwen3's drops ``<think>`` blocks of earlier turns), so a full re-render of the
conversation is not always a prefix-extension of what was sampled. :func:`check_template` finds out for a given
tokenizer; the rollout records per trajectory whether its ids equal a full re-render (a metric).
"""

from __future__ import annotations

import marshal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["ChatRenderer", "Continuation", "TemplateCheck", "check_template"]

Message = dict[str, Any]

# A neutral history to render new messages after when a template is not prefix-preserving for the real one.
_NEUTRAL_HISTORY: list[Message] = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]

# The renderer's caches (ChatRenderer.encode, .render) forget everything once they hold this many ids or characters
# (about 40 MB each), and never keep a text longer than _CACHED_TEXT characters (a long episode is rarely seen twice).
_ENCODE_CACHE_IDS = 1_000_000
_RENDER_CACHE_CHARS = 8_000_000
_CACHED_TEXT = 16_384
# What a chat template can call that makes its render differ between two calls with the same messages: the date
# (transformers' strftime_now) and Jinja's random filter and lipsum. A template naming one is rendered every time.
_UNREPEATABLE = ("strftime_now", "random", "lipsum")


class _Memo:
    """A dict that forgets everything once its values add up to ``capacity`` (one ``clear``, atomic: threads may
    share it; a race only miscounts the size)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.data: dict[Any, Any] = {}
        self.size = 0

    def put(self, key: Any, value: Any, size: int) -> None:
        if self.size + size > self.capacity:
            self.data.clear()
            self.size = 0
        self.data[key] = value
        self.size += size


class Continuation(NamedTuple):
    """What :meth:`ChatRenderer.continuation` returns.

    Attributes:
        ids: the ids of the new messages and the next generation prompt, to append after the sampled turn.
        exact: False when the template rewrote the history when extended (the ids are then rendered after a neutral
            history, see :meth:`ChatRenderer.continuation_ids`).
        prompt_text: the template's render of the extended history with the generation prompt: what the next turn
            is sampled after, as far as the template is concerned (the ``prompt_text`` of the next call).
    """

    ids: list[int]
    exact: bool
    prompt_text: str


class ChatRenderer:
    """Renders messages with a tokenizer's chat template and tokenizes them for the policy.

    Args:
        tokenizer: a ``transformers`` tokenizer with a ``chat_template``.
        end_of_turn: the token that ends an assistant turn; defaults to ``<|im_end|>`` when the vocabulary has it,
            else the tokenizer's ``eos_token``.
        caching: keep renders and ids of texts seen before (:meth:`render`, :meth:`encode`); False renders and
            encodes every text anew (the same results, slower: benchmarks/bench_rollout.py ``--no-cache``).
    """

    def __init__(self, tokenizer: Any, *, end_of_turn: str | None = None, caching: bool = True):
        if not tokenizer.chat_template:
            raise ValueError(
                f"tokenizer {tokenizer.name_or_path!r} has no chat_template; set "
                "tokenizer.chat_template to a Jinja template (see agentgspo.models.tiny.CHAT_TEMPLATE for an example)"
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
        self._fast_decode = self._fast is not None and _decodes_with_backend(tokenizer)
        self._repeatable: tuple[Any, bool] = (None, False)  # (chat template, whether its renders may be cached)
        # Renders and ids seen before: the G episodes of a group share their prompt, and a scripted or low-temperature
        # policy repeats its turns. Both are pure functions of their inputs for a fixed tokenizer (the renderer already
        # assumes one: it keeps end_of_turn_id) and a template without _UNREPEATABLE calls, so a hit returns exactly
        # what rendering or encoding would.
        self.caching = caching
        self._encoded = _Memo(_ENCODE_CACHE_IDS)  # text -> its ids, as a tuple
        self._rendered = _Memo(_RENDER_CACHE_CHARS)  # (template, generation prompt, marshalled inputs) -> text
        self.fallbacks = 0  # continuations rendered after a neutral history (template not prefix-preserving)

    def render(
        self, messages: Sequence[Message], *, add_generation_prompt: bool, tools: list[dict[str, Any]] | None = None
    ) -> str:
        """The chat template's text for ``messages`` (a render seen before comes from a cache, see :meth:`encode`)."""
        messages, tools = list(messages), tools or None
        key = self._render_key(messages, tools, add_generation_prompt) if self.caching else None
        text = self._rendered.data.get(key) if key is not None else None
        if text is None:
            text = self.tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt
            )
            if key is not None and len(text) <= _CACHED_TEXT:
                self._rendered.put(key, text, len(text))
        return text

    def _render_key(self, messages: list[Message], tools: list[dict[str, Any]] | None, generation_prompt: bool) -> Any:
        """What a render depends on, or None when it must not be cached: a template that can render the same inputs
        differently (:data:`_UNREPEATABLE`), or inputs that are not plain data. ``marshal`` takes only the exact
        built-in types (a ``str`` subclass, say, could render differently from an equal ``str``) and keeps the
        order of every dict, which a template sees; messages and tools are JSON data by the env contract (of the
        buffers it takes, ``bytes`` and ``bytearray`` of equal bytes share a key). Format 2: equal data, equal bytes
        (later formats mark interned strings and shared objects)."""
        template = self.tokenizer.chat_template
        checked, repeatable = self._repeatable
        if template is not checked:
            repeatable = isinstance(template, str) and not any(name in template for name in _UNREPEATABLE)
            self._repeatable = (template, repeatable)
        if not repeatable:
            return None
        try:
            return template, generation_prompt, marshal.dumps((messages, tools), 2)
        except ValueError:  # an object marshal refuses: render it every time
            return None

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens in the text are parsed; none are added); a new list each call.

        Texts encoded before come from a cache (as renders do), so the tokenizer must not change after the renderer
        is built (its chat template may: it is part of the render cache's key)."""
        cached = self._encoded.data.get(text) if self.caching else None
        if cached is not None:
            return list(cached)
        if self._fast is not None:
            ids = self._fast.encode(text, add_special_tokens=False).ids
        else:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.caching and len(text) <= _CACHED_TEXT:
            self._encoded.put(text, tuple(ids), len(ids))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens included (so tool-call tags survive), never "cleaned up" (a tokenizer
        with ``clean_up_tokenization_spaces`` would turn a sampled ``" ,"`` into ``","``)."""
        if self._fast_decode:  # what tokenizer.decode does with these arguments, without its per-id conversion
            try:
                return self._fast.decode(list(ids), skip_special_tokens=False)
            except (TypeError, OverflowError):  # ids the Rust side cannot take: let transformers convert them
                pass
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def prompt_ids(self, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        """Ids of the opening conversation followed by the assistant generation prompt."""
        return self.encode(self.render(messages, add_generation_prompt=True, tools=tools))

    def sampled_text(
        self,
        history: Sequence[Message],
        tools: list[dict[str, Any]] | None = None,
        *,
        prompt_text: str | None = None,
    ) -> str:
        """Text of the sequence up to the end of ``history``'s last (assistant) turn as it was sampled: the
        generation prompt rendered after the earlier messages, the turn's content, the end-of-turn token.

        ``prompt_text``: that render of ``history[:-1]`` with the generation prompt, when the caller kept it from an
        earlier call (:attr:`Continuation.prompt_text`); it saves rendering it again and must be exactly that."""
        if not history or history[-1].get("role") != "assistant":
            raise ValueError("history: expected it to end with the assistant turn just sampled")
        if prompt_text is None:
            prompt_text = self.render(history[:-1], add_generation_prompt=True, tools=tools)
        return prompt_text + str(history[-1].get("content") or "") + self.end_of_turn

    def continuation_ids(
        self, history: Sequence[Message], new_messages: Sequence[Message], tools: list[dict[str, Any]] | None = None
    ) -> tuple[list[int], bool]:
        """Ids of ``new_messages`` (and the next generation prompt) as rendered after ``history``.

        ``history`` ends with the assistant turn whose sampled ids end with the end-of-turn token; the returned
        ids start right after that token (so template glue such as the newline after it is included).
        Returns ``(ids, exact)``: ``exact`` is False when the template rewrote ``history`` when extended, in which
        case the new messages are rendered after a neutral two-message history instead.
        """
        ids, exact, _ = self.continuation(history, new_messages, tools)
        return ids, exact

    def continuation(
        self,
        history: Sequence[Message],
        new_messages: Sequence[Message],
        tools: list[dict[str, Any]] | None = None,
        *,
        prompt_text: str | None = None,
    ) -> Continuation:
        """:meth:`continuation_ids`, with the render of the extended history that the next call takes as its
        ``prompt_text`` (one render per turn instead of two). ``prompt_text``: as in :meth:`sampled_text`."""
        # What the sequence holds so far, as text: the prompt the turn was sampled after, then the sampled turn.
        # (Not a render of `history`: a template may decorate its last assistant message, e.g. Qwen3 adds an empty
        # <think></think> block there that the model never sampled.)
        before = self.sampled_text(history, tools, prompt_text=prompt_text)
        after = self.render([*history, *new_messages], add_generation_prompt=True, tools=tools)
        if after.startswith(before):
            return Continuation(self.encode(after[len(before) :]), True, after)
        self.fallbacks += 1
        neutral = self.render(_NEUTRAL_HISTORY, add_generation_prompt=False, tools=tools)
        extended = self.render([*_NEUTRAL_HISTORY, *new_messages], add_generation_prompt=True, tools=tools)
        cut = neutral.rfind(self.end_of_turn) + len(self.end_of_turn)
        return Continuation(self.encode(extended[cut:]), False, after)


def _decodes_with_backend(tokenizer: Any) -> bool:
    """Whether ``tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)`` is the Rust
    tokenizer's ``decode(ids, skip_special_tokens=False)``: true of a ``transformers`` fast tokenizer whose class
    overrides neither ``decode`` nor ``_decode`` (``PreTrainedTokenizerBase.decode`` converts the ids to Python ints
    and calls ``_decode``, which decodes with the Rust tokenizer and cleans up only when asked)."""
    try:
        from transformers import PreTrainedTokenizerFast
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
    except ImportError:
        return False
    kind = type(tokenizer)
    return (
        isinstance(tokenizer, PreTrainedTokenizerFast)
        and kind.decode is PreTrainedTokenizerBase.decode
        and kind._decode is PreTrainedTokenizerFast._decode
    )


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
