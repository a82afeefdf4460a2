"""Weight transfer without the disk: the learner's weights streamed into vLLM's workers through vLLM's own
weight-transfer engines (``vllm/distributed/weight_transfer``), over gloo on CPU.

vLLM 0.32 updates weights in place through four worker calls (``init_weight_transfer_engine`` once, then per
update ``start_weight_update``, ``update_weights``, ``finish_weight_update``), reached on a server through the
routes of the same names and in process through ``LLMEngine.collective_rpc``. What moves the bytes is a registered
*engine* (``WeightTransferConfig.backend``): vLLM ships ``nccl`` and CUDA ``ipc``, which need GPUs. This module
registers one more, ``gloo``: the trainer and every worker of the samplers join one gloo process group (a TCP
rendezvous the trainer opens; ranks: trainer 0, then each member's workers in turn) and each parameter is broadcast
from rank 0. Registration goes through vLLM's registries (``WeightTransferEngineFactory`` in the workers,
``WeightTransferTrainerFactory`` here), loaded in every vLLM process as a general plugin (the
``vllm.general_plugins`` entry point in pyproject.toml), so a stock ``vllm serve --weight-transfer-config
'{"backend": "gloo"}'`` accepts it too.

The trainer sends the *checkpoint* format vLLM's ``load_weights`` reads (:class:`CheckpointSource`: transformers
fuses MoE experts into 3-D tensors in memory and splits them back on save; the same reversal runs here, a layer at
a time). The workers load them with vLLM's layerwise reload (as its NCCL engine does), then redo the CPU post-load
steps a reload skips (:func:`~agentgspo.policy.weight_sync.repack_cpu_layers`), so the engine's log-probs equal
the learner's after an update (tests/policy/test_weight_transfer.py).

Per update, as peers found it must go (TRL issues 6797-7104, ../shared/ASYNC.md): the workers' ``update_weights``
call runs on a thread while this thread broadcasts (both block in the same collectives), under a timeout; a failure
never waits on the blocked thread. Under FSDP2 the training loop gathers the full weights on every rank before any
rank sends (``refresh_sampler``); each rank then sends to its own samplers. Not measured here: NCCL (no GPU with
vLLM on this machine); the same clients drive vLLM's ``nccl`` engine by name, untested.
"""

from __future__ import annotations

import datetime
import logging
import math
import threading
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from vllm.distributed.weight_transfer.base import (
    ParamMeta,
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    WeightSource,
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
    layerwise_groups,
)

from agentgspo.core.errors import AgentGSPOError
from agentgspo.policy.weight_sync import repack_cpu_layers, unwrap

__all__ = [
    "WeightTransferError",
    "GlooInitInfo",
    "GlooTrainerInitInfo",
    "GlooUpdateInfo",
    "buckets",
    "open_group",
    "broadcast",
    "in_daemon_thread",
    "dtype_name",
    "dtype_of",
    "failed_members",
    "GlooWeightTransferEngine",
    "CheckpointSource",
    "GlooTrainerWeightTransferEngine",
    "EngineClient",
    "ServersClient",
    "connect",
    "register",
    "reachable_address",
]

logger = logging.getLogger(__name__)

BACKEND = "gloo"  # the name vLLM's registries know this engine by
STORE_PREFIX = "agentgspo-weights"
#: Parameters travel packed into broadcasts of up to this many bytes: one round trip per bucket, not per tensor
#: (measured on the tiny model through a server on 2 busy cores: 0.7-0.9 s per update one tensor at a time).
BUCKET_BYTES = 256 * 2**20


class WeightTransferError(RuntimeError, AgentGSPOError):
    """A weight transfer failed; ``failed`` maps each member that reported an error to it (empty when only the
    collective itself broke)."""

    def __init__(self, message: str, failed: dict[str, str] | None = None):
        super().__init__(message)
        self.failed = failed or {}


def failed_members(error: BaseException) -> dict[str, str]:
    """The members ``error`` names as failed, each with its error: a :class:`WeightTransferError`'s ``failed``
    (a copy); none for any other error."""
    return dict(error.failed) if isinstance(error, WeightTransferError) else {}


# -- what travels at the handshake and per update ------------------------------------------------------------------
@dataclass
class GlooInitInfo(WeightTransferInitInfo):
    """What a worker needs to join the trainer's gloo group: the trainer's TCP rendezvous, the rank of this
    member's first worker (its others follow) and the group's size."""

    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    timeout_s: float = 600.0


