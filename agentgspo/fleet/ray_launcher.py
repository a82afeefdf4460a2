"""The ``ray`` launcher: every part an actor of a Ray cluster that already runs (``ray.init(address=...)``), each actor
running its part's server process behind a keeper and reporting its URL. Needs the ``ray`` extra
(``pip install 'agentgspo[ray]'``, pinned: Ray's versions must match across the cluster).

- Sampler replicas: one placement group each (one ``STRICT_PACK`` bundle ``{CPU: cpus, GPU: gpus}`` plus custom
  ``ray_resources``: the replica's shards stay on one node), the actor scheduled into it. On its node the actor pins
  the server to cores no other fleet part there holds (the local launcher's lock files) and sets
  ``VLLM_CPU_OMP_THREADS_BIND``; Ray sets ``CUDA_VISIBLE_DEVICES`` to the bundle's GPUs.
- Sandbox and env servers: actors with ``num_cpus: cpus`` and the ``SPREAD`` strategy (over the nodes that have the
  resources asked; give CPU nodes a custom resource and ask for it in ``ray_resources`` to keep them off GPU nodes).
- Restarts: each actor has ``max_restarts`` of the fleet file. When its server exits the actor exits too (after
  telling the supervisor why), so Ray restarts it, on the same placement group, and the new actor starts a new
  server (a new URL if it landed elsewhere). A part that is alive but fails its probes is killed with
  ``ray.kill(no_restart=False)``: Ray restarts it the same way. When Ray has used up the restarts the actor is dead
  and the part ``failed``. A killed actor's server does not outlive it: its keeper sees its parent gone.
- The actors are owned by the supervisor (not detached): if the supervisor dies, Ray kills them, and their keepers
  their servers.

Tested here on a one-node local cluster (``ray start --head`` on this machine); several nodes, KubeRay and GPUs are
not (docs/fleet.md says how to run them).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from agentgspo.fleet.local import Incarnation, PartFailed, claim_cores, exit_reason, free_port, keeper_command, omp_bind
from agentgspo.fleet.spec import FleetSpec, PartSpec

__all__ = ["PartActor", "RayLauncher"]

#: seconds an actor waits after telling the supervisor its server exited, before it exits itself (Ray restarts it).
EXIT_DELAY_S = 0.3


def _require_ray():
    # Ray's C++ handler prints a stack trace for every SIGTERM, the supervisor's ordinary way to stop (read at import)
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            f"the ray launcher needs Ray ({exc}): pip install 'agentgspo[ray]' (the same Ray version as the cluster's)"
        ) from None
    return ray


class PartActor:
    """A Ray actor (made with ``ray.remote`` by :class:`RayLauncher`) that runs one part's server behind a keeper on
    its node and exits when the server does, so that Ray restarts it."""

    def __init__(self, part: PartSpec, host: str | None, run_dir: str, token: str | None):
        import ray

        self.part, self.stopping = part, False
        self.node = ray.util.get_node_ip_address()
        self.host = host or self.node
        folder = Path(run_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:  # another node: the supervisor's folder is not here
            folder = Path(tempfile.gettempdir()) / "agentgspo-fleet" / folder.name
            folder.mkdir(parents=True, exist_ok=True)
        self.cores, self._locks = claim_cores(int(part.cpus)) if part.bind_cores else ([], [])
        env = {**os.environ, **part.environment}
        if self.cores:
            env["VLLM_CPU_OMP_THREADS_BIND"] = omp_bind(self.cores, part.shards)
        if part.kind == "sandbox" and token:
            env["AGENTGSPO_SANDBOX_TOKEN"] = token
        self.port = free_port(self.host)
        self.log = folder / f"{part.id}.log"
        pidfile = folder / f"{part.id}.{os.getpid()}.pid"
        command = keeper_command(pidfile, self.cores or None, part.command(sys.executable, self.host, self.port))
        with open(self.log, "a") as handle:
            handle.write(f"\n=== {part.id}, Ray actor pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n")
            handle.flush()
            self.keeper = subprocess.Popen(
                command, env=env, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.started_at = time.time()
        deadline = time.monotonic() + 60
        self.pids: dict = {}
        while not self.pids and time.monotonic() < deadline and self.keeper.poll() is None:
            try:
                import json

                self.pids = json.loads(pidfile.read_text())
            except (FileNotFoundError, ValueError):
                time.sleep(0.02)
        self.exited = threading.Event()
        self.reason = ""
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        status = self.keeper.wait()
        self.reason = exit_reason(status)
        self.exited.set()
        if not self.stopping:  # the server died: so does this actor, and Ray starts a new one
            time.sleep(EXIT_DELAY_S)
            os._exit(1)

    def info(self) -> dict:
        """Where this incarnation serves and which processes it is."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return {
            "url": f"http://{shown}:{self.port}",
            "node": self.node,
            "log": str(self.log),
            "started_at": self.started_at,
            "pid": self.pids.get("pid"),
            "pgid": self.pids.get("pgid"),
            "keeper_pid": self.pids.get("keeper_pid"),
            "cores": self.cores or None,
            "actor_pid": os.getpid(),
            "alive": self.keeper.poll() is None,
        }

    def wait_exit(self) -> str:
        """Returns (why) once the server has exited."""
        self.exited.wait()
        return self.reason

    def stop(self) -> None:
        """Stop the server (its keeper: SIGTERM, SIGKILL after its grace) and wait for it; the actor stays."""
        self.stopping = True
        if self.keeper.poll() is None:
            self.keeper.send_signal(signal.SIGTERM)
        try:
            self.keeper.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.keeper.kill()
            self.keeper.wait()


