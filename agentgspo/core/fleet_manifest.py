"""The manifest: the fleet's parts, their health and their URLs, as one JSON file the supervisor keeps current and
clients read. This docstring is its schema.

Who writes what: the supervisor is the only writer of the manifest; the learner is the only writer of the weights
file (below); ``agentgspo fleet status`` and every client only read. Writes are atomic (a temporary file in the same
folder renamed over the old one), so a reader never sees half a file. The manifest lies beside the fleet file as
``NAME.manifest.json`` (``--manifest`` puts it elsewhere); the supervisor writes it on every change and at least every
:data:`HEARTBEAT_S` seconds.

Top level:

- ``schema``: :data:`SCHEMA` (this layout).
- ``fleet``: the fleet's name; ``spec``: the fleet file's absolute path; ``launcher``: ``"local"`` or ``"ray"``;
  ``ray_address``: the cluster's address (``ray`` launcher) or null.
- ``state``: ``"starting"`` (some part has not served yet), ``"running"`` (every part serving: ``healthy``, or
  ``needs_weights``), ``"degraded"`` (some part is restarting or failed), ``"stopping"``, ``"stopped"``, or
  ``"failed"`` (the supervisor could not start the fleet or stopped on an error: ``error`` says why).
- ``error``: why ``state`` is ``"failed"``, else null.
- ``supervisor``: ``{"pid", "host", "log", "started_at"}``, the process writing this file (``fleet down`` signals it).
- ``updated_at``: unix time of this write; older than a few :data:`HEARTBEAT_S` while ``state`` is not ``"stopped"``
  means the supervisor is gone. ``generation``: counts the writes that changed anything but ``updated_at``, so a
  reader waiting for a change compares one number.
- ``sandbox_token_file``: a file (mode 0600) holding the sandbox servers' bearer token, null without sandboxes.
- ``weights_file``: the file the learner writes (below). ``weight_version``: the learner's current policy version as
  the supervisor last read it from there (0 before the learner wrote any); ``weight_run``: the learner run that
  version belongs to (null before any learner wrote).
- ``parts``: one entry per process, in fleet-file order.

A part:

- ``id``: ``GROUP-INDEX`` (``policy-0``), stable across restarts; ``kind``: ``"sampler"``, ``"sandbox"`` or
  ``"env_server"``; ``group``, ``index``: its group in the fleet file and its place there.
- ``status``: see below. ``since``: unix time it last changed.
- ``url``: ``http://HOST:PORT`` of its current incarnation (null before its first start). Each incarnation has a
  URL of its own (a new port; a Ray actor may also come back on another node), so a client that missed a restart
  fails to connect rather than reach a replica it never sent the current weights: read it again whenever
  ``restarts`` changes, and key what you know of a part by (``id``, ``restarts``), not by URL.
- ``restarts``: how many times it has been restarted, which also names its current incarnation (the weights file
  quotes it); ``max_restarts``: the bound, after which it is ``failed``.
- ``weight_version``: samplers only (null otherwise): the policy version its weights hold. 0 whenever it (re)starts
  (the fleet file's model), then the version the learner acknowledged for this incarnation. ``weight_run``: the
  learner run whose weights those are (null: the fleet file's model). A version number means something only within
  its run: a learner resumed after a kill is a new run (a new id), so a replica holding the killed run's version 5
  never counts as holding the resumed run's version 5 (different weights: the resumed run trained its own steps).
- ``pid``: the server process on its node (vLLM's API server, the sandbox or env server); ``pgid``: its process
  group, which holds its helpers too (vLLM's engine core); ``keeper_pid``: the keeper between launcher and server
  (``agentgspo.fleet.keeper``: it takes the group down when the server or the launcher dies); ``node``: the host name
  (local) or the Ray node's IP; ``cores``: the cores it is pinned to, or null; ``gpus``: GPUs it holds; ``log``: its
  log file on its node; ``started_at``: unix time its current incarnation was started; ``actor``, ``actor_pid``
  (``ray`` launcher, else null): its Ray actor as ``NAMESPACE/NAME`` (``ray.get_actor``) and the actor's worker
  process on its node.
- ``probe``: the last probe, ``{"ok", "at", "latency_s", "detail"}``; ``detail`` says what failed, or ``"paused"``
  for a sampler the learner has paused (a paused vLLM server cannot generate, and is not restarted for it).
- ``last_error``: why it was last unhealthy (its process exited with ..., the probe failed with ...), or null.
- ``info``: what it serves: ``model``, ``weight_transfer`` (samplers); ``backend`` (sandboxes); ``env``,
  ``max_concurrent_envs`` (env servers).

Statuses. Clients send work only to ``healthy`` parts, and to a ``needs_weights`` sampler only after sending it the
current weights:

- ``starting``: (re)started, has not passed a probe yet.
- ``healthy``: passes its probes (a 1-token generation, a judged program, ``/health`` plus a WebSocket reset); a
  sampler also holds the learner's current weights (``weight_run`` is the top-level ``weight_run`` and
  ``weight_version`` >= the top-level ``weight_version``).
- ``needs_weights``: a sampler that passes its probes but holds older weights than the learner's (it came back
  from a restart with the fleet file's model), or another learner run's (a killed one's): the learner sends it the
  current weights, then acknowledges them in the weights file, and the supervisor makes it ``healthy``.
- ``unhealthy``: its process exited, or ``probes.failures`` probes in a row failed, or it did not pass a probe within
  ``probes.start_timeout_s`` of starting, or (a sampler) it stayed paused longer than ``probes.max_paused_s`` (a
  learner that paused it for a weight update died: see :mod:`agentgspo.fleet.supervisor`): out of service, being
  restarted (then ``starting`` again).
- ``failed``: it failed again after ``max_restarts`` restarts (or Ray gave up on its actor): not restarted any more.
- ``stopped``: the fleet was stopped.

The weights file, written by the learner (:func:`acknowledge_weights`), read by the supervisor every probe round::

    {"run": ID, "version": V, "replicas": {"policy-0": {"restarts": R, "version": V, "run": ID}, ...}, "updated_at": T}

``run`` is the learner run's id (each learner process that drives the fleet has its own: ``ServerPolicy.run_id``)
and ``version`` its current policy version; ``replicas`` holds, per sampler it updated, the incarnation
(``restarts``) it updated and to which version of which run. A sampler is ``healthy`` when its current incarnation is
acknowledged by this ``run`` at ``version`` or later, ``needs_weights`` otherwise. A run's first write drops the
acknowledgements of the runs before it (their replicas hold weights that are no version of this run). Write the new
version and the acknowledgements of the replicas that received it in one write: a replica the update missed then
shows ``needs_weights`` and no other does. Before the learner writes anything, the version is 0 and every sampler
(holding the fleet file's model) is ``healthy``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentgspo.core.errors import AgentGSPOError

__all__ = [
    "SCHEMA",
    "HEARTBEAT_S",
    "STATUSES",
    "ProbeRecord",
    "PartEntry",
    "SupervisorEntry",
    "Manifest",
    "WeightsFile",
    "manifest_path",
    "run_folder",
    "write_json_atomic",
    "read_manifest",
    "read_weights",
    "acknowledge_weights",
    "FleetUnavailable",
    "FleetFollower",
]

SCHEMA = 1
#: the supervisor rewrites the manifest at least this often (``updated_at``), changed or not.
HEARTBEAT_S = 5.0
STATUSES = ("starting", "healthy", "needs_weights", "unhealthy", "failed", "stopped")
Status = Literal["starting", "healthy", "needs_weights", "unhealthy", "failed", "stopped"]


class ProbeRecord(BaseModel):
    """The last probe of a part."""

    ok: bool
    at: float
    latency_s: float
    detail: str | None = None


class PartEntry(BaseModel):
    """One part of the fleet as the manifest describes it (module docstring)."""

    id: str
    kind: Literal["sampler", "sandbox", "env_server"]
    group: str
    index: int
    status: Status = "starting"
    since: float = Field(default_factory=time.time)
    url: str | None = None
    restarts: int = 0
    max_restarts: int = 0
    weight_version: int | None = None
    weight_run: str | None = None
    pid: int | None = None
    pgid: int | None = None
    keeper_pid: int | None = None
    node: str | None = None
    cores: list[int] | None = None
    actor: str | None = None
    actor_pid: int | None = None
    gpus: int = 0
    log: str | None = None
    started_at: float | None = None
    probe: ProbeRecord | None = None
    last_error: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class SupervisorEntry(BaseModel):
    """The process that writes the manifest."""

    pid: int
    host: str
    log: str | None = None
    started_at: float


class Manifest(BaseModel):
    """The whole manifest (module docstring)."""

    schema_: int = Field(SCHEMA, alias="schema")
    fleet: str
    spec: str
    launcher: Literal["local", "ray"]
    ray_address: str | None = None
    state: Literal["starting", "running", "degraded", "stopping", "stopped", "failed"] = "starting"
    error: str | None = None
    supervisor: SupervisorEntry
    updated_at: float = Field(default_factory=time.time)
    generation: int = 0
    sandbox_token_file: str | None = None
    weights_file: str
    weight_version: int = 0
    weight_run: str | None = None
    parts: list[PartEntry] = Field(default_factory=list)

    model_config = {"populate_by_name": True}

    def serving(self, kind: str) -> list[PartEntry]:
        """The parts of ``kind`` that take work now (``healthy``), in fleet-file order."""
        return [part for part in self.parts if part.kind == kind and part.status == "healthy"]

    def urls(self, kind: str) -> list[str]:
        """The URLs of :meth:`serving` parts of ``kind``."""
        return [part.url for part in self.serving(kind) if part.url]

    def needing_weights(self) -> list[PartEntry]:
        """Samplers that answer but must receive the current weights before any turn (``needs_weights``)."""
        return [part for part in self.parts if part.status == "needs_weights"]

    def sandbox_token(self) -> str | None:
        """The sandbox servers' bearer token (from ``sandbox_token_file``), or None without sandboxes."""
        return Path(self.sandbox_token_file).read_text().strip() if self.sandbox_token_file else None

    def part(self, part_id: str) -> PartEntry:
        """The part named ``part_id``; ``KeyError`` naming the ids there are otherwise."""
        for part in self.parts:
            if part.id == part_id:
                return part
        raise KeyError(f"no part {part_id!r} in fleet {self.fleet!r}; parts: {[p.id for p in self.parts]}")

    def dump(self) -> dict[str, Any]:
        """The JSON object written to disk."""
        return self.model_dump(by_alias=True, mode="json")


