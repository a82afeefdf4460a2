"""A policy backend in one module, for tests/policy/test_vllm_factory.py: it answers every turn with one fixed text (its
``--echo-text``), tokenized by the checkpoint's tokenizer. Registered with one line:
``register_backend("echo", "echo_backend:EchoPolicy")``."""

from __future__ import annotations

from typing import Any

from agentgspo.core.sampling import SampledTurn, SampleRequest
from agentgspo.policy.loading import load_renderer_and_stops, resolve_checkpoint


class EchoPolicy:
    """Answers ``text`` every turn; log-probs 0.0 (semantics ``"none"``); no weights of its own."""

    summary = "a fixed answer (a test backend)"
    samples_with_learner_module = False
    logprob_semantics = "none"

    def __init__(self, renderer: Any, text: str):
        self.renderer, self.text, self.version = renderer, text, 0
        self.end_of_turn_id = renderer.end_of_turn_id
        self.stop_ids = frozenset({self.end_of_turn_id})

    @staticmethod
    def add_arguments(group: Any) -> None:
        """``--echo-text``."""
        group.add_argument("--echo-text", default="<answer>0</answer>", help="what the echo backend answers")

    @staticmethod
    def options(args: Any) -> dict[str, Any]:
        """Its text."""
        return {"text": args.echo_text}

    @staticmethod
    def run_options(*, seed: int, server_urls: list[str], weight_transfer: str = "auto") -> dict[str, Any]:
        """Nothing from a training run."""
        return {}

    @classmethod
    def from_pretrained(cls, policy: str, *, text: str = "<answer>0</answer>") -> EchoPolicy:
        """The checkpoint's renderer, answering ``text``."""
        renderer, _ = load_renderer_and_stops(resolve_checkpoint(policy))
        return cls(renderer, text)

    def update_weights(self, model: Any, folder: Any = None) -> int:
        """No weights: a new version all the same (what a sync does)."""
        self.version += 1
        return self.version

    async def sample(self, request: SampleRequest) -> SampledTurn:
        """``text`` and the end-of-turn id."""
        ids = [*self.renderer.encode(self.text), self.end_of_turn_id][: request.params.max_new_tokens]
        return SampledTurn(ids, [0.0] * len(ids), "stop" if ids[-1] == self.end_of_turn_id else "length")

    def close(self) -> None:
        """Nothing to release."""