class RayLauncher:
    """Starts, restarts and stops parts as Ray actors (module docstring)."""

    name = "ray"

    def __init__(self, spec: FleetSpec, run_dir: Path, sandbox_token: str | None):
        ray = _require_ray()
        self.ray, self.spec, self.run_dir, self.token = ray, spec, Path(run_dir), sandbox_token
        ray.init(
            address=spec.ray.address,
            namespace=spec.ray.namespace,
            ignore_reinit_error=True,
            log_to_driver=False,  # parts log to their own files; Ray's own log lines stay in Ray's logs
            logging_level="WARNING",
        )
        self.actor_class = ray.remote(PartActor)
        self.actors: dict[str, object] = {}
        self.groups: dict[str, object] = {}

    def _options(self, part: PartSpec) -> dict:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options = dict(
            name=f"{self.spec.name}.{part.id}",
            num_cpus=part.cpus,
            num_gpus=part.gpus,
            resources=dict(part.ray_resources) or None,
            max_restarts=self.spec.max_restarts,
            max_task_retries=0,
            max_concurrency=4,  # wait_exit blocks one thread; info and stop must still answer
        )
        if part.id in self.groups:
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=self.groups[part.id], placement_group_bundle_index=0
            )
        else:
            options["scheduling_strategy"] = "SPREAD"
        return options

    async def _placement_group(self, part: PartSpec) -> None:
        """A placement group of one bundle for a sampler replica; ``PartFailed`` when the cluster has no room."""
        from ray.util.placement_group import placement_group, remove_placement_group

        bundle = {"CPU": float(part.cpus), **({"GPU": float(part.gpus)} if part.gpus else {}), **part.ray_resources}
        group = placement_group([bundle], strategy="STRICT_PACK", name=f"{self.spec.name}.{part.id}")
        timeout = self.spec.probes.start_timeout_s
        try:
            await asyncio.wait_for(group.ready(), timeout)
        except asyncio.TimeoutError:
            remove_placement_group(group)
            available = self.ray.available_resources()
            raise PartFailed(
                f"Ray found no room for {bundle} within {timeout} s (available now: {available}); add nodes, or "
                "lower samplers' count, cpus or gpus"
            ) from None
        self.groups[part.id] = group

    async def _incarnation(self, part: PartSpec, actor, info: dict) -> Incarnation:
        exited = asyncio.get_running_loop().create_future()

        async def watch() -> None:
            try:
                reason = await actor.wait_exit.remote()
            except self.ray.exceptions.RayActorError as exc:
                reason = f"its Ray actor died ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
            if not exited.done():
                exited.set_result(reason)

        asyncio.ensure_future(watch())
        return Incarnation(
            info["url"],
            info["node"],
            info["log"],
            info["started_at"],
            info["pid"],
            info["pgid"],
            info["keeper_pid"],
            info["cores"],
            actor=f"{self.spec.ray.namespace}/{self.spec.name}.{part.id}",
            actor_pid=info["actor_pid"],
            exited=exited,
            handle=info,
        )

    async def start(self, part: PartSpec, restarts: int) -> Incarnation:
        """Place and start ``part``'s actor; returns once it reported where its server listens."""
        if part.kind == "sampler" and part.id not in self.groups:
            await self._placement_group(part)
        actor = self.actor_class.options(**self._options(part)).remote(
            part, self.spec.host, str(self.run_dir), self.token
        )
        self.actors[part.id] = actor
        info = await self._info(part, actor, old_actor_pid=None)
        return await self._incarnation(part, actor, info)

    async def _info(self, part: PartSpec, actor, old_actor_pid: int | None) -> dict:
        """The actor's info once it is an incarnation other than ``old_actor_pid``'s (waiting out a Ray restart);
        ``PartFailed`` when Ray has given the actor up."""
        deadline = time.monotonic() + self.spec.probes.start_timeout_s
        while True:
            try:
                info = await asyncio.wait_for(actor.info.remote(), 30)
                if info["actor_pid"] != old_actor_pid:
                    return info
            except self.ray.exceptions.ActorDiedError as exc:
                raise PartFailed(f"Ray gave its actor up: {str(exc).splitlines()[0][:300]}") from None
            except (self.ray.exceptions.RayActorError, asyncio.TimeoutError):
                pass  # restarting, or busy starting
            if time.monotonic() > deadline:
                raise RuntimeError(f"its actor did not come back within {self.spec.probes.start_timeout_s} s")
            await asyncio.sleep(0.1)

    async def restart(self, part: PartSpec, incarnation: Incarnation | None, restarts: int) -> Incarnation:
        """Have Ray restart ``part``'s actor (it already does when the server exited; a hung one is killed first)."""
        actor = self.actors.get(part.id)
        if actor is None:
            return await self.start(part, restarts)
        old = incarnation.handle["actor_pid"] if incarnation is not None else None
        try:
            info = await asyncio.wait_for(actor.info.remote(), 10)
            if info["actor_pid"] == old and info["alive"]:  # alive but failing its probes: have Ray replace it
                self.ray.kill(actor, no_restart=False)
        except self.ray.exceptions.ActorDiedError as exc:
            raise PartFailed(f"Ray gave its actor up: {str(exc).splitlines()[0][:300]}") from None
        except (self.ray.exceptions.RayActorError, asyncio.TimeoutError):
            pass  # already dead or restarting: Ray brings it back
        info = await self._info(part, actor, old_actor_pid=old)
        return await self._incarnation(part, actor, info)

    async def stop(self, part: PartSpec, incarnation: Incarnation | None, graceful: bool = True) -> None:
        """Stop ``part``: its server first (gracefully), then its actor for good, then its placement group."""
        actor = self.actors.pop(part.id, None)
        if actor is not None:
            if graceful:
                try:
                    await asyncio.wait_for(actor.stop.remote(), 60)
                except (self.ray.exceptions.RayError, asyncio.TimeoutError):
                    pass
            self.ray.kill(actor, no_restart=True)
        group = self.groups.pop(part.id, None)
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)

    async def close(self) -> None:
        """Kill any actor left (one being started when the fleet stopped), remove placement groups, disconnect."""
        for part_id in list(self.actors):
            self.ray.kill(self.actors.pop(part_id), no_restart=True)
        from ray.util.placement_group import remove_placement_group

        for part_id in list(self.groups):
            remove_placement_group(self.groups.pop(part_id))
        self.ray.shutdown()
