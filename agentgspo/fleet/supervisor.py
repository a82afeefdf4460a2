"""The supervisor: starts every part of a fleet with a launcher, probes each one, restarts the ones that fail (up to
``max_restarts``) and keeps the manifest current (its schema: ``agentgspo.core.fleet_manifest``).

    python -m agentgspo.fleet.supervisor FLEET.yaml [--manifest PATH]

``agentgspo fleet up`` starts it in the background (``agentgspo.fleet.control``); SIGTERM or SIGINT stop it, and it
stops every part before it exits. Each part is watched by a task of its own, so a slow probe of one never delays
noticing another: a part whose process exits is unhealthy at once (its launcher reports the exit), one whose probes
fail ``probes.failures`` times in a row after ``probes.interval_s`` + ``probes.timeout_s`` each. An unhealthy part is
out of the manifest's service (status ``unhealthy``), restarted (``starting``) and back (``healthy``, or
``needs_weights`` for a sampler whose weights are older than the learner's, or another learner run's) once it
passes a probe.

A sampler paused by a learner (``POST /pause?mode=keep`` for a weight update) cannot generate, so its probe passes
as ``"paused"`` rather than restart it mid-update. A learner that dies during its update never sends the
``/resume``: the replica would pass as paused forever and serve nothing. So a sampler seen paused at every probe
for longer than ``probes.max_paused_s`` (from the first probe that saw it paused; one probe that sees it running
starts the count again) is unhealthy and restarted, not resumed. Resuming it would serve whatever the dead learner
left in it: a transfer cut off mid-way leaves some layers new and some old, weights that are no version of any run,
sampled from under the label of the last complete one. Restarted, it comes back with the fleet file's model as
``needs_weights``, and the next update gives it current weights. The bound is the only guard of a learner that is
alive but slow, so its default (1800 s) is far above any update a live learner performs (a streamed 30B update
takes tens of seconds, a folder reload of one replica a few minutes; a failed transfer is retried once): a
restart mid-update of a live learner is no corruption either (the replica dies, the learner retires it and the new
incarnation needs weights), only a lost replica and its frozen turns, which is why the bound is long rather than
short. Time is read from ``clock`` (``time.monotonic``; tests pass their own).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

import httpx

from agentgspo.fleet.local import Incarnation, LocalLauncher, PartFailed
from agentgspo.core.fleet_manifest import (
    HEARTBEAT_S,
    Manifest,
    PartEntry,
    ProbeRecord,
    SupervisorEntry,
    manifest_path,
    read_weights,
    run_folder,
    write_json_atomic,
)
from agentgspo.fleet.probes import ProbeResult, probe_env_server, probe_sampler, probe_sandbox
from agentgspo.fleet.ray_launcher import RayLauncher
from agentgspo.fleet.spec import FleetSpec, PartSpec, load_spec

__all__ = ["Supervisor", "make_launcher", "main"]

SERVING = ("healthy", "needs_weights")


def make_launcher(spec: FleetSpec, run_dir: Path, sandbox_token: str | None):
    """The launcher the fleet file names (``local`` or ``ray``)."""
    if spec.launcher == "ray":
        return RayLauncher(spec, run_dir, sandbox_token)
    return LocalLauncher(spec, run_dir, sandbox_token)


def sandbox_token(spec: FleetSpec, run_dir: Path) -> tuple[str | None, str | None]:
    """(the sandbox servers' token, the 0600 file holding it): ``$sandbox_token_env``, else a new random one."""
    if not spec.sandboxes:
        return None, None
    token = os.environ.get(spec.sandbox_token_env) or secrets.token_urlsafe(24)
    path = run_dir / "sandbox.token"
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token)
    return token, str(path)


