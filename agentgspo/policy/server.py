"""Sampling through vLLM OpenAI-compatible servers over HTTP (``agentgspo serve-policy``), token ids in and out.

Each turn is one ``POST /v1/completions`` whose ``prompt`` is the token ids; the reply carries the sampled ids
(``return_token_ids``) and each one's log-prob, so nothing is detokenized or retokenized on this side. Requests
carry the turn's seed, the stop ids, ``ignore_eos`` (our stop ids, not the server's eos, end a turn) and every
sampling field, ``top_k`` included (0: off, as in vLLM; an absent field would take the model's
generation_config default, e.g. Qwen3's top_k 20). ``agentgspo serve-policy`` servers run with ``--logprobs-mode
processed_logprobs``: the log-probs mean what the in-process engine's mean (``logprob_semantics = "truncated"``, see
agentgspo/policy/vllm.py).

A prompt the server refuses as longer than its model's context (HTTP 400, "This model's maximum context length is
...", :func:`~agentgspo.policy.base.is_context_overflow`) is a ``finish_reason="context"`` turn with no ids: the
rollout ends the episode as ``context_overflow``, as it does for a policy that runs out of context.

Several servers: each turn goes to the healthy server with the fewest requests in flight (at most
``max_concurrency`` per server). A connection failure, a timeout or an HTTP 5xx/429 marks that server down for a
backoff that doubles with each consecutive failure, and the turn is sent again to another server (or the same one
once its backoff ends), up to ``max_attempts`` sends. A retried turn was never returned, so nothing finished is
lost or counted twice: each :meth:`ServerPolicy.sample` returns exactly one reply, the first complete one. A turn
re-sent with the same seed to a server with the same weights samples the same ids, so failures do not bias which
turns make it into a batch. Other HTTP 4xx replies are errors in the request: raised at once (ValueError naming
the server), not retried; after ``max_attempts`` failed sends :class:`ServerUnavailable` names each server's last
error. The rollout records either as ``sampler_error``.

Weight updates (:meth:`ServerPolicy.update_weights`) may come while turns are in flight (asynchronous training).
Streamed (the default with ``agentgspo serve-policy`` servers): every server is paused in keep mode (``POST
/pause?mode=keep``: running requests frozen in the engine), the weights are broadcast from the learner's memory to
all of them at once (vLLM's ``/start_weight_update``, ``/update_weights``, ``/finish_weight_update`` with the gloo
engine of :mod:`agentgspo.policy.weight_transfer`), then each resets its prefix cache and resumes. Through a folder
(servers without the engine; the choice is logged): the weights are written to a folder the servers read while
they keep sampling; then each server in turn is paused in keep mode, reloads the weights in place
(``POST /collective_rpc``, ``agentgspo_reload_weights``), resets its prefix cache with
``reset_running_requests=true`` (the frozen requests give their KV blocks back and are re-prefilled by the new
weights on resume, so no later turn reuses KV of the old weights) and resumes (``POST /resume``). No request is
aborted, re-sent or resampled: the reply of a frozen turn arrives after the resume, sampled by both versions.

Versions: each server has its own; a turn records the version of its server when it was sent
(``policy_version``) and, if that moved before the reply came, the version at the reply (``policy_version_end``).
A completions reply does not say where inside the turn the weights changed, so the span is what is known: it is
exact for turns that did not straddle the update (a reply received before the resume has the old version only) and
may be one version too wide for a reply the server produced just before its pause but delivered after it, or for
a turn sent during the pause (both sampled by one version). ``version_boundaries`` stays None.

A fleet (``agentgspo fleet up``): ``urls`` may be ``["fleet:MANIFEST"]``, the manifest its supervisor keeps current
(:mod:`agentgspo.core.fleet_manifest`). The servers are then its sampler replicas, read again whenever the manifest
changes (checked at most once a second, and before every weight update): a replica taken out (``unhealthy``,
``failed``) gets no new turn, its turns in flight fail over as above; one that comes back (a new incarnation:
``restarts`` moved) or holds older weights (``needs_weights``) gets no turn until the next update has sent it the
current weights, after which the update is acknowledged in the fleet's weights file (so the supervisor marks it
``healthy``). With no replica serving, a turn waits for one (up to ``timeout_s``) instead of failing.

Versions are numbers within a learner run: each client has a ``run_id`` (a new random one per client, so per
learner process; not kept in checkpoints). A learner resumed after a kill is a new run: after its checkpoint the
killed run trained steps the resumed one trains again on other rollouts, so the killed run's version 5 and the
resumed run's version 5 are different weights, and the weights the resumed run starts from reach every replica at its
first update anyway. The fleet's weights file acknowledges (run, version); once this client has sent weights
(version >= 1), a replica enters admitted only when it holds this run's weights at its version or later: one
holding a killed run's weights waits, whatever their number, for this run's next update. A client that has sent
none (version 0: a learner before its first update, an evaluation client) has no weights of its own to insist on
and takes each serving replica as it is. Each server is also
labelled ``RUN_ID:VERSION`` through vLLM's ``POST /update_weight_version`` before its resume (``GET /weight_info``
reports it; a server without the route, or failing it, keeps its label, with a warning for a failure).

A server that fails during its update (it dies while paused, say) is retired: no turn is sent to it again, and the turns
it held fail with :class:`ServerUnavailable` naming it instead of being re-sent (a turn frozen half-sampled is never
resampled elsewhere; the rollout records the episode as ``sampler_error``); a reply it sends after all (it is resumed
if it still answers, and its weights may be partly loaded) fails the same way. The update goes on with the other
servers and then raises :class:`WeightUpdateFailed`, naming the servers that took it and those retired. (Streamed, a
dead member breaks the broadcast for all: it is sent again once, in a new group without the members the error names
or, when it names them all, without those no longer answering ``/health``; a server counts as updated only once a
transfer it was part of completed, so when the second fails too, every member is retired, none is labelled with a
version it may hold only part of.) A server without the ``/pause`` route (vLLM before
it, or without ``VLLM_SERVER_DEV_MODE=1``) is updated the old way, unpaused, with a logged warning, when this client has
no turn in flight on it, and refused with an error saying so when it has.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agentgspo.core.errors import AgentGSPOError
from agentgspo.core.fleet_manifest import acknowledge_weights, read_manifest
from agentgspo.core.sampling import SampledTurn, SampleRequest, SamplingParams, WeightUpdateFailed
from agentgspo.core.trajectory import LOGPROB_SEMANTICS
from agentgspo.policy.base import LoopOwner, is_context_overflow
from agentgspo.policy.loading import load_renderer_and_stops, resolve_checkpoint
from agentgspo.policy.weight_sync import WEIGHT_TRANSFERS, save_weights

__all__ = ["ServerUnavailable", "WeightUpdateFailed", "ServerPolicy"]

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
logger = logging.getLogger(__name__)


class ServerUnavailable(RuntimeError, AgentGSPOError):
    """No server answered a turn within the allowed attempts, or the server holding it failed during a weight
    update."""


@dataclass
class _Server:
    url: str
    in_flight: int = 0
    failures: int = 0  # consecutive
    down_until: float = 0.0
    served: int = 0  # turns completed (load-balancing evidence for tests and logs)
    version: int = 0  # the policy version its weights are (bumped just before its resume)
    paused: bool = False  # between its /pause and the end of its /resume
    pauses: int = 0  # pauses started: a turn sent before one and failing after it was held by it
    retired: str | None = None  # why no turn goes to it any more (it failed a weight update, it left the fleet)
    failed_update: int | None = None  # the version whose update it failed (retired then: its replies are not used)
    part: str | None = None  # a fleet replica: its part id in the manifest
    incarnation: int = 0  # a fleet replica: the manifest's ``restarts`` when this entry was made
    admitted: bool = True  # takes turns; a fleet replica only once it holds the current weights


def _member(server: _Server) -> tuple[str, str | None, int]:
    """Who is in a weight-transfer group: a server's URL and, for a fleet replica, its part and incarnation (a
    replica restarted on the same address is a new process that never joined the old group)."""
    return server.url, server.part, server.incarnation


class ServerPolicy:
    """vLLM OpenAI-compatible servers as a :class:`~agentgspo.policy.base.PolicyBackend`.

    Args:
        urls: base URLs of the servers (``http://host:port``; a trailing ``/v1`` is accepted).
        renderer: the chat renderer of the policy's tokenizer.
        stop_ids: ids that end a turn (the renderer's end-of-turn id is always one).
        model: the served model name (``agentgspo serve-policy`` serves ``"policy"``).
        max_concurrency: most requests in flight to each server.
        timeout_s: seconds one request may take before it is abandoned and retried.
        max_attempts: most sends of one turn (over all servers) before :class:`ServerUnavailable`.
        backoff_s: first backoff of a failed server; doubles per consecutive failure up to ``max_backoff_s``.
        seed: seed of requests that carry none.
        logprob_semantics: what the servers' log-probs are (:data:`~agentgspo.core.trajectory.LOGPROB_SEMANTICS`):
            ``"truncated"`` for ``agentgspo serve-policy`` servers (``processed_logprobs``); ``"raw"`` for a vLLM
            server started with its default ``--logprobs-mode raw_logprobs``.
        weight_transfer: how updates reach the servers (:data:`~agentgspo.policy.weight_sync.WEIGHT_TRANSFERS`):
            ``"auto"`` streams them when the servers accept the gloo engine (``agentgspo serve-policy`` servers
            do) and uses folders otherwise; ``"gloo"`` streams or fails; ``"folder"`` always uses folders.
        transfer_timeout_s: seconds one streamed tensor may take before the transfer counts as failed.
        run_id: this learner run's id in version labels and the fleet's weights file (module docstring); default a
            new random one. Letters, digits, ``_`` and ``-``.
    """

    def __init__(
        self,
        urls: Sequence[str],
        renderer: Any,
        *,
        stop_ids: Sequence[int] = (),
        model: str = "policy",
        max_concurrency: int = 256,
        timeout_s: float = 600.0,
        max_attempts: int = 8,
        backoff_s: float = 0.25,
        max_backoff_s: float = 10.0,
        seed: int = 0,
        logprob_semantics: str = "truncated",
        weight_transfer: str = "auto",
        transfer_timeout_s: float = 120.0,
        run_id: str | None = None,
    ):
        if not urls:
            raise ValueError("urls: expected at least one server URL, e.g. http://127.0.0.1:8000")
        fleets = [str(url) for url in urls if str(url).startswith("fleet:")]
        if fleets and len(urls) > 1:
            raise ValueError(f"server URLs {list(urls)}: a fleet (fleet:MANIFEST) is the only entry when given")
        for url in urls:
            if not str(url).startswith(("http://", "https://", "fleet:")):
                raise ValueError(
                    f"server URL {url!r}: expected http://host:port, https://host:port or fleet:MANIFEST "
                    "(the manifest of `agentgspo fleet up`)"
                )
        for name, value in (("max_concurrency", max_concurrency), ("max_attempts", max_attempts)):
            if value < 1:
                raise ValueError(f"{name}: expected >= 1, got {value}")
        if timeout_s <= 0 or backoff_s < 0:
            raise ValueError(f"timeout_s must be > 0 and backoff_s >= 0, got {timeout_s} and {backoff_s}")
        if weight_transfer not in WEIGHT_TRANSFERS:
            raise ValueError(f"weight_transfer: expected one of {WEIGHT_TRANSFERS}, got {weight_transfer!r}")
        if logprob_semantics not in LOGPROB_SEMANTICS:
            raise ValueError(f"logprob_semantics: expected one of {LOGPROB_SEMANTICS}, got {logprob_semantics!r}")
        if run_id is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(run_id)):
            raise ValueError(
                f"run_id {run_id!r}: expected 1-64 letters, digits, '_' or '-' (it labels weight versions as "
                "RUN_ID:VERSION), or None for a new random one"
            )
        self.run_id = str(run_id) if run_id is not None else uuid.uuid4().hex[:12]
        self.logprob_semantics = logprob_semantics
        self.fleet_manifest = Path(fleets[0].removeprefix("fleet:")) if fleets else None
        self.servers: list[_Server] = (
            [] if fleets else [_Server(str(url).rstrip("/").removesuffix("/v1")) for url in urls]
        )
        self._fleet_lock = threading.Lock()  # the learner's thread and the sampling loop both sync the fleet
        self._fleet_generation: int | None = None
        self._fleet_checked = 0.0
        self.renderer = renderer
        self.end_of_turn_id = renderer.end_of_turn_id
        self.stop_ids = frozenset({self.end_of_turn_id, *stop_ids})
        self.model = model
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.seed = seed
        self.version = 0
        self.retries = 0  # sends after the first, over all turns
        self.weight_transfer = weight_transfer
        self.transfer_timeout_s = transfer_timeout_s
        self._streaming: bool | None = None  # "auto": decided at the first update
        self._transfer: Any = None  # the trainer's end of the gloo group with the servers in _members
        self._members: list[tuple] = []  # (url, part, incarnation): a restarted replica may come back on a used port
        self._calls = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._slots: asyncio.Condition | None = None
        self._owner = LoopOwner("server")  # which event loop _client, _slots and the in-flight counts belong to
        self.sync_fleet(force=True)

    summary = "running vLLM servers, see --server-url"
    samples_with_learner_module = False

    @staticmethod
    def add_arguments(group: Any) -> None:
        """``--server-url`` (repeatable), ``--server-concurrency``, ``--server-timeout``."""
        group.add_argument(
            "--server-url",
            action="append",
            dest="server_urls",
            default=None,
            metavar="URL",
            help="base URL of a vLLM OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
            "(repeat for several: requests are balanced, failed ones go to another), or fleet:MANIFEST for the "
            "sampler replicas of `agentgspo fleet up` (kept current as they come and go)",
        )
        group.add_argument(
            "--server-concurrency",
            type=int,
            default=256,
            help="most requests in flight to each server (--backend server)",
        )
        group.add_argument(
            "--server-timeout",
            type=float,
            default=600.0,
            help="seconds one request may take before it is retried (--backend server)",
        )

    @staticmethod
    def options(args: Any) -> dict[str, Any]:
        """The client's options from ``add_arguments``'."""
        return {"urls": args.server_urls, "max_concurrency": args.server_concurrency, "timeout_s": args.server_timeout}

    @staticmethod
    def run_options(*, seed: int, server_urls: list[str], weight_transfer: str) -> dict[str, Any]:
        """In a training run: the servers' URLs (at least one) and how updates reach them."""
        if not server_urls:
            raise ValueError("backend 'server' needs --server-url (start one with `agentgspo serve-policy`)")
        return {"urls": server_urls, "weight_transfer": weight_transfer}

    @classmethod
    def from_pretrained(cls, path: str | Path, *, urls: Sequence[str] | None = None, **options: Any) -> ServerPolicy:
        """A client for servers serving checkpoint ``path`` (only its tokenizer is loaded here)."""
        if not urls:
            raise ValueError(
                "--backend server needs at least one --server-url (start one with "
                "`agentgspo serve-policy --policy PATH --port 8000`)"
            )
        renderer, stop_ids = load_renderer_and_stops(resolve_checkpoint(path))
        return cls(urls, renderer, stop_ids=stop_ids, **options)

    def sync_fleet(self, force: bool = False) -> bool:
        """Bring the servers in line with the fleet manifest (a fleet only; read when it changed, at most once a
        second unless ``force``): replicas that left get no new turn, new incarnations enter unadmitted unless they
        hold this client's weight version (:meth:`holds_current`). Returns whether the list changed."""
        if self.fleet_manifest is None:
            return False
        with self._fleet_lock:
            now = time.monotonic()
            if not force and now - self._fleet_checked < 1.0:
                return False
            self._fleet_checked = now
            manifest = read_manifest(self.fleet_manifest)
            if manifest.generation == self._fleet_generation:
                return False
            self._fleet_generation = manifest.generation
            known = {server.part: server for server in self.servers if server.retired is None}
            servers = []
            for part in manifest.parts:
                if part.kind != "sampler":
                    continue
                current = known.pop(part.id, None)
                usable = part.status in ("healthy", "needs_weights") and part.url
                url = (part.url or "").rstrip("/").removesuffix("/v1")
                if current is not None and usable and (current.incarnation, current.url) == (part.restarts, url):
                    servers.append(current)
                    continue
                if current is not None:  # gone, or back as a new incarnation: no new turn to the old entry
                    current.retired = f"left the fleet ({part.status}, restarts {part.restarts})"
                if usable:
                    holds = self.holds_current(part.weight_version or 0, part.weight_run)
                    servers.append(_Server(url, part=part.id, incarnation=part.restarts, admitted=holds))
            for server in known.values():
                server.retired = "left the fleet (no such part any more)"
            self.servers = servers
            logger.info(
                "fleet %s: %d samplers serving, %d waiting for weights",
                manifest.fleet,
                sum(s.admitted for s in servers),
                sum(not s.admitted for s in servers),
            )
            return True

    def holds_current(self, version: int, run: str | None) -> bool:
        """Whether a replica acknowledged at ``version`` of learner run ``run`` (None: the fleet file's model) holds
        this client's current weights: this run's at its version or later; before this client sent any (its version
        0), whatever the replica holds. Never another run's once it has, whatever the number (module docstring)."""
        if self.version == 0:
            return True
        return run == self.run_id and version >= self.version

    def version_label(self, version: int) -> str:
        """The weight-version label servers carry for ``version`` of this run: ``RUN_ID:VERSION``."""
        return f"{self.run_id}:{version}"

    # -- per event loop state (asyncio.run makes a new loop per rollout; clients and locks belong to one) ----
    def _bind(self) -> None:
        """Make the per-loop state for the running loop, which just took the client over (``self._owner``: no turn
        of the previous loop is in flight, so its in-flight counts are stale and start again from 0)."""
        self._loop = asyncio.get_running_loop()
        limits = httpx.Limits(  # a fleet may grow: no cap on connections beyond the per-server slots
            max_connections=None if self.fleet_manifest else self.max_concurrency * len(self.servers),
            max_keepalive_connections=self.max_concurrency * max(len(self.servers), 1),
        )
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10)), limits=limits
        )
        self._slots = asyncio.Condition()
        for server in self.servers:
            server.in_flight = 0

    def request_body(self, prompt_ids: Sequence[int], params: SamplingParams, seed: int) -> dict[str, Any]:
        """The ``/v1/completions`` JSON body of one turn."""
        return {
            "model": self.model,
            "prompt": [int(i) for i in prompt_ids],
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k,
            "seed": seed,
            "logprobs": 0,
            "stop_token_ids": sorted(self.stop_ids),
            "ignore_eos": True,
            "skip_special_tokens": False,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }

    def parse_reply(self, reply: dict[str, Any], version: int, version_end: int | None = None) -> SampledTurn:
        """A completions reply as a :class:`SampledTurn` (ids and log-probs from the reply, never from text);
        ``version_end``: the server's version when the reply came, if it moved since the turn was sent."""
        try:
            choice = reply["choices"][0]
            ids = [int(i) for i in choice["token_ids"]]
            logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise RuntimeError(
                f"server reply is not a completions reply with token_ids and logprobs: {str(reply)[:300]}"
            ) from exc
        if len(ids) != len(logprobs):
            raise RuntimeError(f"server returned {len(logprobs)} log-probs for {len(ids)} ids")
        finish = "stop" if ids and ids[-1] in self.stop_ids else "length"
        end = version_end if version_end is not None and version_end != version else None
        return SampledTurn(ids, logprobs, finish, policy_version=version, policy_version_end=end)

    async def _acquire(self, slots: asyncio.Condition, avoid: _Server | None) -> _Server:
        """The healthy server with the fewest in flight and a free slot (waiting for one if needed); one being
        updated only when no other has room."""
        waited_since = time.monotonic()
        async with slots:
            while True:
                if self.sync_fleet():
                    slots.notify_all()
                now = time.monotonic()
                serving = [s for s in self.servers if s.retired is None]
                if not serving and self.fleet_manifest is None:
                    raise ServerUnavailable(
                        "every server failed a weight update: "
                        + "; ".join(f"{s.url}: {s.retired}" for s in self.servers)
                    )
                if not serving and now - waited_since > self.timeout_s:
                    raise ServerUnavailable(f"no sampler of fleet {self.fleet_manifest} served for {self.timeout_s} s")
                up = [s for s in serving if s.admitted and s.down_until <= now and s.in_flight < self.max_concurrency]
                preferred = [s for s in up if s is not avoid] or up
                if preferred:
                    server = min(preferred, key=lambda s: (s.paused, s.in_flight))
                    server.in_flight += 1
                    return server
                wake = min((s.down_until for s in self.servers if s.down_until > now), default=None)
                if self.fleet_manifest is not None:  # look at the manifest again in a second
                    wake = min(wake if wake is not None else now + 1.0, now + 1.0)
                try:
                    await asyncio.wait_for(slots.wait(), timeout=None if wake is None else max(wake - now, 0.001))
                except asyncio.TimeoutError:
                    pass

    async def _release(self, slots: asyncio.Condition, server: _Server, failed: bool) -> None:
        async with slots:
            server.in_flight -= 1
            if failed:
                server.failures += 1
                backoff = min(self.backoff_s * 2 ** (server.failures - 1), self.max_backoff_s)
                server.down_until = time.monotonic() + backoff
            else:
                server.failures = 0
                server.served += 1
            slots.notify_all()

    async def sample(self, request: SampleRequest) -> SampledTurn:
        """Sample one turn on some server, retrying elsewhere after a failure (see the module docstring). The HTTP
        client, the slots and the in-flight counts belong to one event loop at a time: a request from a second loop
        while the first has turns in flight raises :class:`~agentgspo.policy.base.EventLoopConflict`."""
        if len(request.prompt_ids) == 0:
            raise ValueError("prompt is empty: expected at least one id to condition on")
        with self._owner.request() as rebound:
            if rebound:
                self._bind()
            return await self._sample(request, self._client, self._slots)

    async def _sample(self, request: SampleRequest, client: httpx.AsyncClient, slots: asyncio.Condition) -> SampledTurn:
        """:meth:`sample` on the owning loop's ``client`` and ``slots``."""
        seed = request.seed if request.seed is not None else hash((self.seed, next(self._calls))) & 0x7FFFFFFFFFFFFFFF
        body = self.request_body(request.prompt_ids, request.params, seed)
        errors: list[str] = []
        last: _Server | None = None
        for attempt in range(self.max_attempts):
            if attempt:
                self.retries += 1
            server = await self._acquire(slots, avoid=last)
            last = server
            version, pauses = server.version, server.pauses
            try:
                response = await client.post(f"{server.url}/v1/completions", json=body)
            except httpx.TransportError as exc:  # refused, reset, timed out: the server may be gone
                await self._release(slots, server, failed=True)
                if server.paused or (server.retired is not None and server.pauses > pauses):
                    # Frozen by a keep-mode pause when its server failed: maybe half sampled, never re-sent.
                    raise ServerUnavailable(
                        f"{server.url} failed while paused for a weight update with this turn in flight (a frozen "
                        f"turn is not re-sent): {type(exc).__name__}: {exc}"
                    ) from exc
                errors.append(f"{server.url}: {type(exc).__name__}: {exc}")
                continue
            except BaseException:
                await self._release(slots, server, failed=False)
                raise
            if response.status_code in RETRYABLE_STATUS:
                await self._release(slots, server, failed=True)
                errors.append(f"{server.url}: HTTP {response.status_code}: {response.text[:200]}")
                continue
            await self._release(slots, server, failed=False)
            if server.failed_update is not None:  # retired during this turn (it was serving when the turn was sent)
                raise ServerUnavailable(
                    f"{server.url} was retired while this turn was in flight ({server.retired}): its reply may come "
                    "from partly loaded weights and is not used (the turn is not re-sent)"
                )
            if is_context_overflow(response.status_code, response.text):  # no room for a reply: not an error
                return SampledTurn([], [], "context", policy_version=version)
            if response.status_code != 200:
                raise ValueError(f"{server.url} refused the turn (HTTP {response.status_code}): {response.text[:500]}")
            return self.parse_reply(response.json(), version, server.version)
        raise ServerUnavailable(
            f"no server completed the turn in {self.max_attempts} attempts: " + "; ".join(errors[-4:])
        )

    def close(self) -> None:
        """Close the weight-transfer group this client opened (NCCL or its CPU stand-in) and forget the event
        loop's HTTP client; the servers themselves are not this client's to stop."""
        self._close_transfer()
        self._client = None

    def update_weights(self, model: Any, folder: str | Path | None = None) -> int:
        """Load ``model``'s weights into every server; returns the new version. Safe with turns in flight.

        Streamed (``weight_transfer`` ``"gloo"``, or ``"auto"`` with servers that offer it): every server is paused
        in keep mode, the weights are broadcast from memory to all of them at once through vLLM's weight-transfer
        routes (:mod:`agentgspo.policy.weight_transfer`), then each resets its prefix cache and resumes. Through a
        folder (``"folder"``, or ``"auto"`` with servers that do not offer it): ``folder`` must be readable by the
        servers under the same path (a shared or local file system); the weights are written there while the
        servers keep sampling, then each server in turn is paused in keep mode, reloads them in place
        (``agentgspo_reload_weights``, with the CPU fix), resets its prefix cache (frozen turns are re-prefilled by
        the new weights) and resumes; the others sample meanwhile. Either way a server that fails is retired and
        the turns it held fail (see the module docstring); the rest are updated, then this raises naming it.
        """
        version = self.version + 1
        self.sync_fleet(force=True)
        if self._streams():
            failures = self._update_streamed(model, version)
        else:
            if folder is None:
                raise ValueError(
                    "update_weights: servers read the weights from a folder; pass one they can read "
                    "(a shared file system), e.g. the run folder's sampler-RANK/"
                )
            saved = save_weights(model, folder).resolve()
            failures = {}
            with httpx.Client(timeout=self.timeout_s) as client:
                for server in self.servers:
                    if server.retired is not None:
                        continue
                    try:
                        self._update_server(client, server, saved, version)
                    except Exception as exc:  # noqa: BLE001 -- retired; the other servers are still updated
                        failures[server.url] = str(exc)
        self.version = version
        self._acknowledge(version)
        if failures:
            raise self._update_failed(version, failures)
        return self.version

    def _update_failed(self, version: int, failures: dict[str, str]) -> WeightUpdateFailed:
        """The error of an update to ``version`` that ``failures`` (URL -> why) retired servers in."""
        updated = [s.url for s in self.servers if s.retired is None and s.version == version]
        serving = sum(s.retired is None for s in self.servers)
        return WeightUpdateFailed(
            f"weight update to version {version} failed on {len(failures)} of {len(self.servers)} servers "
            f"(retired: no turn goes to them; their frozen turns fail; {serving} still serve): "
            + "; ".join(f"{url}: {error}" for url, error in failures.items())
            + f". Took the update: {', '.join(updated) or 'none'}; retired: {', '.join(failures)}",
            serving,
            version=version,
            updated=updated,
            retired=list(failures),
            errors=failures,
        )

    def _acknowledge(self, version: int) -> None:
        """After an update to ``version``: the servers that took it are admitted, and (a fleet) the fleet's weights
        file says which incarnation of which replica holds it."""
        updated = [s for s in self.servers if s.retired is None and s.version == version]
        for server in updated:
            server.admitted = True
        if self.fleet_manifest is not None:
            acknowledge_weights(self.fleet_manifest, version, {s.part: s.incarnation for s in updated}, run=self.run_id)

    def _streams(self) -> bool:
        """Whether updates are streamed: ``weight_transfer`` says so, or (``"auto"``) the servers accept the
        gloo engine at the first update (asked once; the choice is logged)."""
        if self.weight_transfer == "folder":
            return False
        if self._transfer is None and self._streaming is None:
            try:  # the trainer's side of the gloo engine is built on vLLM's weight-transfer classes
                from agentgspo.policy.weight_transfer import WeightTransferError
            except ImportError as exc:
                if self.weight_transfer != "auto":
                    raise RuntimeError(
                        f"weight_transfer='gloo' streams through vLLM's weight-transfer engine, which does not import "
                        f"here ({exc}): install vllm beside the learner, or pass weight_transfer='folder'"
                    ) from exc
                self._streaming = False
                logger.warning(
                    "weight updates: through folders (vLLM does not import here: %s; install it to stream)", exc
                )
                return False
            try:
                self._connect([s for s in self.servers if s.retired is None])
                self._streaming = True
                logger.info("weight updates: streamed to %d servers by the gloo engine", len(self.servers))
            except WeightTransferError as exc:
                if self.weight_transfer != "auto":
                    raise
                self._streaming = False
                logger.warning(
                    "weight updates: through folders (the servers do not accept the gloo weight-transfer engine: "
                    "%s; start them with `agentgspo serve-policy` to stream)",
                    exc,
                )
        return bool(self._streaming)

    def _connect(self, members: list[_Server]) -> None:
        """Open the gloo group with ``members`` (replacing any older group)."""
        from agentgspo.policy.weight_transfer import ServersClient, connect, reachable_address

        self._close_transfer()
        client = ServersClient([s.url for s in members], timeout_s=self.timeout_s)
        try:
            self._transfer = connect(client, reachable_address(members[0].url), timeout_s=self.transfer_timeout_s)
        except BaseException:
            client.close()
            raise
        self._members = [_member(s) for s in members]

    def _close_transfer(self) -> None:
        if self._transfer is not None:
            self._transfer.shutdown()
            self._transfer.client.close()
            self._transfer = None
        self._members = []

    def _update_streamed(self, model: Any, version: int) -> dict[str, str]:
        """Pause every live server, broadcast ``model``'s weights to all of them, reset and resume each. A server
        counts as updated only once a transfer it was a member of returned without error: a failed one may have
        left any share of its layers loaded, so only the servers of a completed transfer are finished and labelled
        ``version``; every other is retired. A failed transfer is retried once without the servers that failed it
        (named by the error, or no longer answering ``/health``): the group broke and is opened again. Returns the
        failures (URL -> why; those servers are retired)."""
        from agentgspo.policy.weight_transfer import CheckpointSource

        failures: dict[str, str] = {}
        source = CheckpointSource(model)
        with httpx.Client(timeout=self.timeout_s) as client:
            members: list[_Server] = []
            for server in self.servers:
                if server.retired is None:
                    try:
                        self._pause(client, server)
                        members.append(server)
                    except Exception as exc:  # noqa: BLE001 -- retired; the others are still updated
                        self._retire(client, server, version, exc)
                        failures[server.url] = str(exc)
            updated = self._transfer_to(client, members, source, version, failures)
            for server in updated:
                try:
                    self._finish(client, server, version)
                except Exception as exc:  # noqa: BLE001 -- retired; the others are still updated
                    self._retire(client, server, version, exc)
                    failures[server.url] = str(exc)
        return failures

    def _transfer_to(
        self, client: httpx.Client, members: list[_Server], source: Any, version: int, failures: dict[str, str]
    ) -> list[_Server]:
        """Send ``source`` to ``members`` (paused), in at most two transfers; returns the members of the one that
        completed (none if both failed). The retry leaves out the members the error names (a refusal) unless it
        names them all (a broken broadcast fails every member's receive: then the ones no longer answering
        ``/health``). Each member left out is retired, its error added to ``failures``."""
        for attempt in range(2):
            if not members:
                return []
            try:
                if [_member(s) for s in members] != self._members:
                    self._connect(members)
                self._transfer.source = source
                self._transfer.send_weights()
                return members
            except Exception as exc:  # noqa: BLE001 -- the group broke (a transfer error, a refused handshake, ...)
                from agentgspo.policy.weight_transfer import failed_members  # imported by the transfer already

                self._close_transfer()
                named = failed_members(exc)
                why = str(exc) if str(exc).startswith("weight transfer") else f"{type(exc).__name__}: {exc}"
                suspects = named if len(named) < len(members) else {}
                last = attempt == 1  # no third try: every member of a failed transfer is retired
                out = {s.url for s in members if last or s.url in suspects or not self._healthy(client, s)}
                for server in members:  # end the update the failure left open (its unloaded layers keep theirs)
                    try:
                        self._post(client, server, "/finish_weight_update", "finish", allow=(500,), timeout=10)
                    except Exception as error:  # noqa: BLE001 -- gone since: out too
                        named.setdefault(server.url, str(error))
                        out.add(server.url)
                for server in members:
                    if server.url in out:
                        own = named.get(server.url)
                        failures[server.url] = f"weight transfer failed: {own}" if own else why
                        self._retire(client, server, version, exc)
                members = [s for s in members if s.url not in out]
        return []

    def _healthy(self, client: httpx.Client, server: _Server) -> bool:
        """Whether ``server`` answers ``GET /health``."""
        try:
            return client.get(f"{server.url}/health", timeout=10).status_code == 200
        except httpx.HTTPError:
            return False

    def _update_server(self, client: httpx.Client, server: _Server, saved: Path, version: int) -> None:
        """Through a folder: pause ``server`` in keep mode, reload ``saved``, reset its prefix cache, resume it; on
        any failure retire it and raise."""
        try:
            self._pause(client, server)
            self._reload(client, server, saved)
            self._finish(client, server, version)
        except BaseException as exc:
            self._retire(client, server, version, exc)
            raise

    def _finish(self, client: httpx.Client, server: _Server, version: int) -> None:
        """After its new weights are in: reset ``server``'s prefix cache, label it ``version``, resume it."""
        # Preempts the frozen requests (kept, re-prefilled by the new weights on resume), then clears the hashes: a
        # plain reset fails while they hold blocks, and cached KV of the old weights would be reused.
        reset = self._post(client, server, "/reset_prefix_cache?reset_running_requests=true", "prefix-cache reset")
        if reset.json().get("success") is False:
            raise RuntimeError(f"prefix-cache reset failed: {reset.text[:300]}")
        server.version = version  # before the resume: a reply received after it may hold new tokens
        try:  # vLLM's label (GET /weight_info): what operators read; admission goes by the fleet's weights file
            self._post(
                client,
                server,
                "/update_weight_version",
                "weight-version label",
                json={"new_version": self.version_label(version)},
                allow=(404, 405),  # a server without the route keeps its own label
            )
        except RuntimeError as exc:  # not worth retiring a server whose weights are in (a dead one fails its resume)
            logger.warning("%s: %s", server.url, exc)
        if server.paused:
            self._post(client, server, "/resume", "resume")
            server.paused = False

    def _retire(self, client: httpx.Client, server: _Server, version: int, error: BaseException) -> None:
        """``server`` failed its update to ``version``: no turn goes to it again (set before it stops counting as
        paused, so no turn it held is re-sent); resumed if it still answers."""
        server.retired = f"weight update to version {version} failed: {error}"
        server.failed_update = version
        if server.paused:
            try:
                self._post(client, server, "/resume", "resume")
            except Exception:  # noqa: BLE001 -- the first error is the one to report
                pass
        server.paused = False

    def _pause(self, client: httpx.Client, server: _Server) -> bool:
        """``POST /pause?mode=keep``; False when the server has no such route and nothing of ours in flight (then
        it is updated unpaused, the old way, with a warning)."""
        server.pauses += 1
        server.paused = True  # from now on a turn it holds that fails is not re-sent
        reply = self._post(
            client, server, "/pause", "pause", params={"mode": "keep", "clear_cache": "false"}, allow=(404,)
        )
        if reply.status_code == 404:
            server.paused = False
            if server.in_flight:
                raise RuntimeError(
                    "no /pause route (vLLM without it, or started without VLLM_SERVER_DEV_MODE=1) and "
                    f"{server.in_flight} turns in flight on it: it cannot be updated mid-turn; start it with "
                    "`agentgspo serve-policy` or update between rollouts"
                )
            logger.warning("%s has no /pause route: updating its weights unpaused (no turn in flight)", server.url)
            return False
        return True

    def _reload(self, client: httpx.Client, server: _Server, saved: Path) -> None:
        """Reload the weights in ``saved`` in place on ``server`` (through the weight-sync worker extension)."""
        self._post(
            client,
            server,
            "/collective_rpc",
            "weight reload",
            json={"method": "agentgspo_reload_weights", "kwargs": {"weights_path": str(saved)}},
            hint=" (is it an `agentgspo serve-policy` server?)",
        )

    @staticmethod
    def _post(
        client: httpx.Client,
        server: _Server,
        path: str,
        what: str,
        hint: str = "",
        allow: tuple[int, ...] = (),
        **kwargs: Any,
    ) -> Any:
        """``POST url+path``; a transport error or a reply other than 200 (or ``allow``) raises RuntimeError naming
        the step (the caller names the server)."""
        try:
            reply = client.post(f"{server.url}{path}", **kwargs)
        except httpx.TransportError as exc:
            raise RuntimeError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
        if reply.status_code != 200 and reply.status_code not in allow:
            raise RuntimeError(f"{what} failed (HTTP {reply.status_code}): {reply.text[:300]}{hint}")
        return reply
