"""Sampling with a Hugging Face transformers causal LM: the embedded default backend (CPU and small GPU runs).

Concurrent ``sample`` calls from many episodes are gathered into batches; each batch runs a lean KV-cached
sampling loop in a worker thread, so the event loop keeps stepping environments meanwhile. The loop draws from
softmax(logits / temperature) cut to the ``top_k`` largest ids, then to the top-p nucleus, and returns the log-prob of
each sampled id under the whole-vocabulary ``log_softmax(logits / temperature)`` computed in fp32 (before top-k and
top-p truncation: ``logprob_semantics = "full"``), which is what the learner recomputes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from agentgspo.core.sampling import SampledTurn, SampleRequest, SamplingParams
from agentgspo.policy.base import LoopOwner, batch_seeds
from agentgspo.policy.loading import load_model, load_tokenizer, resolve_checkpoint, stop_ids_of
from agentgspo.core.chat import ChatRenderer
from agentgspo.models.routing_replay import find_routers, sampled_routing
from agentgspo.models.routing_replay import record_routing as record_router_calls  # record_routing: HFPolicy's flag

__all__ = ["counter_uniform", "HFPolicy"]


_MASK32 = 0xFFFFFFFF


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32 by C. Wellons), vectorised on int64 tensors holding values < 2**32."""
    x = ((x >> 16) ^ x) * 0x21F0AAAD & _MASK32
    x = ((x >> 15) ^ x) * 0x735A2D97 & _MASK32
    return (x >> 15) ^ x


def counter_uniform(seeds: torch.Tensor, position: int) -> torch.Tensor:
    """Uniform numbers in (0, 1), one per row: a pure function of (row seed, position).

    A counter-based generator: the draw for token ``position`` of a request depends only on the request's seed,
    never on which other requests share the batch or in which order they arrived.
    """
    low, high = seeds & _MASK32, (seeds >> 32) & _MASK32  # [B]
    x = _mix32(_mix32(low ^ _mix32(high + 0x9E3779B9)) ^ position)  # [B] in [0, 2**32)
    return (x.double() + 0.5) / 2.0**32  # [B]


def _top_k_filter(probs: torch.Tensor, top_k: int) -> torch.Tensor:
    """Zero every id of each row outside its ``top_k`` most likely (ties at the k-th value are kept) and
    renormalise, so a top-p cut after it takes the nucleus of the top-k distribution (as vLLM does)."""
    kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[:, -1:]  # [B, 1]
    kept = probs.masked_fill(probs < kth, 0.0)  # [B, V]
    return kept / kept.sum(-1, keepdim=True)


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero the tail of each row outside the smallest set whose mass reaches ``top_p`` (nucleus sampling)."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # [B, V]
    outside = sorted_probs.cumsum(-1) - sorted_probs >= top_p  # [B, V] True once the mass before reached top_p
    sorted_probs = sorted_probs.masked_fill(outside, 0.0)
    return torch.zeros_like(probs).scatter(-1, order, sorted_probs)


