"""The results store of one eval folder: ``DIR/eval.json`` (what is evaluated) and ``DIR/results.jsonl`` (one
line per finished attempt, appended and flushed to disk as each attempt ends).

An interrupted eval resumes: the same command finds the attempts already in ``results.jsonl`` (keyed by problem id
and sample index) and runs only the others. An attempt whose ending is re-queueable (``requeue`` in
:data:`agentgspo.core.trajectory.ENDINGS`: a failed sampler or judge, a hung env call, dead infrastructure: no one's
answer) is not final: a resumed eval plays it again, and its new line replaces the old one (which stays in the
file). A last line cut short by a kill is dropped (it was not finished); any other unreadable line is an error
naming it. A second final line for an attempt already read (e.g. two runs that wrote into one folder) is dropped:
the first final line of each ``(problem_id, sample)`` counts, so no attempt weighs twice in pass@k; how many were
dropped is :attr:`ResultsStore.dropped_duplicates`, and a line on stderr says so.

``eval.json`` pins what the results mean (problem source, agent, policy, env options, sampling): rerunning into the
folder with different settings is an error instead of a mix, and so are results whose ``eval.json`` is missing
(nothing left to check them against). One eval at a time writes a folder: a store holds an exclusive lock on
``DIR/.lock`` (``fcntl.flock``) while it is open, and a second process opening the folder fails at once, naming the
holder's pid. Stores opened on one folder within one process share the lock; it is released by :meth:`close`, when
the last of them is garbage-collected, or when the process ends (a kill included).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from agentgspo.core.trajectory import ENDINGS

try:
    import fcntl
except ImportError:  # not POSIX: no folder lock
    fcntl = None

__all__ = ["ResultsStore"]

REQUEUE_STOPS = tuple(reason for reason, ending in ENDINGS.items() if ending.requeue)
RESULTS = "results.jsonl"
CONFIG = "eval.json"
LOCK = ".lock"

_held: dict[str, list[int]] = {}  # folder (real path) -> [lock file descriptor, stores using it] in this process
_held_guard = threading.Lock()


def _lock_folder(folder: Path) -> str | None:
    """Take ``folder``'s lock for this process (shared by its stores); the key to release it with, ``None`` where
    the file system has no locks. Raises ``ValueError`` naming the holder when another process has it."""
    key = os.path.realpath(folder)
    with _held_guard:
        if key in _held:
            _held[key][1] += 1
            return key
        if fcntl is None:
            return None
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                return None  # e.g. ENOLCK: a file system without locks
            raise ValueError(
                f"{folder} is in use by another eval (pid {holder or '?'}), which holds {folder / LOCK} "
                "until it ends; wait for it, or pass another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[key] = [fd, 1]
        return key


def _unlock_folder(key: str | None) -> None:
    """Release one store's use of a folder's lock (the lock itself goes with the last one)."""
    if key is None:
        return
    with _held_guard:
        held = _held.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _held[key]
            os.close(held[0])  # closing the descriptor releases the flock


class ResultsStore:
    """Append-only results of one eval folder (thread-safe appends). ``identity`` is compared with the folder's
    ``eval.json``; other ``settings`` (samples, k) may change between runs.

    Attributes:
        results: one result per ``(problem_id, sample)``: its first final line, else its latest re-queueable one (to
            be played again); then appends, each replacing a re-queueable result of its attempt.
        dropped_duplicates: final lines of ``results.jsonl`` left out as repeats of an attempt read before.
        requeued: attempts read whose ending is re-queueable (not in :meth:`done`: a resumed eval replays them).
    """

    def __init__(self, out: str | Path, identity: dict[str, Any], settings: dict[str, Any] | None = None):
        self.out = Path(out)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"--out {str(out)!r}: cannot create the output folder ({exc.strerror}); pass a writable folder"
            ) from None
        self.path = self.out / RESULTS
        self._lock = threading.Lock()
        self.dropped_duplicates = self.requeued = 0
        key = _lock_folder(self.out)
        self._release = weakref.finalize(self, _unlock_folder, key)
        try:
            self._open(identity, settings)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the folder for other processes (once every store of this process on it is closed or gone)."""
        self._release()

    def _open(self, identity: dict[str, Any], settings: dict[str, Any] | None) -> None:
        config_path = self.out / CONFIG
        has_results = self.path.exists() and self.path.stat().st_size > 0
        if has_results and not config_path.exists():
            raise ValueError(
                f"{self.path} holds results but {config_path}, which records the settings they were "
                f"made with, is missing: nothing to check this run's settings against. Pass another "
                f"--out for a new eval, or restore {config_path.name} to resume this one"
            )
        if config_path.exists():
            stored = json.loads(config_path.read_text()).get("identity")
            if has_results and stored != json.loads(json.dumps(identity)):
                changed = sorted(
                    k
                    for k in set(stored or {}) | set(identity)
                    if (stored or {}).get(k) != json.loads(json.dumps(identity)).get(k)
                )
                raise ValueError(
                    f"{self.out} holds an eval with other settings ({', '.join(changed)} differ); "
                    "rerun with the same options to resume it, or pass another --out"
                )
        config_path.write_text(json.dumps({"identity": identity, "settings": settings or {}}, indent=2) + "\n")
        self.results = self._first_of_each(self._read())

    def _first_of_each(self, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One line per attempt (see ``results``); counts the final repeats in ``dropped_duplicates`` and says so on
        stderr."""
        chosen: dict[tuple[Any, Any], dict[str, Any]] = {}
        duplicates = 0
        for r in lines:
            key = (r.get("problem_id"), r.get("sample"))
            if key in chosen and _final(chosen[key]):
                duplicates += _final(r)  # a re-queueable line after a final one is an older run's retry: no repeat
            else:
                chosen[key] = r
        results = list(chosen.values())
        self.dropped_duplicates = duplicates
        self.requeued = sum(not _final(r) for r in results)
        if self.dropped_duplicates:
            print(
                f"eval: {self.path} holds {self.dropped_duplicates} duplicate attempt line(s) (same problem_id and "
                "sample, e.g. from two runs into one --out); the first line of each is used",
                file=sys.stderr,
            )
        return results

    def _read(self) -> list[dict[str, Any]]:
        """Lines so far; a truncated last line (killed mid-write) is cut off the file."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        results, offset = [], 0
        for number, line in enumerate(data.split(b"\n"), start=1):
            end = offset + len(line)
            if line.strip():
                try:
                    results.append(json.loads(line))
                except json.JSONDecodeError:
                    if end < len(data):  # not the last line: the file is damaged, not just cut short
                        raise ValueError(
                            f"{self.path}:{number} is not valid JSON; delete that line to rerun the attempt"
                        ) from None
                    with open(self.path, "r+b") as f:
                        f.truncate(offset)
                    return results
            offset = end + 1
        if data and not data.endswith(b"\n"):  # a whole line whose newline was not written: complete it
            with open(self.path, "ab") as f:
                f.write(b"\n")
        return results

    def done(self) -> set[tuple[str, int]]:
        """``(problem_id, sample)`` of every stored attempt with a final ending (the others are played again)."""
        return {(r["problem_id"], r["sample"]) for r in self.results if _final(r)}

    def append(self, result: dict[str, Any]) -> None:
        """Write one finished attempt as a line and force it to disk (a kill after this keeps it); it replaces a
        re-queueable result of the same attempt."""
        line = json.dumps(result, allow_nan=True) + "\n"
        key = (result.get("problem_id"), result.get("sample"))
        with self._lock:
            with open(self.path, "a") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self.results = [r for r in self.results if (r.get("problem_id"), r.get("sample")) != key or _final(r)]
            self.results.append(result)


def _final(result: dict[str, Any]) -> bool:
    """Whether a stored attempt is final: its ending is not re-queueable (see the module docstring)."""
    return result.get("stop_reason") not in REQUEUE_STOPS