class WeightsFile(BaseModel):
    """The learner's side (module docstring): its run, its current version and which incarnation of which sampler
    holds it."""

    run: str | None = None
    version: int = 0
    replicas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    updated_at: float | None = None

    def acknowledged(self, part_id: str, restarts: int) -> int | None:
        """The version acknowledged for incarnation ``restarts`` of ``part_id``, or None."""
        held = self.holds(part_id, restarts)
        return None if held is None else held[0]

    def holds(self, part_id: str, restarts: int) -> tuple[int, str | None] | None:
        """(version, learner run) acknowledged for incarnation ``restarts`` of ``part_id``, or None."""
        entry = self.replicas.get(part_id)
        if entry is None or entry.get("restarts") != restarts:
            return None
        return entry.get("version"), entry.get("run")


def manifest_path(spec_path: str | Path) -> Path:
    """Where a fleet file's manifest lies by default: ``NAME.manifest.json`` beside it."""
    spec_path = Path(spec_path).resolve()
    return spec_path.with_name(f"{spec_path.stem}.manifest.json")


def run_folder(manifest: str | Path) -> Path:
    """The folder of a fleet's logs, token and weights file, beside its manifest: ``NAME.fleet/``."""
    manifest = Path(manifest).resolve()
    return manifest.with_name(manifest.name.removesuffix(".json").removesuffix(".manifest") + ".fleet")