class Supervisor:
    """Runs one fleet until stopped (module docstring); ``log_file``: where its output goes, for the manifest."""

    def __init__(
        self,
        spec: FleetSpec,
        spec_path: str | Path,
        manifest_path: str | Path,
        log_file: str | None = None,
        clock=time.monotonic,
    ):
        self.spec, self.parts, self.clock = spec, spec.parts(), clock
        self.manifest_path = Path(manifest_path).resolve()
        self.run_dir = run_folder(self.manifest_path)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.token, token_file = sandbox_token(spec, self.run_dir)
        weights_file = self.run_dir / "weights.json"
        weights_file.unlink(missing_ok=True)  # a new fleet holds the fleet file's model: version 0
        self.manifest = Manifest(
            fleet=spec.name or self.manifest_path.stem,
            spec=str(Path(spec_path).resolve()),
            launcher=spec.launcher,
            ray_address=spec.ray.address if spec.launcher == "ray" else None,
            supervisor=SupervisorEntry(
                pid=os.getpid(),
                host=socket.gethostname(),
                log=log_file,
                started_at=time.time(),
            ),
            sandbox_token_file=token_file,
            weights_file=str(weights_file),
            parts=[
                PartEntry(
                    id=part.id,
                    kind=part.kind,
                    group=part.group,
                    index=part.index,
                    max_restarts=spec.max_restarts,
                    weight_version=0 if part.kind == "sampler" else None,
                    gpus=part.gpus,
                    info=part.describe,
                )
                for part in self.parts
            ],
        )
        self.entries = {entry.id: entry for entry in self.manifest.parts}
        self.incarnations: dict[str, Incarnation | None] = {part.id: None for part in self.parts}
        self.served_once: set[str] = set()
        self._significant: dict | None = None
        self._written_at = 0.0
        self._weights_mtime: float | None = None
        self.launcher = None
        self.client: httpx.AsyncClient | None = None

    # --- the manifest ----------------------------------------------------------------------------------------------

    def log(self, message: str) -> None:
        """One line of the supervisor's log."""
        print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)

    def write(self, heartbeat: bool = False) -> None:
        """Write the manifest if anything that matters changed (``generation`` + 1), or as a heartbeat."""
        data = self.manifest.dump()
        significant = {k: v for k, v in data.items() if k not in ("updated_at", "generation")}
        significant["parts"] = [{k: v for k, v in p.items() if k != "probe"} for p in significant["parts"]]
        if significant != self._significant:
            self._significant = significant
            self.manifest.generation += 1
        elif not heartbeat:
            return
        self.manifest.updated_at = self._written_at = time.time()
        write_json_atomic(self.manifest_path, self.manifest.dump())

    def refresh_state(self) -> None:
        """The fleet's ``state`` from its parts' statuses (while it runs)."""
        if self.manifest.state in ("stopping", "stopped", "failed"):
            return
        statuses = [entry.status for entry in self.manifest.parts]
        if all(status in SERVING for status in statuses):
            self.manifest.state = "running"
        elif len(self.served_once) < len(statuses) and "failed" not in statuses:
            self.manifest.state = "starting"
        else:
            self.manifest.state = "degraded"

    def set_status(self, entry: PartEntry, status: str, error: str | None = None) -> None:
        """Change a part's status (logged), its error, and the fleet's state; write the manifest."""
        if error is not None:
            entry.last_error = error
        if entry.status != status:
            self.log(f"{entry.id}: {entry.status} -> {status}" + (f" ({error})" if error else f" {entry.url or ''}"))
            entry.status, entry.since = status, time.time()
        if status in SERVING:
            self.served_once.add(entry.id)
        self.refresh_state()
        self.write()

    def serving_status(self, entry: PartEntry) -> str:
        """``healthy``, or ``needs_weights`` for a sampler whose weights are older than the learner's or another
        learner run's (a version number means something only within its run)."""
        if entry.kind == "sampler" and (
            (entry.weight_version or 0) < self.manifest.weight_version or entry.weight_run != self.manifest.weight_run
        ):
            return "needs_weights"
        return "healthy"

    def refresh_weights(self) -> None:
        """Read the learner's weights file when it changed: the current version and each sampler's acknowledgement."""
        path = Path(self.manifest.weights_file)
        try:
            mtime = path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime == self._weights_mtime:
            return
        self._weights_mtime = mtime
        try:
            weights = read_weights(path)
        except ValueError as exc:  # half a file cannot happen (atomic writes); a wrong one is the learner's bug
            self.log(f"weights file {path} unreadable ({exc}); keeping version {self.manifest.weight_version}")
            return
        if (weights.version, weights.run) != (self.manifest.weight_version, self.manifest.weight_run):
            self.log(f"learner's weights: version {weights.version} of run {weights.run}")
        self.manifest.weight_version, self.manifest.weight_run = weights.version, weights.run
        for entry in self.manifest.parts:
            if entry.kind != "sampler":
                continue
            held = weights.holds(entry.id, entry.restarts)
            if held is not None:
                entry.weight_version, entry.weight_run = held
            if entry.status in SERVING:
                self.set_status(entry, self.serving_status(entry))
        self.refresh_state()
        self.write()

    # --- one part ----------------------------------------------------------------------------------------------

    async def probe(self, part: PartSpec, url: str, progress: float | None = None) -> ProbeResult:
        """The probe of ``part``'s kind against ``url`` (``progress``: a sampler's token count at its last probe)."""
        timeout = self.spec.probes.timeout_s
        if part.kind == "sampler":
            probing = probe_sampler(self.client, url, timeout, progress)
        elif part.kind == "sandbox":
            probing = probe_sandbox(self.client, url, self.token or "", timeout)
        else:
            probing = probe_env_server(self.client, url, timeout, reset=part.probe_reset)
        try:  # each probe keeps to its timeout; this is the guard if one did not
            return await asyncio.wait_for(probing, timeout + 5.0)
        except asyncio.TimeoutError:
            return ProbeResult(False, timeout + 5.0, f"no answer in {timeout + 5.0} s")

    def adopt(self, entry: PartEntry, incarnation: Incarnation) -> None:
        """Record a new incarnation of a part in its entry (status ``starting``, the fleet file's weights)."""
        self.incarnations[entry.id] = incarnation
        entry.url, entry.node, entry.log = incarnation.url, incarnation.node, incarnation.log
        entry.pid, entry.pgid, entry.keeper_pid = incarnation.pid, incarnation.pgid, incarnation.keeper_pid
        entry.cores, entry.started_at, entry.probe = incarnation.cores, incarnation.started_at, None
        entry.actor, entry.actor_pid = incarnation.actor, incarnation.actor_pid
        if entry.kind == "sampler":
            held = read_weights(self.manifest.weights_file).holds(entry.id, entry.restarts)
            entry.weight_version, entry.weight_run = held if held is not None else (0, None)
        self.set_status(entry, "starting")

    async def serve(self, part: PartSpec, entry: PartEntry, incarnation: Incarnation) -> str:
        """Probe a started part until it fails; returns why it is unhealthy."""
        probes = self.spec.probes
        started, failures, progress = time.monotonic(), 0, None
        paused_since: float | None = None  # when the probes first saw it paused, this pause
        exited = incarnation.exited
        while True:
            # a starting part is looked at every second (a refused connection is cheap), a serving one less often
            await asyncio.wait(
                {exited}, timeout=min(probes.interval_s, 1.0) if entry.status == "starting" else probes.interval_s
            )
            if exited.done():
                return exited.result()
            probing = asyncio.ensure_future(self.probe(part, incarnation.url, progress))
            await asyncio.wait({probing, exited}, return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                probing.cancel()
                return exited.result()
            result = probing.result()
            entry.probe = ProbeRecord(
                ok=result.ok, at=time.time(), latency_s=round(result.latency_s, 4), detail=result.detail
            )
            progress = result.progress if result.progress is not None else progress
            if result.ok and part.kind == "sampler" and result.detail == "paused":
                now = self.clock()
                paused_since = now if paused_since is None else paused_since
                if now - paused_since > probes.max_paused_s:
                    return (
                        f"paused for {now - paused_since:.0f} s, longer than probes.max_paused_s "
                        f"({probes.max_paused_s:g} s): the learner that paused it for a weight update is gone "
                        "(restarted, not resumed: its weights may be partly loaded)"
                    )
            elif result.ok:
                paused_since = None
            if result.ok:
                failures = 0
                self.set_status(entry, self.serving_status(entry))
            elif entry.status == "starting":
                if time.monotonic() - started > probes.start_timeout_s:
                    return f"passed no probe within {probes.start_timeout_s} s of starting: {result.detail}"
            else:
                failures += 1
                self.log(f"{entry.id}: probe failed ({failures}/{probes.failures}): {result.detail}")
                if failures >= probes.failures:
                    return f"{failures} probes in a row failed, the last: {result.detail}"

    async def watch(self, part: PartSpec) -> None:
        """Start ``part``, then serve, restart (up to ``max_restarts``) or give it up, until cancelled."""
        entry = self.entries[part.id]
        first = True
        while True:
            try:
                if first:
                    incarnation = await self.launcher.start(part, entry.restarts)
                else:
                    incarnation = await self.launcher.restart(part, self.incarnations[part.id], entry.restarts)
            except PartFailed as exc:
                self.set_status(entry, "failed", f"cannot be restarted: {exc}")
                return
            except Exception as exc:  # a port taken, a keeper that died, Ray busy: a failed start, counted
                reason = f"did not start: {type(exc).__name__}: {exc}"
                self.log(f"{part.id}: {reason}\n{traceback.format_exc()}")
            else:
                self.adopt(entry, incarnation)
                reason = await self.serve(part, entry, incarnation)
            first = False
            self.set_status(entry, "unhealthy", reason)
            if entry.restarts >= self.spec.max_restarts:
                await self.launcher.stop(part, self.incarnations[part.id], graceful=False)
                self.set_status(entry, "failed", f"{reason} (given up after {entry.restarts} restarts, the bound)")
                return
            entry.restarts += 1

    # --- the whole fleet -----------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Run until SIGTERM/SIGINT; returns the exit status (0 after a clean stop, 1 if the fleet failed)."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)
        self.write()
        self.log(f"fleet {self.manifest.fleet}: {len(self.parts)} parts, launcher {self.spec.launcher}")
        try:
            self.launcher = await asyncio.to_thread(make_launcher, self.spec, self.run_dir, self.token)
        except Exception as exc:  # cores taken, Ray unreachable, resources missing: the fleet cannot run
            self.manifest.state, self.manifest.error = "failed", f"{type(exc).__name__}: {exc}"
            self.log(f"cannot start the fleet: {self.manifest.error}\n{traceback.format_exc()}")
            self.write()
            return 1
        self.client = httpx.AsyncClient(trust_env=False, limits=httpx.Limits(max_connections=64))
        watchers = [asyncio.ensure_future(self.watch(part)) for part in self.parts]
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                self.refresh_weights()
                if time.time() - self._written_at >= HEARTBEAT_S:
                    self.write(heartbeat=True)
                await asyncio.wait({stopping}, timeout=min(self.spec.probes.interval_s, 1.0))
        finally:
            await self.shutdown(watchers)
        return 0

    async def shutdown(self, watchers: list[asyncio.Future]) -> None:
        """Stop every part (gracefully, all at once), mark them stopped, release the launcher."""
        self.log("stopping the fleet")
        self.manifest.state = "stopping"
        self.write()
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        results = await asyncio.gather(
            *(self.launcher.stop(part, self.incarnations[part.id]) for part in self.parts), return_exceptions=True
        )
        for part, result in zip(self.parts, results):
            if isinstance(result, BaseException):
                self.log(f"{part.id}: stop failed: {type(result).__name__}: {result}")
        await self.launcher.close()
        await self.client.aclose()
        for entry in self.manifest.parts:
            self.set_status(entry, "stopped")
        self.manifest.state = "stopped"
        self.write()
        self.log("fleet stopped")


def main(argv: list[str] | None = None) -> int:
    """``python -m agentgspo.fleet.supervisor FLEET.yaml [--manifest PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m agentgspo.fleet.supervisor")
    parser.add_argument("spec")
    parser.add_argument("--manifest", default=None)
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    manifest = Path(args.manifest or manifest_path(args.spec))
    log_file = str(run_folder(manifest) / "supervisor.log")  # where `fleet up` sends this process's output
    supervisor = Supervisor(spec, args.spec, manifest, log_file=log_file)
    return asyncio.run(supervisor.run())


if __name__ == "__main__":
    sys.exit(main())