@dataclass
class GlooTrainerInitInfo(TrainerInitInfo):
    """The trainer's side of the handshake (``rank`` is the training rank: each rank sends to its own samplers, so
    every rank is a sender)."""

    backend: ClassVar[str] = BACKEND
    master_address: str
    world_size: int
    master_port: int = 0  # 0: a free port, chosen when the rendezvous opens
    timeout_s: float = 600.0

    @property
    def is_sender(self) -> bool:
        """Always: every training rank sends its own (gathered) weights to its own samplers."""
        return True


@dataclass
class GlooUpdateInfo(WeightTransferUpdateInfo):
    """Per update: the parameters that follow, in broadcast order (checkpoint names, dtypes, full shapes)."""

    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]
    bucket_bytes: int = BUCKET_BYTES

    def __post_init__(self) -> None:
        if not len(self.names) == len(self.dtype_names) == len(self.shapes):
            raise ValueError(
                f"gloo update info: names, dtype_names and shapes must have one entry per parameter, got "
                f"{len(self.names)}, {len(self.dtype_names)} and {len(self.shapes)}"
            )
        for name in self.dtype_names:
            dtype_of(name)  # a ValueError naming a name that is not a dtype's

    def buckets(self) -> list[range]:
        """The parameters of each broadcast (both ends cut the same buckets from this info)."""
        sizes = [math.prod(shape) * dtype_of(name).itemsize for name, shape in zip(self.dtype_names, self.shapes)]
        return buckets(sizes, self.bucket_bytes)