def write_json_atomic(path: str | Path, data: Any, mode: int = 0o644) -> None:
    """Write ``data`` as JSON to ``path`` so that a reader sees the old file or the new one, never a part."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_manifest(path: str | Path) -> Manifest:
    """The manifest at ``path``; ``FileNotFoundError`` saying how to start the fleet when there is none."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no fleet manifest at {str(path)!r}: start the fleet (agentgspo fleet up FILE)"
        ) from None
    return Manifest.model_validate(json.loads(text))


def read_weights(path: str | Path) -> WeightsFile:
    """The learner's weights file (an empty one when it has written none yet)."""
    try:
        return WeightsFile.model_validate(json.loads(Path(path).read_text()))
    except FileNotFoundError:
        return WeightsFile()


def acknowledge_weights(
    manifest: Manifest | str | Path, version: int, replicas: dict[str, int], run: str | None = None
) -> None:
    """The learner's call after a weight update: its policy is now ``version`` of learner run ``run`` and the
    samplers in ``replicas`` (part id -> the incarnation, ``restarts``, it updated) hold it. One atomic write of the
    weights file; the acknowledgements of samplers not in ``replicas`` are kept when they are this run's (a sampler
    at an older version then needs weights) and dropped when another run wrote them (a killed learner's: its
    versions are not this run's)."""
    manifest = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    current = read_weights(manifest.weights_file)
    acknowledged = {part: entry for part, entry in current.replicas.items() if entry.get("run") == run}
    acknowledged.update(
        {part_id: {"restarts": restarts, "version": version, "run": run} for part_id, restarts in replicas.items()}
    )
    data = WeightsFile(run=run, version=version, replicas=acknowledged, updated_at=time.time())
    write_json_atomic(manifest.weights_file, data.model_dump(mode="json"))


