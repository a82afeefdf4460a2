"""Docker backend: a pool of hardened warm containers driven through ``docker exec`` (the ``docker`` SDK).

Each session leases one idle container for one submission (a pool with a size limit: when all are busy, callers
wait, which is the backpressure); the runner (``sandboxes/runner.py``) is sent as ``python3 -c`` and the spec on
the exec's stdin. On release a background thread kills every process in the container and wipes its /tmp before
the container goes back to the pool. The image (Debian + python3 + g++ + pypy3 + a precompiled bits/stdc++.h) is
built locally by ``.ci/setup_sandboxes.sh``; no registry is used.

Threat model.
Protects against (tests in ``tests/sandboxes/test_isolation.py``, Docker variants):
  - network access: ``network_mode=none`` (only a private loopback);
  - writes to the image or the host: read-only root filesystem, the only writable place a size-limited tmpfs /tmp;
  - privilege: a non-root user (65534), every capability dropped, ``no-new-privileges``;
  - fork bombs: ``pids_limit``; memory bombs: a container memory cgroup plus the runner's per-test RLIMIT_AS (MLE);
  - infinite output: the runner's RLIMIT_FSIZE (OLE); sleepers: the runner's wall guard and an overall deadline;
  - processes outliving the call: after every batch test the runner kills what it left (``kill(-1)`` once no other
    test runs; an interactive test kills its process group only, since its siblings run in other execs), and
    everything at release (a reaper as pid 1 collects them);
  - answers: they never enter the container (checkers run in the judge's process).
Does not protect against: kernel exploits (containers share the host kernel: use a VM, gVisor or Kata for
hostile code at scale), a compromised Docker daemon, side channels between containers, or one submission seeing
another's leftovers if the cleanup exec fails (the container is then discarded instead of reused).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import signal
import socket
import struct
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

from .peer import PeerWatch, mark_stop_requested
from .protocol import RUNNER_PATH, SandboxUnavailable, StartPeer, call_deadline_s, frame_spec, parse_events
from .runner import DEADLOCK_S

__all__ = ["docker_host", "DockerSandbox", "DockerSession"]

DEFAULT_SOCKET = "unix:///run/agentgspo-docker.sock"
# The tag changes with the image's contents (.ci/setup_sandboxes.sh), so older machines build it: 2 adds pypy3.
DEFAULT_IMAGE = "agentgspo-sandbox:2"
USER = "65534:65534"
# pid 1 of every container: reaps orphans forever. It must be pid 1 itself (not a child of an init), because
# the runner's kill(-1) spares only pid 1 and would otherwise stop the container.
REAPER = (
    "import os, time\nwhile True:\n    try:\n        os.wait()\n"
    "    except ChildProcessError:\n        time.sleep(0.2)\n"
)
SIGNAL_SCRIPT = "import os, sys\nos.kill(int(sys.argv[1]), int(sys.argv[2]))\n"
CLEANUP = ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; rm -rf /tmp/* /tmp/.[!.]* 2>/dev/null; exit 0"]


def docker_host() -> str:
    """The Docker socket the sandboxes use: ``$AGENTGSPO_DOCKER_HOST`` or the one ``.ci/setup_sandboxes.sh`` starts."""
    return os.environ.get("AGENTGSPO_DOCKER_HOST", DEFAULT_SOCKET)


class DockerSandbox:
    """Warm-container pool backend (see the module docstring for the threat model). Thread-safe.

    base_url: Docker daemon (default ``docker_host()``); image: sandbox image; pool_size: containers at most;
    acquire_timeout_s: how long a caller waits for a free container before an error; memory_mb, pids_limit,
    tmpfs_mb: per-container caps.
    """

    name = "docker"

    def __init__(
        self,
        base_url: str | None = None,
        image: str = DEFAULT_IMAGE,
        pool_size: int = 4,
        acquire_timeout_s: float = 300.0,
        memory_mb: int = 2048,
        pids_limit: int = 128,
        tmpfs_mb: int = 512,
    ) -> None:
        try:
            import docker
        except ImportError:
            raise SandboxUnavailable(
                "the docker backend needs the docker SDK: pip install 'agentgspo[docker]'"
            ) from None
        self.base_url = base_url or docker_host()
        try:
            self.client = docker.DockerClient(base_url=self.base_url, timeout=120)
            self.client.ping()
        except Exception as exc:
            raise SandboxUnavailable(
                f"Docker daemon not reachable at {self.base_url} ({exc}). Start it with "
                "`sudo bash .ci/setup_sandboxes.sh` (private dockerd and image) or set AGENTGSPO_DOCKER_HOST."
            ) from None
        try:
            # The image's content id: what the judge's compile cache keys programs compiled in it by.
            self.image_id = self.client.images.get(image).id
        except Exception:
            raise SandboxUnavailable(
                f"sandbox image {image!r} not found on {self.base_url}; "
                "build it with `sudo bash .ci/setup_sandboxes.sh`"
            ) from None
        self.image, self.pool_size, self.acquire_timeout_s = image, pool_size, acquire_timeout_s
        self.memory_mb, self.pids_limit, self.tmpfs_mb = memory_mb, pids_limit, tmpfs_mb
        self.runner_source = RUNNER_PATH.read_text()
        self._idle: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._created = 0
        self._all: list = []
        self._remove_stale()
        atexit.register(self.close)

    def _remove_stale(self) -> None:
        """Remove pool containers left by processes of this host that died without closing their pool."""
        import socket as _socket

        try:
            stale = self.client.containers.list(all=True, filters={"label": f"agentgspo.host={_socket.gethostname()}"})
        except Exception:
            return
        for container in stale:
            try:
                owner = int(container.labels.get("agentgspo.pid", "0"))
                os.kill(owner, 0)  # owner alive: leave it
            except ProcessLookupError:
                try:
                    container.remove(force=True)
                except Exception:
                    pass
            except (ValueError, PermissionError):
                pass

    # --- pool ---------------------------------------------------------------------------------------------
    def _create(self):
        return self.client.containers.run(
            self.image,
            ["python3", "-I", "-S", "-c", REAPER],
            detach=True,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={self.tmpfs_mb}m,mode=1777"},
            mem_limit=f"{self.memory_mb}m",
            memswap_limit=f"{self.memory_mb}m",
            pids_limit=self.pids_limit,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            user=USER,
            working_dir="/tmp",
            labels={
                "agentgspo.sandbox": "1",
                "agentgspo.host": socket.gethostname(),
                "agentgspo.pid": str(os.getpid()),
            },
            environment={"LANG": "C.UTF-8", "HOME": "/tmp"},
        )

    def _acquire(self):
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            grow = self._created < self.pool_size
            if grow:
                self._created += 1
        if grow:
            try:
                container = self._create()
            except Exception:
                with self._lock:
                    self._created -= 1
                raise
            with self._lock:
                self._all.append(container)
            return container
        try:
            return self._idle.get(timeout=self.acquire_timeout_s)
        except queue.Empty:
            raise TimeoutError(
                f"no free Docker sandbox within {self.acquire_timeout_s} s "
                f"(pool_size={self.pool_size}); raise pool_size or lower concurrency"
            ) from None

    def _release(self, container) -> None:
        def clean() -> None:
            try:
                result = container.exec_run(CLEANUP, user=USER)
                if result.exit_code != 0:
                    raise RuntimeError(result.output)
                self._idle.put(container)
            except Exception:
                self._discard(container)

        threading.Thread(target=clean, daemon=True).start()

    def _discard(self, container) -> None:
        try:
            container.remove(force=True)
        except Exception:
            pass
        with self._lock:
            self._created -= 1
            if container in self._all:
                self._all.remove(container)

    @contextmanager
    def session(self, limits_pids: int = 64) -> Iterator["DockerSession"]:
        """Lease a warm container for one submission (waits when the pool is exhausted)."""
        container = self._acquire()
        box = DockerSession(self, container)
        try:
            yield box
        finally:
            if box.broken:
                self._discard(container)
            else:
                self._release(container)

    def close(self) -> None:
        """Remove every container of this pool."""
        with self._lock:
            containers, self._all = list(self._all), []
        for container in containers:
            try:
                container.remove(force=True)
            except Exception:
                pass


class DockerSession:
    """One leased container (see ``sandboxes.protocol.Session``)."""

    isolated = True
    bin_dir = "/tmp/bin"
    pch_dir = "/opt/agentgspo/pch"

    def __init__(self, backend: DockerSandbox, container) -> None:
        self.backend, self.container, self.broken = backend, container, False
        # The container's memory cgroup also holds its tmpfs and the runner: keep a quarter of it for those.
        self.memory_budget_mb = backend.memory_mb * 3 / 4
        self.toolchain = f"docker-image:{backend.image_id}"  # the image holds the compilers

    def _exec_socket(self) -> socket.socket:
        api = self.backend.client.api
        exec_id = api.exec_create(
            self.container.id,
            ["python3", "-I", "-S", "-c", self.backend.runner_source],
            stdin=True,
            stdout=True,
            stderr=True,
            user=USER,
            workdir="/tmp",
        )["Id"]
        sock = api.exec_start(exec_id, socket=True)
        return getattr(sock, "_sock", sock)

    @staticmethod
    def _deadline(spec: dict, n_tests: int) -> float:
        return call_deadline_s(spec, n_tests, overhead_s=20.0)  # + container exec round trip

    def _read_frames(self, sock: socket.socket, deadline: float, on_stdout=None, on_stderr=None) -> tuple[bytes, bytes]:
        """Demultiplex the exec stream until EOF; stdout goes to on_stdout when given; on_stderr sees stderr as
        it arrives (it is returned too)."""
        out, err, buf = [], [], b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("sandbox call exceeded its overall deadline")
            sock.settimeout(remaining)
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 8:
                stream, size = buf[0], struct.unpack(">I", buf[4:8])[0]
                if len(buf) < 8 + size:
                    break
                payload, buf = buf[8 : 8 + size], buf[8 + size :]
                if stream == 1:
                    on_stdout(payload) if on_stdout else out.append(payload)
                else:
                    err.append(payload)
                    if on_stderr:
                        on_stderr(payload)
        return b"".join(out), b"".join(err)

    def call(self, spec: dict, inputs: list[bytes] | None = None) -> list[dict]:
        """Run the runner once in the container (modes compile/run)."""
        spec = dict(spec, kill_strays=True)
        if inputs is not None:
            spec["tests"] = [{"data": data} for data in inputs]
        try:
            sock = self._exec_socket()
            try:
                sock.sendall(frame_spec(spec))
                sock.shutdown(socket.SHUT_WR)
                out, err = self._read_frames(sock, time.monotonic() + self._deadline(spec, len(inputs or [])))
            finally:
                sock.close()
        except Exception as exc:
            self.broken = True
            return [{"event": "error", "message": f"docker exec failed: {type(exc).__name__}: {exc}"}]
        return parse_events(out, err.decode("utf-8", "replace"))

    def interact(self, spec: dict, start_peer: StartPeer, stop_when=None) -> list[dict]:
        """One interactive test: the exec's stdin/stdout are relayed to and from the peer process.

        The runner relays the solution's stdout through a pipe of its own (``relay_stdout``): when the peer exits
        or stops reading, it is told to close that pipe (SIGUSR1, sent with an exec), so the solution's next write
        fails as it does on the local backend instead of being drained forever; a peer exit that ``stop_when``
        accepts stops the solution (SIGUSR2), and a peer blocked for DEADLOCK_S while nothing was relayed either way
        is reported (SIGURG: the runner ends a deadlock). Several may run at once in one container: each gets its
        own scratch directory, and strays of one test are not killed with ``kill(-1)`` (that would end its siblings);
        they die with the session."""
        spec = dict(spec, kill_strays=False, relay_stdout=True, tmp=f"/tmp/i{uuid.uuid4().hex[:12]}")
        to_peer_r, to_peer_w = os.pipe()
        from_peer_r, from_peer_w = os.pipe()
        try:
            sock = self._exec_socket()
            sock.sendall(frame_spec(spec))
            peer = start_peer(to_peer_r, from_peer_w)
        except Exception as exc:
            self.broken = True
            for fd in (to_peer_r, to_peer_w, from_peer_r, from_peer_w):
                os.close(fd)
            return [{"event": "error", "message": f"docker exec failed: {type(exc).__name__}: {exc}"}]
        os.close(to_peer_r)
        os.close(from_peer_w)
        runner = _RunnerSignals(self)
        relayed = [time.monotonic()]  # when bytes last went either way between the peer and the box
        pump_stop_r, pump_stop_w = os.pipe()  # a byte here: the box is gone, stop reading the peer

        def pump_to_box() -> None:
            poller = select.poll()
            poller.register(from_peer_r, select.POLLIN)
            poller.register(pump_stop_r, select.POLLIN)
            try:
                while True:
                    if any(fd == pump_stop_r for fd, _ in poller.poll()):
                        break
                    data = os.read(from_peer_r, 1 << 16)
                    if not data:
                        break
                    relayed[0] = time.monotonic()
                    sock.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                os.close(from_peer_r)

        def to_peer(data: bytes) -> None:
            relayed[0] = time.monotonic()
            try:
                os.write(to_peer_w, data)
            except OSError:  # the peer stopped reading: the solution must see it (its writes fail, as locally)
                runner.send(signal.SIGUSR1)

        def on_peer_exit(stop: bool) -> None:
            runner.send(signal.SIGUSR2 if stop else signal.SIGUSR1)

        pump = threading.Thread(target=pump_to_box, daemon=True)
        pump.start()

        def on_peer_idle() -> None:
            if runner.pid is not None and time.monotonic() - relayed[0] >= DEADLOCK_S:
                runner.send(signal.SIGURG, repeat=True)

        watch = PeerWatch(peer, stop_when, on_peer_exit, on_idle=on_peer_idle)
        try:
            _, err = self._read_frames(
                sock, time.monotonic() + self._deadline(spec, 1), on_stdout=to_peer, on_stderr=runner.look_for_pid
            )
        except Exception as exc:
            self.broken = True
            err = f'{{"event": "error", "message": "docker exec failed: {type(exc).__name__}"}}'.encode()
        finally:
            stop_requested = watch.finish()
            runner.finish()
            # The runner is gone: close the peer's output pipe (the pump stops reading it; the shutdown wakes it if
            # it is blocked sending to the exec, which reads nothing any more), and only then give the peer EOF.
            # So a peer that writes once the solution has ended fails (SIGPIPE, EPIPE) as on the local backend,
            # whose box holds the read end until its runner exits, instead of blocking or depending on timing.
            os.write(pump_stop_w, b"x")
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            pump.join(timeout=5)
            os.close(to_peer_w)
            sock.close()
            os.close(pump_stop_r)
            os.close(pump_stop_w)
        del peer
        return mark_stop_requested(parse_events(err), stop_requested)


class _RunnerSignals:
    """Sends command signals to one interact-mode runner in the container (its pid from its ``started`` event)."""

    def __init__(self, session: DockerSession) -> None:
        self.session, self.pid, self.sent = session, None, set()
        self._lock = threading.Lock()
        self._seen = b""
        self._finished = False
        self._pid_known = threading.Event()

    def look_for_pid(self, chunk: bytes) -> None:
        """Fed the runner's stderr as it arrives: remembers the pid of its ``started`` event."""
        if self.pid is not None:
            return
        self._seen += chunk
        for line in self._seen.splitlines():
            if line.startswith(b'{"event":"started"'):
                self.pid = int(json.loads(line)["pid"])
                self._pid_known.set()
                return

    def send(self, sig: int, repeat: bool = False) -> None:
        """Signal the runner (a docker exec) once per signal, or each time with ``repeat``, unless the test is
        over."""
        self._pid_known.wait(timeout=10)
        with self._lock:
            if self._finished or self.pid is None or (sig in self.sent and not repeat):
                return
            self.sent.add(sig)
            api = self.session.backend.client.api
            exec_id = api.exec_create(
                self.session.container.id,
                ["python3", "-I", "-S", "-c", SIGNAL_SCRIPT, str(self.pid), str(int(sig))],
                user=USER,
            )["Id"]
            api.exec_start(exec_id)

    def finish(self) -> None:
        """The runner is done: send nothing more (its pid may be reused)."""
        with self._lock:
            self._finished = True
        self._pid_known.set()