def buckets(sizes: Sequence[int], limit: int) -> list[range]:
    """Consecutive items packed greedily into groups of at most ``limit`` bytes (an item larger alone)."""
    groups, start, total = [], 0, 0
    for i, size in enumerate(sizes):
        if i > start and total + size > limit:
            groups.append(range(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        groups.append(range(start, len(sizes)))
    return groups


def open_group(address: str, port: int, rank: int, world_size: int, timeout_s: float, store: Any = None) -> Any:
    """Join (rank 0: host) a gloo process group of ``world_size`` through the TCP store at ``address:port``.

    The group is private to the transfer (not torch.distributed's default group, which the learner's DDP/FSDP
    uses), so parameters are broadcast with the group object's own ``broadcast``. Blocks until every rank joined.
    """
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    if store is None:
        store = dist.TCPStore(address, port, world_size, is_master=rank == 0, timeout=timeout)
    return dist.ProcessGroupGloo(dist.PrefixStore(STORE_PREFIX, store), rank, world_size, timeout)


def broadcast(group: Any, tensor: torch.Tensor) -> None:
    """Broadcast ``tensor`` in place from rank 0 of ``group`` (a contiguous CPU tensor)."""
    import torch.distributed as dist

    options = dist.BroadcastOptions()
    options.rootRank = 0
    group.broadcast([tensor], options).wait()


def in_daemon_thread(fn: Any, *args: Any) -> Future:
    """Run ``fn(*args)`` on a daemon thread; its future. A call blocked in a collective whose peer died is left
    to its timeout: nobody waits on it, and it does not hold the interpreter open at exit."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 -- handed to whoever waits
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name="agentgspo-weight-transfer").start()
    return future


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (how vLLM's update infos name dtypes)."""
    return str(dtype).removeprefix("torch.")


def dtype_of(name: str) -> torch.dtype:
    """``"float32"`` -> ``torch.float32``, the inverse of :func:`dtype_name`; a ValueError for a name that is not a
    torch dtype's."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"gloo update info: {name!r} is not a torch dtype name (e.g. 'bfloat16')")
    return dtype


# -- the worker's end, inside vLLM ---------------------------------------------------------------------------------
class GlooWeightTransferEngine(WeightTransferEngine[GlooInitInfo, GlooUpdateInfo]):
    """Receives the trainer's broadcast in a vLLM worker and loads it with vLLM's layerwise reload."""

    init_info_cls = GlooInitInfo
    update_info_cls = GlooUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.group: Any = None

    def init_transfer_engine(self, init_info: GlooInitInfo) -> None:
        """Join the trainer's group as ``rank_offset`` + this worker's index within its member."""
        parallel = self.parallel_config
        rank = init_info.rank_offset + parallel.data_parallel_index * parallel.world_size + parallel.rank
        self.shutdown()
        self.group = open_group(
            init_info.master_address, init_info.master_port, rank, init_info.world_size, init_info.timeout_s
        )

    def start_weight_update(self) -> None:
        """Prepare the layerwise reload of checkpoint-format weights."""
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def receive_weights(self, update_info: GlooUpdateInfo) -> None:
        """Receive each bucket and hand its parameters (views into it) to the model's ``load_weights``."""
        if self.group is None:
            raise RuntimeError("gloo weight transfer: update_weights before init_weight_transfer_engine")
        info = update_info
        for bucket in info.buckets():
            dtypes = [dtype_of(info.dtype_names[i]) for i in bucket]
            sizes = [math.prod(info.shapes[i]) * dtype.itemsize for i, dtype in zip(bucket, dtypes)]
            packed = torch.empty(sum(sizes), dtype=torch.uint8)
            broadcast(self.group, packed)
            parts = packed.split(sizes)
            self.model.load_weights(
                [
                    (info.names[i], part.view(dtype).reshape(info.shapes[i]))
                    for i, part, dtype in zip(bucket, parts, dtypes)
                ]
            )

    def finish_weight_update(self) -> None:
        """Finish the layerwise reload, then redo the CPU post-load steps it skips."""
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)
        repack_cpu_layers(self.model)

    def shutdown(self) -> None:
        """Leave the group (a later ``init_weight_transfer_engine`` joins a new one)."""
        self.group = None


# -- the trainer's end ---------------------------------------------------------------------------------------------
class CheckpointSource(WeightSource):
    """A model's parameters under their checkpoint names and layouts, what ``save_pretrained`` would write and
    vLLM's ``load_weights`` reads, one decoder layer at a time (transformers' own ``revert_weight_conversion``
    undoes its load-time conversions, e.g. Qwen3-MoE's fused ``experts.gate_up_proj`` -> per-expert
    ``gate_proj``/``up_proj``). Tied parameters appear once (``named_parameters`` drops the copies), as in a
    saved checkpoint. The model must be whole on this rank (FSDP2: gathered first)."""

    def __init__(self, model: Any):
        self.model = unwrap(model)
        self._groups = layerwise_groups([name for name, _ in self.model.named_parameters()])
        self._meta: list[ParamMeta] | None = None

    def _converted(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        from transformers.core_model_loading import revert_weight_conversion

        return revert_weight_conversion(self.model, tensors)

    def metadata(self) -> list[ParamMeta]:
        """Names, dtypes and shapes of what iteration yields (the conversion run on meta tensors: no copy)."""
        if self._meta is None:
            params = dict(self.model.named_parameters())
            self._meta = [
                ParamMeta(name, tensor.dtype, tuple(tensor.shape))
                for group in self._groups
                for name, tensor in self._converted({n: params[n].detach().to("meta") for n in group}).items()
            ]
        return self._meta

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        params = dict(self.model.named_parameters())
        for group in self._groups:
            with torch.no_grad():
                for name, tensor in self._converted({n: params[n].detach() for n in group}).items():
                    yield name, tensor.contiguous()


class GlooTrainerWeightTransferEngine(TrainerWeightTransferEngine[GlooTrainerInitInfo]):
    """The trainer's end: opens the rendezvous, then per update drives ``client`` through start, update (on a
    thread) and finish while broadcasting ``source``'s tensors."""

    init_info_cls = GlooTrainerInitInfo

    def __init__(self, *, client: Any, source: WeightSource | None = None, timeout_s: float = 600.0):
        super().__init__(client=client, source=source, is_sender=True)
        self.timeout_s = timeout_s
        self.group: Any = None
        self.bucket_bytes = BUCKET_BYTES  # the largest broadcast (the members read it from each update's info)

    @classmethod
    def trainer_init(
        cls, init_info: GlooTrainerInitInfo, *, client: Any, source: WeightSource | None = None
    ) -> GlooTrainerWeightTransferEngine:
        """Open the rendezvous and join as rank 0 (on a thread) while the members are asked to join (their call
        returns once all joined); a member's refusal is raised at once, not after the rendezvous times out."""
        import torch.distributed as dist

        engine = cls(client=client, source=source, timeout_s=init_info.timeout_s)
        store = dist.TCPStore(
            init_info.master_address,
            init_info.master_port,
            init_info.world_size,
            is_master=True,
            timeout=datetime.timedelta(seconds=init_info.timeout_s),
            wait_for_workers=False,
        )
        worker_info = GlooInitInfo(
            master_address=init_info.master_address,
            master_port=store.port,
            rank_offset=1,
            world_size=init_info.world_size,
            timeout_s=init_info.timeout_s,
        )
        group = in_daemon_thread(
            open_group, init_info.master_address, store.port, 0, init_info.world_size, init_info.timeout_s, store
        )
        client.init_weight_transfer_engine(asdict(worker_info))
        engine.group = group.result(timeout=init_info.timeout_s)
        return engine

    def send_weights(self) -> None:
        """One update: ``start_weight_update``; ``update_weights`` on a thread while every parameter is broadcast;
        ``finish_weight_update``. Raises :class:`WeightTransferError` (the group is then unusable: connect again)."""
        if self.source is None:
            raise ValueError("gloo weight transfer: no WeightSource to send")
        if self.group is None:
            raise WeightTransferError(
                "gloo weight transfer: this group failed an earlier update and is closed; connect a new one "
                "(weight_transfer.connect)",
                {},
            )
        meta = self.source.metadata()
        info = GlooUpdateInfo(
            names=[m.name for m in meta],
            dtype_names=[dtype_name(m.dtype) for m in meta],
            shapes=[list(m.shape) for m in meta],
            bucket_bytes=self.bucket_bytes,
        )
        received: Future | None = None
        try:
            self.client.start_weight_update()
            received = in_daemon_thread(self.client.update_weights, asdict(info))
            stream = iter(self.source)
            for bucket in info.buckets():
                tensors = []
                for i in bucket:
                    name, tensor = next(stream)
                    expected = meta[i]
                    if (name, tensor.dtype, tuple(tensor.shape)) != (expected.name, expected.dtype, expected.shape):
                        raise ValueError(f"weight source yielded {name!r} where its metadata declared {expected}")
                    tensors.append(tensor.reshape(-1).view(torch.uint8))
                if received.done():
                    received.result()  # a member refused the update: do not broadcast into nothing
                broadcast(self.group, torch.cat(tensors).cpu())  # gloo sends host memory (a GPU learner's too)
            received.result(timeout=self.timeout_s)
            self.client.finish_weight_update()
        except Exception as exc:
            # The group is unusable now. Closing this end breaks the members' pending receives at once (instead
            # of at their timeout); then their update calls return, saying which of them failed. Gloo closes its
            # sockets only when the group is freed (abort() and shutdown() leave a member's receive waiting), and
            # the failed broadcast's frame, kept by this traceback, still holds the group: clear it first.
            self.group = None
            traceback.clear_frames(exc.__traceback__)
            failed = failed_members(exc)
            if received is not None and received is not exc:
                try:
                    received.result(timeout=self.timeout_s)
                except FutureTimeout:
                    pass
                except Exception as member_error:  # noqa: BLE001 -- reported below
                    failed = failed or failed_members(member_error)
            if isinstance(exc, FutureTimeout):
                exc = TimeoutError(f"update_weights did not return within {self.timeout_s:g} s after the broadcast")
            raise WeightTransferError(f"weight transfer failed: {exc}", failed) from exc

    def shutdown(self) -> None:
        """Leave the group."""
        self.group = None


# -- clients: how the trainer reaches the members ------------------------------------------------------------------
class EngineClient:
    """An in-process ``vllm.LLMEngine`` as a member (its workers reached through ``collective_rpc``)."""

    def __init__(self, engine: Any, timeout_s: float = 600.0):
        self.engine = engine
        self.timeout_s = timeout_s

    @property
    def world_size(self) -> int:
        """How many workers receive (one rank each)."""
        return int(self.engine.vllm_config.parallel_config.world_size_across_dp)

    def _call(self, method: str, **kwargs: Any) -> None:
        self.engine.collective_rpc(method, timeout=self.timeout_s, kwargs=kwargs or None)

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        """The workers join the group ``init_info`` describes (returns once every rank joined)."""
        self._call("init_weight_transfer_engine", init_info=init_info)

    def start_weight_update(self) -> None:
        """The workers prepare a layerwise reload."""
        self._call("start_weight_update")

    def update_weights(self, update_info: dict[str, Any]) -> None:
        """The workers receive the broadcast ``update_info`` announces (returns once all of it is loaded)."""
        self._call("update_weights", update_info=update_info)

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        """The workers finish the reload (the caller labels the version: the engine's driver owns it)."""
        self._call("finish_weight_update")


class ServersClient:
    """vLLM servers as members, through their weight-transfer routes: every call goes to all of them at once (the
    members of one group block together), each server's workers get their own block of ranks, and a failure
    names the servers that failed (:class:`WeightTransferError`)."""

    def __init__(self, urls: Sequence[str], timeout_s: float = 600.0):
        import httpx

        self.urls = list(urls)
        self.timeout_s = timeout_s
        self._http = httpx.Client(timeout=timeout_s)
        self.world_sizes = [self._get(url, "/get_world_size")["world_size"] for url in self.urls]

    @property
    def world_size(self) -> int:
        """Workers over all servers."""
        return sum(self.world_sizes)

    def _get(self, url: str, path: str) -> Any:
        reply = self._http.get(url + path)
        if reply.status_code != 200:
            raise WeightTransferError(
                f"{url}{path}: HTTP {reply.status_code} (vLLM's RL routes need VLLM_SERVER_DEV_MODE=1: "
                "start it with `agentgspo serve-policy`)",
                {url: f"HTTP {reply.status_code}"},
            )
        return reply.json()

    def _post_all(self, path: str, bodies: Sequence[dict[str, Any] | None]) -> None:
        import httpx

        def post(url: str, body: dict[str, Any] | None) -> str | None:
            try:
                reply = self._http.post(url + path, json=body)
            except httpx.HTTPError as exc:
                return f"{type(exc).__name__}: {exc}"
            return None if reply.status_code == 200 else f"HTTP {reply.status_code}: {reply.text[:300]}"

        with ThreadPoolExecutor(max_workers=len(self.urls)) as pool:
            errors = dict(zip(self.urls, pool.map(post, self.urls, bodies)))
        failed = {url: error for url, error in errors.items() if error is not None}
        if failed:
            raise WeightTransferError(
                f"{path} failed on {len(failed)} of {len(self.urls)} servers: "
                + "; ".join(f"{url}: {error}" for url, error in failed.items()),
                failed,
            )

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        """Every server's workers join the group, each server at its own rank offset."""
        offsets = [init_info["rank_offset"] + sum(self.world_sizes[:i]) for i in range(len(self.urls))]
        self._post_all(
            "/init_weight_transfer_engine", [{"init_info": {**init_info, "rank_offset": o}} for o in offsets]
        )

    def start_weight_update(self) -> None:
        """Every server prepares a layerwise reload."""
        self._post_all("/start_weight_update", [None] * len(self.urls))

    def update_weights(self, update_info: dict[str, Any]) -> None:
        """Every server receives the broadcast (the calls return once all of it is loaded)."""
        self._post_all("/update_weights", [{"update_info": update_info}] * len(self.urls))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        """Every server finishes the reload (and labels ``weight_version`` when given)."""
        body = None if weight_version is None else {"weight_version": weight_version}
        self._post_all("/finish_weight_update", [body] * len(self.urls))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()


def connect(client: Any, address: str, timeout_s: float = 600.0) -> GlooTrainerWeightTransferEngine:
    """A ready trainer end for the members behind ``client`` (``EngineClient`` or ``ServersClient``): the group
    opened at ``address`` (an address of this machine the members can reach) through vLLM's trainer registry."""
    from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory

    register()
    init_info = GlooTrainerInitInfo(
        rank=0, master_address=address, world_size=1 + client.world_size, timeout_s=timeout_s
    )
    return WeightTransferTrainerFactory.trainer_init(init_info, client=client)


def register() -> None:
    """Register the ``gloo`` engine with vLLM's worker and trainer registries (idempotent). vLLM calls it in every
    process as a general plugin (pyproject.toml's ``vllm.general_plugins`` entry point)."""
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

    for registry, engine in (
        (WeightTransferEngineFactory, GlooWeightTransferEngine),
        (WeightTransferTrainerFactory, GlooTrainerWeightTransferEngine),
    ):
        try:
            registry.register_engine(BACKEND, engine)
        except ValueError:  # registered already (this process loaded the plugin before)
            pass


def reachable_address(url: str) -> str:
    """This machine's address as ``url``'s server sees it (the local end of a connection to it): where members
    reach the trainer's rendezvous."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port or 80), timeout=10) as connection:
        return connection.getsockname()[0]