class FleetUnavailable(ConnectionError, AgentGSPOError):
    """A fleet has no part of the kind a client needs that serves or could come back (all ``failed``, or the fleet
    stopped): waiting for it is pointless."""


class FleetFollower:
    """A client's view of a fleet: its manifest, read again only when the file changed, and the parts serving now.

    The sandbox backend (``fleet:MANIFEST``) and the remote env client pick a part per request or session from
    :meth:`serving_urls`; a wrong path fails when the follower is made, naming how to start the fleet.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._seen: tuple[int, Manifest] | None = None  # (the file's mtime_ns, the manifest) last read
        self.read()

    def read(self) -> Manifest:
        """The manifest now (the last one read while the file is being replaced or cannot be parsed)."""
        try:
            stamp = self.path.stat().st_mtime_ns
            if self._seen is None or self._seen[0] != stamp:
                self._seen = (stamp, read_manifest(self.path))
        except (OSError, ValueError) as exc:
            if self._seen is None:  # never read: a wrong path, not a manifest being rewritten
                raise FileNotFoundError(
                    f"fleet manifest {str(self.path)!r}: {exc}; start the fleet with `agentgspo fleet up FILE` and "
                    "pass the manifest it prints"
                ) from None
        return self._seen[1]

    def serving_urls(self, kind: str) -> list[str]:
        """The URLs of the ``healthy`` parts of ``kind`` now (empty while they restart); raises
        :class:`FleetUnavailable` when none could serve again."""
        manifest = self.read()
        parts = [part for part in manifest.parts if part.kind == kind]
        urls = [url.rstrip("/") for url in manifest.urls(kind)]
        stopped = manifest.state in ("stopping", "stopped", "failed")
        if not urls and (stopped or all(part.status in ("failed", "stopped") for part in parts)):
            raise FleetUnavailable(
                f"fleet {manifest.fleet} has no {kind.replace('_', ' ')} that could serve (fleet {manifest.state}; "
                + (", ".join(f"{part.id} {part.status}" for part in parts) or f"no {kind} parts")
                + f"): see `agentgspo fleet status {manifest.spec}`"
            )
        return urls
