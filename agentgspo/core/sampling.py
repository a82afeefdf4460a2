"""The sampling vocabulary: what a policy backend is asked (``SampleRequest``, ``SamplingParams``), what it answers
(``SampledTurn``) and the protocol every backend implements (``PolicyBackend``). The rollout runner speaks it, the
backends in ``agentgspo.policy`` implement it; neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from agentgspo.core.errors import AgentGSPOError

__all__ = ["Message", "SamplingParams", "SampleRequest", "SampledTurn", "PolicyConfigurationError", "PolicyBackend"]

Message = dict[str, Any]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample a turn: temperature, then top-k, then top-p (nucleus) truncation of the distribution drawn from.

    What the returned log-probs are depends on the backend (its ``logprob_semantics``): the whole-vocabulary
    log_softmax(logits / temperature) ("full"), or renormalised over the top-k/top-p set ("truncated"); the learner
    must score with the same temperature.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    #: Keep only the ``top_k`` most likely ids before top-p; 0 = off (every id). Last, so positional
    #: ``SamplingParams(temperature, top_p, max_new_tokens)`` calls keep their meaning.
    top_k: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature: expected >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: expected in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k: expected >= 0 (0 = off), got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens: expected >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class SampleRequest:
    """One turn to sample: the ids so far (what a token backend consumes) and the messages (for chat APIs)."""

    prompt_ids: Sequence[int]
    messages: Sequence[Message]
    params: SamplingParams
    #: Seed of this turn's random draws. Backends that honour it sample the same ids for the same seed whatever
    #: else is in the batch, so rollouts are reproducible under concurrency.
    seed: int | None = None


@dataclass
class SampledTurn:
    """Sampled ids (ending with a stop id when ``finish_reason == "stop"``) and their log-probs.

    ``policy_version`` is the version of the weights that sampled the turn's first token (the backend's ``version``
    then; weight syncs bump it), recorded per turn in the trajectory so staleness is visible. A weight update can
    land while a turn is being sampled (asynchronous training): the turn is finished by the new weights, not
    resampled, and ``policy_version_end`` is the version that sampled its last token (None: the same as
    ``policy_version``). ``version_boundaries`` says where inside the turn the version changed, when the backend
    knows (the in-process vLLM engine does; servers report the span only).
    """

    token_ids: list[int]
    logprobs: list[float]
    #: "stop": ended at a stop id; "length": at ``max_new_tokens``; "context": nothing sampled, the backend's model
    #: has no room for the prompt (an API's context-length refusal): the rollout ends the episode as context_overflow.
    finish_reason: Literal["stop", "length", "context"]
    policy_version: int = 0
    #: ``[len(prompt) + len(token_ids), layers, k]`` top-k expert ids of every token the sampler fed (-1: not fed,
    #: e.g. the last sampled id); only from backends recording routing (``HFPolicy(record_routing=True)``).
    routed_experts: Any = None
    #: Version that sampled the last token when an update landed mid-turn (> ``policy_version``); None: no update did.
    policy_version_end: int | None = None
    #: ``[(token index where a version starts, version), ...]`` from ``(0, policy_version)`` on, when the version
    #: changed inside the turn and the backend knows where; None otherwise.
    version_boundaries: list[tuple[int, int]] | None = None

    def token_versions(self) -> list[int] | None:
        """The version that sampled each token, or None when the turn spans versions and the backend did not say
        where they change (a server: only ``policy_version`` and ``policy_version_end`` are known).

        >>> SampledTurn([5, 6, 7], [0.0] * 3, "length", policy_version=2).token_versions()
        [2, 2, 2]
        >>> turn = SampledTurn([5, 6, 7], [0.0] * 3, "length", 2, policy_version_end=3)
        >>> turn.token_versions() is None
        True
        >>> turn.version_boundaries = [(0, 2), (1, 3)]
        >>> turn.token_versions()
        [2, 3, 3]
        """
        if self.version_boundaries:
            starts = [start for start, _ in self.version_boundaries[1:]] + [len(self.token_ids)]
            return [v for (start, v), end in zip(self.version_boundaries, starts) for _ in range(start, end)]
        if self.policy_version_end is not None and self.policy_version_end != self.policy_version:
            return None
        return [self.policy_version] * len(self.token_ids)


class PolicyConfigurationError(ValueError, AgentGSPOError):
    """A backend's setup is wrong (a refused API key, an unknown model, a wrong URL): no episode can succeed, so the
    rollout raises it instead of recording each episode as a ``sampler_error``. The message names the fix."""


@runtime_checkable
class PolicyBackend(Protocol):
    """Samples assistant turns. ``sample`` is called concurrently by many episodes; backends batch them.

    Backends built by :func:`agentgspo.policy.factory.make_backend` also have ``renderer`` (the chat renderer of
    their tokenizer), ``stop_ids`` (every id that ends a turn) and ``version`` (the policy version sampling now).

    ``logprob_semantics`` says what ``SampledTurn.logprobs`` are, one of
    :data:`agentgspo.core.trajectory.LOGPROB_SEMANTICS`: ``"full"`` (log_softmax(logits / T) over the whole
    vocabulary, before top-k/top-p: what the learner computes), ``"truncated"`` (renormalised over the top-k/top-p set
    the id was drawn from: vLLM's ``processed_logprobs``), ``"raw"`` (log_softmax(logits), temperature ignored) or
    ``"none"`` (no log-probs, 0.0: scripted policies, chat APIs). The rollout records it per trajectory, and
    :func:`agentgspo.core.trajectory.sampler_logprobs_mismatch` decides from it whether the learner may use them.

    ``sample`` raises on any sampler failure (an engine error, a server unavailable after retries) with a message
    naming the engine or server; it never returns a turn it did not sample. The rollout records such an episode as
    ``sampler_error``.

    A backend serves one event loop at a time (:class:`~agentgspo.policy.base.LoopOwner`): ``sample`` from a second
    loop while the first has requests in flight raises :class:`~agentgspo.policy.base.EventLoopConflict`; a new loop
    takes over once the old one's are done.
    """

    end_of_turn_id: int
    logprob_semantics: str
    version: int

    async def sample(self, request: SampleRequest) -> SampledTurn:
        """Sample one assistant turn after ``request.prompt_ids``."""
        ...

    def update_weights(self, model: Any, folder: str | Path | None = None) -> int:
        """Sample with ``model``'s weights from now on (after an optimizer step); returns the new ``version``.
        ``folder`` is where weights may be written for the backend to read (servers need one they can read).

        May be called from another thread while ``sample`` calls are in flight (asynchronous training): no turn is
        lost or resampled. vLLM engines and servers pause in keep mode (running turns frozen), load the weights,
        reset the prefix cache (no later turn reuses KV of the old weights) and resume, so a turn in flight
        finishes on the new weights and records both versions (``SampledTurn.policy_version_end``); the HF backend
        finishes the batch in progress on the old weights and loads the new ones before the next."""
        ...