class HFPolicy:
    """A transformers causal LM as a :class:`~agentgspo.policy.base.PolicyBackend`.

    Its log-probs are ``"full"`` (:data:`~agentgspo.core.trajectory.LOGPROB_SEMANTICS`): the whole vocabulary's
    log_softmax(logits / T) of each sampled id, whatever ``top_k`` and ``top_p`` cut from the distribution drawn from.

    Args:
        model: a ``PreTrainedModel`` (any causal LM, MoE included); it is used in eval mode without gradients.
        end_of_turn_id: the id that ends an assistant turn (sampling stops there).
        pad_token_id: id used to left-pad prompts (never attended to).
        stop_ids: more ids that end a turn (real tokenizers have several, e.g. Qwen3's ``<|im_end|>`` and
            ``<|endoftext|>``); a turn that ends on any of them has ``finish_reason="stop"``.
        max_batch_size: most sequences sampled together.
        seed: seed of requests that carry none (the global RNG is never used).
        record_routing: MoE policies: record each fed token's top-k experts per layer in the sampled turns
            (``SampledTurn.routed_experts``, stored in the trajectory) for the learner's routing replay (R3,
            :mod:`agentgspo.models.routing_replay`).
    """

    def __init__(
        self,
        model: Any,
        *,
        end_of_turn_id: int,
        pad_token_id: int,
        max_batch_size: int = 256,
        seed: int = 0,
        stop_ids: Sequence[int] = (),
        record_routing: bool = False,
    ):
        self.model = model
        self.logprob_semantics = "full"
        self.record_routing = record_routing
        if record_routing:
            find_routers(model)  # a clear error for a model without a supported MoE router
        self.end_of_turn_id = end_of_turn_id
        self.stop_ids = frozenset({end_of_turn_id, *stop_ids})
        self.version = 0  # the policy version that samples now (bumped by weight_sync.sync_weights)
        self.pad_token_id = pad_token_id
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        self.seed = seed
        self.calls = 0  # numbers the draws of seedless requests
        self.renderer: Any = None  # set by from_pretrained: the ChatRenderer of the loaded tokenizer
        self._lock = threading.Lock()  # one batch at a time on the model; weights load only under it
        self._staging = threading.Lock()  # guards _staged and version (taken briefly, never around a forward)
        self._staged: dict[str, torch.Tensor] | None = None  # weights of ``version`` waiting for the next batch
        self._pending: list[tuple[SampleRequest, asyncio.Future]] = []  # the owning loop's queue
        self._flusher: asyncio.Task | None = None
        self._owner = LoopOwner("hf")  # which event loop the queue and flusher belong to

    summary = "transformers in this process, default"
    samples_with_learner_module = True  # synchronous training samples with the learner's own module

    @staticmethod
    def add_arguments(group: Any) -> None:
        """No options of its own (``--backend hf``)."""

    @staticmethod
    def options(args: Any) -> dict[str, Any]:
        """No options of its own."""
        return {}

    @staticmethod
    def run_options(*, seed: int, server_urls: list[str], weight_transfer: str) -> dict[str, Any]:
        """In a training run: its requests' default seed (updates are state dicts in memory: no transfer to pick)."""
        return {"seed": seed}

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        dtype: str | torch.dtype = torch.float32,
        device: str = "cpu",
        attn_implementation: str | None = None,
        experts_implementation: str | None = None,
        **kwargs: Any,
    ) -> HFPolicy:
        """Load ``path``: ``"tiny"`` (the embedded tiny policy), a folder saved with ``save_pretrained`` or a hub id
        in the local cache (:func:`agentgspo.policy.loading.resolve_checkpoint`).

        ``dtype`` (``"float32"``, ``"bfloat16"``, ``"float16"`` or a torch dtype), ``device`` and
        ``attn_implementation`` are the loading settings; ``experts_implementation`` picks how an MoE model computes
        its experts (transformers' names, or ``"agentgspo"``: grouped GEMMs with an atomics-free, deterministic
        backward, see ``agentgspo/models/moe.py``); None keeps transformers' default.
        """
        path = resolve_checkpoint(path)  # "tiny", a model folder or a cached hub id; else an error naming the forms
        tokenizer = load_tokenizer(path)
        model = load_model(
            path,
            dtype=dtype,
            device=device,
            attn_implementation=attn_implementation,
            experts_implementation=experts_implementation,
        )
        renderer = ChatRenderer(tokenizer)
        kwargs.setdefault("stop_ids", stop_ids_of(tokenizer, model.generation_config))
        policy = cls(model, end_of_turn_id=renderer.end_of_turn_id, pad_token_id=tokenizer.pad_token_id, **kwargs)
        policy.renderer = renderer
        return policy

    @torch.no_grad()
    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, seeds: Sequence[int | None] | None = None
    ) -> list[SampledTurn]:
        """Sample one turn for each prompt (a batch), stopping each row at its end-of-turn id.

        Row r's draws are a function of ``seeds[r]`` (see :func:`counter_uniform`); rows without a seed get one
        derived from the backend's seed and a call counter.
        """
        seeds = batch_seeds(prompts, seeds)
        with self._lock:
            version = self._load_staged()  # an update that came during the last batch applies from this one
            self.calls += 1
            filled = [s if s is not None else hash((self.seed, self.calls, row)) for row, s in enumerate(seeds)]
            if not self.record_routing:
                return self._generate(prompts, params, filled, version)
            fed: list[list[int]] = []  # rows fed at each decode step
            with record_router_calls(self.model) as calls:
                turns = self._generate(prompts, params, filled, version, fed)
            for turn, routing in zip(turns, sampled_routing(calls, prompts, turns, fed)):
                turn.routed_experts = routing
            return turns

    def _generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        seeds: Sequence[int],
        version: int,
        fed: list[list[int]] | None = None,
    ) -> list[SampledTurn]:
        batch, width = len(prompts), max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((batch, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: every row's next token is at the same column
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)  # [B, L]
        row_seeds = torch.tensor([s & 0x7FFFFFFFFFFFFFFF for s in seeds], dtype=torch.long, device=self.device)
        was_training = self.model.training
        self.model.eval()
        try:
            # logits_to_keep=1: the prefill builds logits for the last position only ([B, 1, V], not [B, L, V]:
            # tens of GB at long prompts with a 152K vocabulary).
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                use_cache=True,
                logits_to_keep=1,
            )
            past, logits = out.past_key_values, out.logits[:, -1]  # [B, V]
            next_position = position_ids[:, -1:] + 1  # [B, 1]
            live = list(range(batch))  # original row of each row still generating
            ids: list[list[int]] = [[] for _ in range(batch)]
            logps: list[list[float]] = [[] for _ in range(batch)]
            temperature = params.temperature if params.temperature > 0 else 1.0
            stops = torch.tensor(sorted(self.stop_ids), dtype=torch.long, device=self.device)  # [S]
            for step in range(params.max_new_tokens):
                logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)  # [b, V] fp32
                if params.temperature == 0:
                    token = logprobs.argmax(-1)  # [b]
                else:
                    probs = logprobs.exp()  # [b, V]
                    if params.top_k > 0:
                        probs = _top_k_filter(probs, params.top_k)
                    if params.top_p < 1.0:
                        probs = _top_p_filter(probs, params.top_p)
                    cdf = probs.double().cumsum(-1)  # [b, V]
                    draw = counter_uniform(row_seeds, step)[:, None] * cdf[:, -1:]  # [b, 1] inverse-CDF sampling
                    token = torch.searchsorted(cdf, draw).squeeze(-1).clamp(max=probs.shape[-1] - 1)  # [b]
                chosen = logprobs.gather(-1, token[:, None]).squeeze(-1)  # [b]
                for row, t, lp in zip(live, token.tolist(), chosen.tolist()):
                    ids[row].append(t)
                    logps[row].append(lp)
                going = ~torch.isin(token, stops)  # [b]
                if not bool(going.any()):
                    break
                if not bool(going.all()):
                    # Drop finished rows from the batch (and the KV cache): one long row must not make the
                    # whole batch pay for its tokens.
                    keep = going.nonzero().squeeze(-1)  # [b']
                    past.batch_select_indices(keep)
                    live = [live[i] for i in keep.tolist()]
                    token, row_seeds = token[keep], row_seeds[keep]
                    attention_mask, next_position = attention_mask[keep], next_position[keep]
                attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(live), 1))], dim=1)
                if fed is not None:
                    fed.append(list(live))
                out = self.model(
                    input_ids=token[:, None],
                    attention_mask=attention_mask,
                    position_ids=next_position,
                    past_key_values=past,
                    use_cache=True,
                )
                past, logits = out.past_key_values, out.logits[:, -1]
                next_position = next_position + 1
        finally:
            self.model.train(was_training)
        return [
            SampledTurn(
                ids[row], logps[row], "stop" if ids[row][-1] in self.stop_ids else "length", policy_version=version
            )
            for row in range(batch)
        ]

    def close(self) -> None:
        """Nothing to release: the model is the caller's (the learner's, or one ``from_pretrained`` loaded)."""

    def update_weights(self, model: Any, folder: str | Path | None = None) -> int:
        """Sample with ``model``'s weights (after an optimizer step); returns the new version.

        Safe while ``sample``/``generate`` run in another thread: a batch in progress finishes on the weights it
        started with and records their version; the next batch samples with the new ones. An idle sampler loads
        them at once; a busy one gets a copy (made here, on the learner's thread) that it loads before its next
        batch, so the learner never waits for a batch. A later update replaces a copy not loaded yet.

        Sharing the learner's module (the synchronous embedded setup) there is nothing to copy: the version moves
        once the batch in progress is done (the learner must not step a module that is sampling: asynchronous
        training gives the sampler its own copy).
        """
        if self.model is model:
            with self._lock, self._staging:
                self._staged = None
                self.version += 1
                return self.version
        if self._lock.acquire(blocking=False):  # idle: load straight from the learner's module, no extra copy
            try:
                with self._staging:
                    self._staged = None
                    self.version += 1
                    version = self.version
                self.model.load_state_dict(model.state_dict())
                return version
            finally:
                self._lock.release()
        state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        with self._staging:
            self._staged = state
            self.version += 1
            version = self.version
        if self._lock.acquire(blocking=False):  # the batch ended meanwhile: load now rather than hold the copy
            try:
                self._load_staged()
            finally:
                self._lock.release()
        return version

    def _load_staged(self) -> int:
        """Under ``_lock``: load weights an update staged while a batch ran; returns the version now loaded."""
        with self._staging:
            staged, self._staged = self._staged, None
            version = self.version  # the version of ``staged`` (or of the loaded weights when none is staged)
        if staged is not None:
            self.model.load_state_dict(staged)
        return version

    async def sample(self, request: SampleRequest) -> SampledTurn:
        """Queue one turn; requests arriving together are sampled as one batch. The queue and its flusher belong to
        one event loop at a time (a future of one loop set from another never wakes its waiter): a request from a
        second loop while the first has requests in flight raises
        :class:`~agentgspo.policy.base.EventLoopConflict`; a loop that comes after gets a fresh queue."""
        with self._owner.request() as rebound:
            if rebound:
                self._pending, self._flusher = [], None
            future = asyncio.get_running_loop().create_future()
            self._pending.append((request, future))
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.create_task(self._flush(self._pending))
            return await future

    async def _flush(self, pending: list[tuple[SampleRequest, asyncio.Future]]) -> None:
        """Sample the requests of ``pending`` (one loop's queue, emptied in place) in batches until none is left."""
        while pending:
            # Let every episode that is about to ask join the batch: wait until a tick adds no new request.
            seen = -1
            while len(pending) != seen and len(pending) < self.max_batch_size:
                seen = len(pending)
                await asyncio.sleep(0.001)
            todo = [(r, f) for r, f in pending[: self.max_batch_size] if not f.cancelled()]
            del pending[: self.max_batch_size]
            by_params: dict[SamplingParams, list[tuple[SampleRequest, asyncio.Future]]] = {}
            for request, future in todo:
                by_params.setdefault(request.params, []).append((request, future))
            for params, group in by_params.items():
                try:
                    turns = await asyncio.to_thread(
                        self.generate, [r.prompt_ids for r, _ in group], params, [r.seed for r, _ in group]
                    )
                except Exception as exc:  # a backend failure reaches every waiting episode
                    for _, future in group:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), turn in zip(group, turns):
                    if not future.done():
                        future.set_result(turn)
