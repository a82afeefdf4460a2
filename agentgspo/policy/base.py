"""What the policy backends (transformers, vLLM engine, vLLM/OpenAI server, scripted) share: which event loop a
backend serves, the context-overflow test, the scripted policy; the protocol they implement and its data types are
``agentgspo.core.sampling``'s (re-exported here)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentgspo.core.sampling import (  # noqa: F401 -- the sampling vocabulary, re-exported where it was defined
    Message,
    PolicyBackend,
    PolicyConfigurationError,
    SampledTurn,
    SampleRequest,
    SamplingParams,
)

__all__ = [
    "SamplingParams",
    "SampleRequest",
    "SampledTurn",
    "is_context_overflow",
    "PolicyConfigurationError",
    "EventLoopConflict",
    "LoopOwner",
    "PolicyBackend",
    "ScriptedPolicy",
    "batch_seeds",
]

# How an OpenAI-compatible server refuses a prompt longer than the model's context (the status is 400, sometimes 413
# or 422): vLLM "This model's maximum context length is N tokens. However, your prompt contains M input tokens ..."
# (older: "... Input length (M) exceeds model's maximum context length (N)"), OpenAI code "context_length_exceeded",
# SGLang "... longer than the model's context length ...", llama.cpp "exceed_context_size_error".
CONTEXT_ERROR = re.compile(r"context[ _]length|exceed_context_size|context size|context window", re.IGNORECASE)


def is_context_overflow(status: int, text: str) -> bool:
    """Whether an endpoint's error response refuses the prompt as longer than the model's context: the backend then
    returns a ``finish_reason="context"`` turn (the server backend and the chat agent share this test).

    >>> is_context_overflow(400, "This model's maximum context length is 2048 tokens. However, ...")
    True
    >>> is_context_overflow(400, "Token id 999999 is out of vocabulary"), is_context_overflow(500, "context length")
    (False, False)
    """
    return status in (400, 413, 422) and CONTEXT_ERROR.search(text) is not None


class EventLoopConflict(PolicyConfigurationError):
    """A backend was asked for a turn from one event loop while another loop has requests in flight on it. A
    backend's async state (batches, futures, HTTP clients, in-flight counts) belongs to one loop at a time: futures
    of one loop completed from another never wake their waiter (the HF backend stalled until ``sampler_timeout_s``)
    and the server backend's in-flight counts were reset under the other loop's turns. A usage error, not a
    sampler failure: the rollout stops instead of recording every episode as ``sampler_error``."""


class LoopOwner:
    """Which event loop a backend serves, and how many of its requests are in flight there.

    A backend wraps each ``sample`` in :meth:`request`. A request from another loop is refused
    (:class:`EventLoopConflict`) while the owning loop has requests in flight; once they have all finished (or that
    loop is closed), the next loop takes the backend over and the backend makes its per-loop state afresh (tests
    and ``asyncio.run`` per rollout make a new loop each time). Thread-safe: the loops may run on different
    threads.
    """

    def __init__(self, backend: str):
        self.backend = backend
        self.loop: asyncio.AbstractEventLoop | None = None
        self.in_flight = 0
        self._lock = threading.Lock()

    @contextmanager
    def request(self) -> Iterator[bool]:
        """Count one request of the running loop for as long as the block runs; yields whether the backend was
        just (re)bound to this loop (its per-loop state must be made for it)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            rebound = loop is not self.loop
            if rebound:
                if self.in_flight and self.loop is not None and not self.loop.is_closed():
                    raise EventLoopConflict(
                        f"{self.backend} backend: a request came from event loop {id(loop):#x} while another event "
                        f"loop ({id(self.loop):#x}) has {self.in_flight} requests in flight on it; a backend serves "
                        "one event loop at a time. Run the call on the loop that owns the backend (under "
                        "asynchronous training the producer's: RolloutProducer.run(coroutine), e.g. "
                        "EvalHook(...)(step, policy, run=producer.run)), or wait until those requests finished"
                    )
                self.loop, self.in_flight = loop, 0
            self.in_flight += 1
        try:
            yield rebound
        finally:
            with self._lock:
                if self.loop is loop:
                    self.in_flight -= 1


class ScriptedPolicy:
    """A text policy ``fn(messages) -> str`` (an env's oracle, say) as a backend: instant, log-probs 0.0 (semantics
    ``"none"``).

    The text is tokenized with the renderer's tokenizer and the end-of-turn id appended, so its records are
    token-exact like any other backend's.
    """

    def __init__(self, fn: Callable[[list[Message]], str], renderer: Any):
        self.fn = fn
        self.renderer = renderer
        self.logprob_semantics = "none"
        self.end_of_turn_id = renderer.end_of_turn_id
        self.stop_ids = frozenset({self.end_of_turn_id})
        self.version = 0

    def update_weights(self, model: Any, folder: str | Path | None = None) -> int:
        """A scripted policy has no weights: its version stays."""
        return self.version

    def close(self) -> None:
        """Nothing to release."""

    async def sample(self, request: SampleRequest) -> SampledTurn:
        """The text ``fn`` answers, tokenized, with the end-of-turn id (cut at ``max_new_tokens``)."""
        ids = self.renderer.encode(self.fn(list(request.messages)))
        ids.append(self.end_of_turn_id)
        limit = request.params.max_new_tokens
        finish_reason = "stop" if len(ids) <= limit else "length"
        ids = ids[:limit]
        return SampledTurn(token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish_reason)


def batch_seeds(prompts: Sequence[Sequence[int]], seeds: Sequence[int | None] | None) -> list[int | None]:
    """Check a ``generate`` batch (at least one prompt, none empty, one seed per prompt when seeds are given) and
    return its seeds as a list (None for every row when no seeds are given)."""
    if not prompts:
        raise ValueError("prompts: expected at least one prompt, got none")
    empty = next((row for row, prompt in enumerate(prompts) if len(prompt) == 0), None)
    if empty is not None:
        raise ValueError(f"prompt {empty} is empty: expected at least one id to condition on")
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError(f"seeds: expected one per prompt, got {len(seeds)} for {len(prompts)} prompts")
    return list(seeds) if seeds is not None else [None] * len(prompts)
