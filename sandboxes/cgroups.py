"""Per-sandbox cgroups (pids and memory caps) when this process may create them (root), v1 or v2.

A pid namespace alone does not stop a fork bomb from exhausting the host's pid table, and RLIMIT_NPROC is ignored
for root; a ``pids`` cgroup does both. The memory cap here is a backstop for the whole box (the per-test limit is
an rlimit set by the runner).
"""

from __future__ import annotations

import os
import signal
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path("/sys/fs/cgroup")


def _v1_dirs() -> list[Path]:
    return [ROOT / c for c in ("pids", "memory") if (ROOT / c / "cgroup.procs").exists()]


def available() -> bool:
    """True when a per-box cgroup can be created (root with a writable pids controller)."""
    if os.geteuid() != 0:
        return False
    if (ROOT / "pids" / "cgroup.procs").exists():
        return os.access(ROOT / "pids", os.W_OK)
    return (ROOT / "cgroup.controllers").exists() and "pids" in (ROOT / "cgroup.controllers").read_text()


def _thread_cgroups() -> dict[str, str]:
    """The calling thread's cgroup path in each v1 hierarchy, by controller name ({} where unreadable)."""
    homes: dict[str, str] = {}
    try:
        lines = Path("/proc/thread-self/cgroup").read_text().splitlines()
    except OSError:
        return homes
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller:
                homes[controller] = path
    return homes


class BoxCgroup:
    """pids.max and a memory cap for one box; ``add(pid)`` before untrusted code runs, ``destroy()`` at the end."""

    def __init__(self, pids_max: int, memory_bytes: int) -> None:
        name = f"agentgspo-{uuid.uuid4().hex[:12]}"
        self.dirs: list[Path] = []
        if (ROOT / "pids" / "cgroup.procs").exists():  # cgroup v1: one hierarchy per controller
            for base in _v1_dirs():
                path = base / "agentgspo" / name
                path.mkdir(parents=True)
                self.dirs.append(path)
                if base.name == "pids":
                    (path / "pids.max").write_text(str(pids_max))
                else:
                    (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    try:  # include swap in the cap where swap accounting exists
                        (path / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                    except OSError:
                        pass
        else:  # cgroup v2: one directory, controllers enabled in the parent
            parent = ROOT / "agentgspo"
            parent.mkdir(exist_ok=True)
            try:
                (ROOT / "cgroup.subtree_control").write_text("+pids +memory")
                (parent / "cgroup.subtree_control").write_text("+pids +memory")
            except OSError:
                pass
            path = parent / name
            path.mkdir()
            self.dirs.append(path)
            (path / "pids.max").write_text(str(pids_max))
            if (path / "memory.max").exists():
                (path / "memory.max").write_text(str(memory_bytes))

    def add(self, pid: int) -> None:
        """Move ``pid`` (and so all its future children) into the box's cgroups."""
        for path in self.dirs:
            (path / "cgroup.procs").write_text(str(pid))

    @contextmanager
    def forking_inside(self) -> Iterator[bool]:
        """While open, processes forked by the calling thread start inside the box; yields whether it could.

        cgroup v1 only: the thread moves itself in (writing 0 to ``tasks``) and back out at the end. A thread
        moving itself skips the kernel's global migration lock, which makes ``add(pid)`` wait for an RCU grace
        period (~10 ms per box). Yields False (nothing moved: use ``add``) on cgroup v2 or any failure.
        """
        back = _thread_cgroups()
        moved: list[Path] = []
        try:
            for path in self.dirs:
                home = back.get(path.parent.parent.name)
                if home is None or path.parent.parent.parent != ROOT:
                    break
                (path / "tasks").write_text("0")
                moved.append(path.parent.parent / home.lstrip("/"))
        except OSError:
            pass
        try:
            yield len(moved) == len(self.dirs) > 0
        finally:
            failed = []
            for home_dir in moved:
                try:
                    (home_dir / "tasks").write_text("0")
                except OSError as exc:
                    failed.append(f"{home_dir}: {exc}")
            if failed:
                raise OSError(f"could not move the thread back out of the box cgroup: {'; '.join(failed)}")

    def _members(self) -> set[int]:
        pids: set[int] = set()
        for path in self.dirs:
            try:
                pids.update(int(p) for p in (path / "cgroup.procs").read_text().split())
            except OSError:
                pass
        pids.discard(os.getpid())  # never ourselves, should a thread of ours still sit inside
        return pids

    def kill(self) -> None:
        """SIGKILL every process in the box, again while new ones appear (a fork racing the first pass), without
        waiting for them to go: when this returns, each process in the box has a SIGKILL pending and will run no
        more code of its own. ``destroy`` then waits for them to be gone."""
        killed: set[int] = set()
        for _ in range(50):
            fresh = self._members() - killed
            if not fresh:
                return
            for pid in fresh:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            killed |= fresh

    def destroy(self) -> None:
        """Kill every process still in the box, wait (up to ~0.25 s) for them to be gone, then remove the cgroups."""
        for _ in range(50):
            pids = self._members()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            import time

            time.sleep(0.005)
        for path in self.dirs:
            try:
                path.rmdir()
            except OSError:
                pass
