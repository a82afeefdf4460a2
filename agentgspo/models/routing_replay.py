"""Routing replay for Hugging Face MoE models: record each token's top-k experts per layer, and force them later.

RL on an MoE policy changes the experts a token is routed to between the forward that sampled it and the learner's
forwards (GSPO paper, arXiv 2507.18071, §4.3: about 10% of the (token, layer) choices of Qwen3-30B-A3B change after
an update), so token-level importance ratios mix a routing change into the policy change. Routing Replay fixes the
experts of each token to those of a reference forward:

* ``rollout`` (R3): the sampler's own choices, recorded while sampling (``HFPolicy(record_routing=True)``) and
  stored in the trajectory (:func:`encode_routing`);
* ``old_policy`` (the paper's Routing Replay, R2): the choices of the learner's own logp_old recompute.

Replay keeps the router learning: the replayed experts ``e_1..e_k`` of a token get the *current* router's weights

    z = hidden @ W_router^T               (recomputed from the router's input and its own weight)
    p = softmax(z) in fp32                w_j = p[e_j]
    w_j <- w_j / sum_j' w_j'   when the family normalises its top-k (Mixtral always; the others if norm_topk_prob)

exactly as each family's ``TopKRouter.forward`` computes the weights of its own top-k (transformers 5), so gradients
flow into the router through ``w``. The logits are recomputed from the router's input rather than taken from its
first output because that output is not the same thing in every transformers 5 release: Mixtral's and Qwen2-MoE's
routers returned ``softmax(z)`` there in 5.0 to 5.5 (transformers issue 45120, fixed by PR 45131), and a softmax of
those probabilities is nearly uniform. The first output itself is passed through unchanged (replay does not change
a layer's logits, only which experts they pick), so HF's load-balancing loss sees what it sees without replay.
Positions without a recorded choice (``-1``; e.g. a turn's last sampled token, which the sampler never fed back)
route live.

Supported: the routers of transformers 5's ``Qwen3MoeTopKRouter``, ``MixtralTopKRouter``, ``OlmoeTopKRouter`` and
``Qwen2MoeTopKRouter`` (forward ``hidden [N, H] -> (logits or probs [N, E], weights [N, k], ids [N, k])``, from
transformers 5.0.0 on; 4.x has none of them). vLLM backends do not record routing here: vLLM's routed-expert output
needs its V2 model runner with Triton kernels (not on CPU).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentgspo.core.routing import NOT_RECORDED, STORAGE, UINT8_NOT_RECORDED

__all__ = [
    "find_routers",
    "record_routing",
    "record_router_logits",
    "recompute_router_logits",
    "replayed_weights",
    "replay_routing",
    "encode_routing",
    "decode_routing",
    "merge_routing",
    "batch_replay",
    "split_recorded",
    "sampled_routing",
]

#: The supported routers (transformers 5 class names), each with whether a router of it renormalises its top-k
#: weights to sum to 1: Mixtral's always, the others as their config's ``norm_topk_prob`` says.
ROUTERS: dict[str, Callable[[torch.nn.Module], bool]] = {
    "Qwen3MoeTopKRouter": lambda router: bool(router.norm_topk_prob),
    "OlmoeTopKRouter": lambda router: bool(router.norm_topk_prob),
    "Qwen2MoeTopKRouter": lambda router: bool(router.norm_topk_prob),
    "MixtralTopKRouter": lambda router: True,
}
REPLAY_SOURCES = ("off", "rollout", "old_policy")


def find_routers(model: Any) -> list[torch.nn.Module]:
    """The model's top-k routers in layer order; a clear error for a model without a supported one."""
    base = getattr(model, "module", model)
    routers = [m for m in base.modules() if type(m).__name__ in ROUTERS]
    if not routers:
        raise ValueError(
            f"routing replay: {type(base).__name__} has no supported MoE router (supported: "
            f"{sorted(ROUTERS)} from transformers 5); turn routing replay off for this model"
        )
    return routers


def _normalises(router: torch.nn.Module) -> bool:
    return ROUTERS[type(router).__name__](router)


@contextlib.contextmanager
def record_routing(model: Any) -> Iterator[list[list[torch.Tensor]]]:
    """Record every router call inside the block: ``calls[layer]`` lists the ``[N, k]`` expert ids of each forward
    (N = the flattened batch x positions of that forward), in call order."""
    routers = find_routers(model)
    calls: list[list[torch.Tensor]] = [[] for _ in routers]
    with _router_hooks(routers, lambda layer, output: calls[layer].append(output[2].detach().to("cpu", torch.int16))):
        yield calls


