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

__all__ = [
    "Message",
    "SamplingParams",
    "SampleRequest",
    "SampledTurn",
    "PolicyConfigurationError",
    "WeightUpdateFailed",
    "PolicyBackend",
    "PolicyBackendClass",
]

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


class WeightUpdateFailed(RuntimeError, AgentGSPOError):
    """A backend's weight update failed on some of its samplers (servers, here), which it retired: the one
    exception a training loop catches from :meth:`PolicyBackend.update_weights`. What the loop needs to decide
    whether to go on with fewer samplers or to stop naming them:

    - ``version``: the version the update was to;
    - ``updated``: URLs of the servers that took it (their own transfer completed): they serve ``version`` now;
    - ``retired``: URLs of the servers this update retired (no turn goes to them again; a turn they answer after
      it is a ``sampler_error``);
    - ``errors``: each retired server's URL -> why;
    - ``serving``: how many servers still serve (all with the new weights; ``len(updated)`` outside a fleet).
    """

    def __init__(
        self,
        message: str,
        serving: int,
        *,
        version: int | None = None,
        updated: Sequence[str] = (),
        retired: Sequence[str] = (),
        errors: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.serving = serving
        self.version = version
        self.updated = list(updated)
        self.retired = list(retired)
        self.errors = dict(errors or {})


@runtime_checkable
class PolicyBackend(Protocol):
    """Samples assistant turns. ``sample`` is called concurrently by many episodes; backends batch them.

    Every member a caller may use is listed below, and every backend has each of them: ``renderer`` (the chat
    renderer of its tokenizer), ``end_of_turn_id`` and ``stop_ids`` (every id that ends a turn), ``version`` (the
    policy version sampling now), ``logprob_semantics``, ``sample``, ``update_weights`` (which raises
    :class:`WeightUpdateFailed` and nothing else for samplers that did not take the weights) and ``close``. A
    backend's class has the factory's members too (:class:`PolicyBackendClass`).

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

    renderer: Any  # agentgspo.core.chat.ChatRenderer of the backend's tokenizer
    end_of_turn_id: int
    stop_ids: frozenset[int]
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

    def close(self) -> None:
        """Release what the backend started (engine processes, connections); a backend that started nothing does
        nothing. Safe to call twice."""
        ...


@runtime_checkable
class PolicyBackendClass(Protocol):
    """What ``--backend NAME`` needs of a backend's class (:mod:`agentgspo.policy.factory`): one module holding it
    and one registration line make a backend.

    ``samples_with_learner_module``: a synchronous training run samples with the learner's own module (no weight
    copy; the HF backend), instead of a backend loaded from the weights the learner writes."""

    summary: str
    samples_with_learner_module: bool

    @staticmethod
    def add_arguments(group: Any) -> None:
        """Its own command-line options, added to an ``argparse`` argument group."""
        ...

    @staticmethod
    def options(args: Any) -> dict[str, Any]:
        """Its keyword options for ``from_pretrained`` from the parsed command line."""
        ...

    @staticmethod
    def run_options(*, seed: int, server_urls: list[str], weight_transfer: str) -> dict[str, Any]:
        """Its keyword options for ``from_pretrained`` in a training run."""
        ...

    @classmethod
    def from_pretrained(cls, policy: str | Path, **options: Any) -> PolicyBackend:
        """The backend for a checkpoint (``"tiny"``, a ``save_pretrained`` folder or a cached hub id)."""
        ...