@contextlib.contextmanager
def record_router_logits(routers: Sequence[torch.nn.Module]) -> Iterator[list[torch.Tensor | None]]:
    """Inside the block, ``logits[layer]`` is the first output of that router's latest call, detached: ``[N, E]``
    (N = the flattened batch x positions of the forward), the tensor a model's ``output_router_logits`` returns
    (transformers 5's ``OutputRecorder(...TopKRouter, index=0)``). The hooks are gone when the block ends, so an
    activation-checkpointing recompute in the backward does not overwrite them."""
    logits: list[torch.Tensor | None] = [None] * len(routers)
    with _router_hooks(routers, lambda layer, output: logits.__setitem__(layer, output[0].detach())):
        yield logits


@contextlib.contextmanager
def _router_hooks(routers: Sequence[torch.nn.Module], on_output: Any) -> Iterator[None]:
    """Inside the block, ``on_output(layer, output)`` sees each call of ``routers[layer]``; the hooks go with it."""

    def hook(layer: int):
        return lambda module, args, output: on_output(layer, output)

    handles = [router.register_forward_hook(hook(layer)) for layer, router in enumerate(routers)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def recompute_router_logits(router: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """``[N, E]`` logits of a supported router for its input ``hidden`` (``[..., H]``), recomputed with its own weight
    as every supported ``TopKRouter.forward`` does (``F.linear(hidden.reshape(-1, H), weight)``: no bias, in the
    hidden's dtype); differentiable in the router's weight."""
    return F.linear(hidden.reshape(-1, router.hidden_dim), router.weight)  # [N, E]


def replayed_weights(
    router_logits: torch.Tensor, live_ids: torch.Tensor, replay_ids: torch.Tensor, normalise: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights [N, k] fp32, ids [N, k])``: the replayed ids (live ones where a row holds ``NOT_RECORDED``),
    weighted by the softmax of the router's *logits* (fp32) gathered at them (renormalised over the k when
    ``normalise``); differentiable in the logits. The caller casts to the dtype the live router's weights had."""
    recorded = (replay_ids >= 0).all(-1, keepdim=True)  # [N, 1]
    ids = torch.where(recorded, replay_ids.to(live_ids.device, live_ids.dtype), live_ids)  # [N, k]
    probs = torch.softmax(router_logits.float(), dim=-1)  # [N, E]
    weights = probs.gather(-1, ids)  # [N, k]
    if normalise:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, ids


@contextlib.contextmanager
def replay_routing(model: Any, replay: torch.Tensor) -> Iterator[None]:
    """Inside the block every forward routes by ``replay`` (``[L, N, k]``, N = batch x positions of the forward,
    row-major as the MoE blocks flatten them; ``-1`` rows route live). Re-entrant per forward (activation
    checkpointing's recompute replays the same ids).

    Each router's outputs become ``(first, weights, ids)``: ``first`` is the live router's own first output, unchanged
    (logits, or probabilities where a transformers release returned those), so ``output_router_logits`` and the
    load-balancing loss see the same tensor as without replay; ``weights`` come from logits recomputed from the
    router's input (:func:`recompute_router_logits`), never from ``first``, in the dtype of the live weights."""
    routers = find_routers(model)
    if replay.dim() != 3 or replay.shape[0] != len(routers) or replay.shape[2] != routers[0].top_k:
        raise ValueError(
            f"routing replay: expected expert ids [layers={len(routers)}, tokens, k="
            f"{routers[0].top_k}], got {tuple(replay.shape)}; was the routing recorded with this model?"
        )

    def hook(layer: int, normalise: bool):
        def replace(module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> Any:
            first, live_weights, live_ids = output
            hidden = args[0] if args else kwargs["hidden_states"]
            logits = recompute_router_logits(module, hidden)  # [N, E]
            if replay.shape[1] != logits.shape[0]:
                raise ValueError(
                    f"routing replay: the forward routes {logits.shape[0]} tokens but "
                    f"{replay.shape[1]} recorded rows were given"
                )
            weights, ids = replayed_weights(logits, live_ids, replay[layer].to(logits.device), normalise)
            return first, weights.to(live_weights.dtype), ids

        return replace

    handles = [
        router.register_forward_hook(hook(layer, _normalises(router)), with_kwargs=True)
        for layer, router in enumerate(routers)
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def encode_routing(ids: torch.Tensor | np.ndarray) -> dict[str, Any]:
    """``[T, L, k]`` expert ids (``-1``: not recorded) as a JSON-able record (:mod:`agentgspo.core.routing`): uint8
    (255 = not recorded) when every id fits, else int16; base64 of the little-endian bytes, with the shape."""
    array = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64)
    if array.ndim != 3:
        raise ValueError(f"routed experts: expected [tokens, layers, k], got shape {array.shape}")
    if array.size and array.min() < NOT_RECORDED:
        raise ValueError(f"routed experts: expert ids are >= 0, or {NOT_RECORDED} for not recorded; got {array.min()}")
    if array.size and array.max() < UINT8_NOT_RECORDED:
        dtype, stored = "uint8", np.where(array == NOT_RECORDED, UINT8_NOT_RECORDED, array)
    else:
        dtype, stored = "int16", array
    data = stored.astype(STORAGE[dtype][0]).tobytes()
    return {"shape": list(array.shape), "dtype": dtype, "data": base64.b64encode(data).decode("ascii")}


def decode_routing(record: dict[str, Any]) -> torch.Tensor:
    """:func:`encode_routing`'s record back to ``[T, L, k]`` int64 ids (``-1``: not recorded)."""
    if record.get("dtype") not in STORAGE:
        raise ValueError(f"routed experts: unknown dtype {record.get('dtype')!r}; expected one of {sorted(STORAGE)}")
    stored = np.frombuffer(base64.b64decode(record["data"]), dtype=STORAGE[record["dtype"]][0])
    array = stored.astype(np.int64).reshape(record["shape"])
    if record["dtype"] == "uint8":
        array = np.where(array == UINT8_NOT_RECORDED, NOT_RECORDED, array)
    return torch.from_numpy(array)


def merge_routing(previous: dict[str, Any] | None, new: torch.Tensor) -> dict[str, Any]:
    """A trajectory's routing after one more sampled turn: ``new`` (``[T', L, k]`` for the turn's prompt and
    sampled ids) keeps the rows recorded by earlier turns (what the sampler used when it first fed those ids)."""
    if previous is not None:
        old = decode_routing(previous)
        if old.shape[1:] != new.shape[1:]:
            raise ValueError(f"routed experts: turn shapes differ ({tuple(old.shape)} then {tuple(new.shape)})")
        head = min(old.shape[0], new.shape[0])
        new = new.clone()
        new[:head] = torch.where(old[:head] >= 0, old[:head], new[:head])
    return encode_routing(new)


def batch_replay(routings: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """Per-trajectory ``[T_i, L, k]`` ids -> the ``[L, B * width, k]`` replay of their right-padded batch (padding
    routes live)."""
    layers, k = routings[0].shape[1:]
    out = torch.full((len(routings), width, layers, k), NOT_RECORDED, dtype=torch.long)
    for row, ids in enumerate(routings):
        out[row, : ids.shape[0]] = ids
    return out.permute(2, 0, 1, 3).reshape(layers, len(routings) * width, k)


def split_recorded(calls: list[list[torch.Tensor]], lengths: Sequence[int], width: int) -> list[torch.Tensor]:
    """The single forward recorded by :func:`record_routing` over a right-padded batch -> each row's
    ``[T_i, L, k]`` ids."""
    per_layer = torch.stack([layer[-1] for layer in calls]).long()  # [L, B * width, k]
    per_layer = per_layer.view(per_layer.shape[0], len(lengths), width, -1).permute(1, 2, 0, 3)  # [B, W, L, k]
    return [per_layer[row, :n].clone() for row, n in enumerate(lengths)]


def sampled_routing(
    calls: list[list[torch.Tensor]],
    prompts: Sequence[Sequence[int]],
    turns: Sequence[Any],
    fed: Sequence[Sequence[int]],
) -> list[torch.Tensor]:
    """Each row's ``[len(prompt) + len(sampled), L, k]`` ids from a KV-cached sampling loop recorded by
    :func:`record_routing`: call 0 is the left-padded prefill (``[B * width, k]`` per layer), call ``1 + j`` fed the
    j-th sampled id of the rows ``fed[j]`` (``[len(fed[j]), k]``). A sampled id never fed (the last) stays -1."""
    layers, width = len(calls), max(len(p) for p in prompts)
    k = calls[0][0].shape[-1]
    prefill = torch.stack([layer[0] for layer in calls]).long().view(layers, len(prompts), width, k)  # [L, B, W, k]
    out = []
    for row, (prompt, turn) in enumerate(zip(prompts, turns)):
        ids = torch.full((len(prompt) + len(turn.token_ids), layers, k), NOT_RECORDED, dtype=torch.long)
        ids[: len(prompt)] = prefill[:, row, width - len(prompt) :].permute(1, 0, 2)
        out.append(ids)
    for j, rows in enumerate(fed):
        step = torch.stack([layer[1 + j] for layer in calls]).long()  # [L, b, k]
        for position, row in enumerate(rows):
            out[row][len(prompts[row]) + j] = step[:, position]
    return out
