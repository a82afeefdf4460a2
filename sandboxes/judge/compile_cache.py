"""A content-addressed cache of compiled programs: a source the judge compiled once is not compiled again.

RL groups and pass@k samples repeat programs, and ``validate-problems`` compiles the same calibration program for
every problem; the judge (``core._compile``) looks each C, C++ and PyPy submission up here before compiling it.

Key: SHA-256 over the source bytes, the language, the toolchain's identity, the compile argv and the runner's
version. The toolchain: on the local backend ("host") the compiler as the box finds it (on ``/usr/bin:/bin``, the
box binds this machine's ``/usr``): its resolved path, size, mtime and ``--version`` output; in Docker the image id
(``docker-image:sha256:...``), which holds the compiler. The argv: the compile step's exact argv (flags, the
precompiled header's directory), with the session's binary directory written ``{bin}``. The runner's version: a
hash of ``sandboxes/runner.py``. An entry made by another compiler, image, flag set or runner is never used.

Entries: ``$AGENTGSPO_CACHE/compile/entries/KEY`` (the base: ``core.paths.cache_root()``), each the program the
compile step left (a C/C++ binary, PyPy's launcher), the compiler's output, and a SHA-256 over them and the key; a
file that does not check is removed and read as a miss. Only what compiled (exit status 0) from a non-empty source
is stored, up to half the cache's size and 64 MB: a compile error is never cached (it is compiled, and reported,
again). An entry is published at most once, atomically (``compile.build_once``: a temporary name, then a rename):
the first judge of a key holds the key's lock (``flock`` on one of 4096 lock files under ``compile/locks/``, safe
across threads and processes, the sandbox server included, which judges with this same code) while it compiles, so
a second judge of the same source waits and then reads the entry instead of compiling it too.

Size: ``AGENTGSPO_COMPILE_CACHE_MB`` (a whole number of MB, default 512; 0 turns the cache off). After each store
the least recently used entries (each hit touches its mtime) are removed until the entries fit.

Where it applies: sessions that name their toolchain (``Session.toolchain``): the local backend and Docker. The
remote backend has no session in this process: its server judges with its own cache (its verdicts carry the
server's ``compile_cache``, and the server's process counts them). CPython has no compile step: "off".

Threat model: a cached program enters a box only as data: the runner writes a fresh copy (mode 0555) into the box's
binary directory, which the local backend binds read-only while the tests run. The cache's files never enter a box,
so a solution can change at most its own copy. What is stored is what the box's compiler produced from the source
before any of the solution's code ran (compilation is the session's first call). It does not protect against a
user who can write ``$AGENTGSPO_CACHE``: such a user can replace a program (the checksum catches accidents, not
forgeries).

Failures of the cache itself (an unwritable or corrupt directory, a full disk) never change a verdict: the source is
compiled in the box as without a cache (a "miss"), and the first failure of each kind is logged as a warning.

Metrics: ``JudgeResult.compile_cache`` ("hit", "miss" or "off") and ``STATS``, this process's counts of hits,
misses, stores, evictions and errors (``STATS.snapshot()``).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentgspo.core.paths import cache_root

from ..protocol import RUNNER_PATH
from .compile import build_once

__all__ = [
    "SETTING",
    "DEFAULT_MB",
    "CompileCacheStats",
    "STATS",
    "Entry",
    "CompileCache",
    "cache_limit_bytes",
    "open_cache",
    "host_compiler_identity",
    "toolchain_identity",
    "compile_key",
    "compile_cached",
]

logger = logging.getLogger(__name__)

SETTING = "AGENTGSPO_COMPILE_CACHE_MB"
DEFAULT_MB = 512
MAX_ENTRY_BYTES = 64 << 20  # and at most half the cache: one entry never evicts the whole cache
KEY_VERSION = "1"  # bump when the key's parts or the entry format change
BOX_PATH = "/usr/bin:/bin"  # the PATH the local box runs its compilers from (local.py)
LOCK_STRIPES = 3  # hex digits of the key naming its lock file: 4096 lock files at most
STALE_TMP_S = 3600  # a temporary entry this old was left by a process that died mid-write
_MAGIC = b"agentgspo compile cache entry\n"
_DIGEST = 32
_KEY_HEX = 64


@dataclass
class CompileCacheStats:
    """This process's compile-cache counts (thread-safe): ``hits`` (a program served from the cache), ``misses``
    (compiled in the box while the cache was on), ``stores`` (entries written), ``evictions`` (entries removed for
    size) and ``errors`` (failures of the cache itself: unwritable, corrupt)."""

    hits: int = 0
    misses: int = 0
    stores: int = 0
    evictions: int = 0
    errors: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add ``counts`` (``hits=1``...)."""
        with self._lock:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)

    def snapshot(self) -> dict[str, int]:
        """The counts now, as a plain dict."""
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "stores": self.stores,
                "evictions": self.evictions,
                "errors": self.errors,
            }


#: The process-wide counts.
STATS = CompileCacheStats()
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _failed(kind: str, message: str) -> None:
    """Count a failure of the cache and warn about the first one of each ``kind`` in this process."""
    STATS.add(errors=1)
    with _warned_lock:
        if kind in _warned:
            return
        _warned.add(kind)
    logger.warning("compile cache: %s; judging goes on without it (compiling in the sandbox)", message)


def cache_limit_bytes() -> int:
    """The cache's size in bytes from ``AGENTGSPO_COMPILE_CACHE_MB`` (default 512 MB; 0: off); ValueError names the
    setting and the fix when it is not a whole number >= 0."""
    raw = os.environ.get(SETTING, "").strip()
    if not raw:
        return DEFAULT_MB << 20
    try:
        megabytes = int(raw)
    except ValueError:
        megabytes = -1
    if megabytes < 0:
        raise ValueError(
            f"{SETTING}={raw!r}: expected a whole number of megabytes >= 0 (the compile cache's size; 0 turns it "
            f"off), e.g. {SETTING}={DEFAULT_MB}, or unset it for the default {DEFAULT_MB}"
        )
    return megabytes << 20


@dataclass(frozen=True)
class Entry:
    """A cached compile: the ``program`` the compile step left and the compiler's ``output`` (its warnings)."""

    program: bytes
    output: str


def _pack(key: str, entry: Entry) -> bytes:
    output = entry.output.encode("utf-8", "replace")
    body = len(output).to_bytes(8, "big") + output + entry.program
    return _MAGIC + key.encode() + hashlib.sha256(key.encode() + body).digest() + body


def _unpack(key: str, data: bytes) -> Entry | None:
    """The entry ``data`` holds for ``key``; None when it is not one (truncated, altered, another key's)."""
    start = len(_MAGIC) + _KEY_HEX + _DIGEST
    if len(data) < start + 8 or data[: len(_MAGIC) + _KEY_HEX] != _MAGIC + key.encode():
        return None
    body = data[start:]
    if hashlib.sha256(key.encode() + body).digest() != data[start - _DIGEST : start]:
        return None
    size = int.from_bytes(body[:8], "big")
    program = body[8 + size :]
    if 8 + size > len(body) or not program:
        return None
    return Entry(program, body[8 : 8 + size].decode("utf-8", "replace"))


class CompileCache:
    """The entries under ``root`` (``entries/KEY``, ``locks/``), at most ``limit_bytes`` in all."""

    def __init__(self, root: Path, limit_bytes: int) -> None:
        if limit_bytes <= 0:
            raise ValueError(f"a compile cache needs limit_bytes > 0, got {limit_bytes} (0 means no cache: use None)")
        self.root = Path(root)
        self.entries = self.root / "entries"
        self.locks = self.root / "locks"
        self.limit_bytes = limit_bytes

    @property
    def max_entry_bytes(self) -> int:
        """The largest entry stored: half the cache, at most MAX_ENTRY_BYTES."""
        return min(MAX_ENTRY_BYTES, self.limit_bytes // 2)

    def path(self, key: str) -> Path:
        """Where ``key``'s entry lives."""
        return self.entries / key

    def lock_path(self, key: str) -> Path:
        """The lock file ``key`` shares with the keys of its first LOCK_STRIPES hex digits."""
        return self.locks / f"{key[:LOCK_STRIPES]}.lock"

    def read(self, key: str) -> Entry | None:
        """``key``'s entry, its mtime touched (least recently used goes first); None when absent. A corrupt one is
        removed (with a warning) and read as absent."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            _failed("unreadable", f"cannot read {path} ({exc})")
            return None
        entry = _unpack(key, data)
        if entry is None:
            _failed("corrupt", f"{path} is not a valid entry (truncated or altered): removed")
            try:
                path.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(path)
        except OSError:
            pass  # a read-only cache still serves its entries
        return entry

    def store(self, key: str, build: Callable[[], Entry | None]) -> tuple[Entry | None, bool]:
        """``key``'s entry, made by ``build()`` under the key's lock unless another judge made it first (then
        ``build`` is not called). Returns (entry, built): ``build`` returning None (a compile error) stores nothing.
        Raises OSError when the cache cannot be written (compile_cached keeps what ``build`` returned)."""
        made: list[Entry] = []

        class _NotStored(Exception):
            pass

        def write(tmp: Path) -> None:
            entry = build()
            if entry is None:
                raise _NotStored
            made.append(entry)
            if len(entry.program) > self.max_entry_bytes:
                raise _NotStored
            tmp.write_bytes(_pack(key, entry))

        try:
            build_once(self.entries, key, write, lock=self.lock_path(key))
        except _NotStored:
            return (made[0] if made else None), bool(made)
        if made:
            STATS.add(stores=1)
            self.evict()
            return made[0], True
        return self.read(key), False

    def evict(self) -> None:
        """Remove the least recently used entries until the rest fit in ``limit_bytes`` (and temporary files left by
        dead processes); skipped while another process evicts."""
        try:
            with open(self.root / ".evict.lock", "w") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return
                self._evict_locked()
        except OSError as exc:
            _failed("evict", f"cannot evict entries under {self.root} ({exc})")

    def _evict_locked(self) -> None:
        now = time.time()
        found = []
        for item in os.scandir(self.entries):
            try:
                stat = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if ".tmp" in item.name:
                if now - stat.st_mtime > STALE_TMP_S:
                    try:
                        os.unlink(item.path)
                    except FileNotFoundError:
                        pass
                continue
            found.append((stat.st_mtime_ns, stat.st_size, item.path))
        total = sum(size for _, size, _ in found)
        for _, size, path in sorted(found):
            if total <= self.limit_bytes:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            total -= size
            STATS.add(evictions=1)


def open_cache() -> CompileCache | None:
    """The cache of this process's settings (``$AGENTGSPO_CACHE/compile``, ``AGENTGSPO_COMPILE_CACHE_MB``), or None
    when turned off (0 MB)."""
    limit = cache_limit_bytes()
    return CompileCache(cache_root() / "compile", limit) if limit else None


_identities: dict[tuple, str] = {}
_identities_lock = threading.Lock()


def host_compiler_identity(tool: str) -> str | None:
    """What identifies ``tool`` (``g++``, ``gcc``, ``/usr/bin/pypy3``) as the local box runs it: its path on the
    box's PATH resolved, its size and mtime, and its ``--version`` output (run once per resolved file, size and
    mtime). None when it is not installed or does not answer."""
    found = shutil.which(tool, path=BOX_PATH)
    if found is None:
        return None
    real = os.path.realpath(found)
    try:
        stat = os.stat(real)
    except OSError:
        return None
    memo = (real, stat.st_size, stat.st_mtime_ns)
    with _identities_lock:
        if memo in _identities:
            return _identities[memo]
    try:
        done = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    identity = f"{real} {stat.st_size} {stat.st_mtime_ns}\n{done.stdout}{done.stderr}"
    with _identities_lock:
        _identities[memo] = identity
    return identity


def toolchain_identity(box, compiler: str) -> str | None:
    """The toolchain part of a key for a compile by ``compiler`` in ``box``: the session's ``toolchain`` ("host":
    this machine's ``compiler``, see host_compiler_identity; anything else names itself, e.g. a Docker image id);
    None (no cache) for a session that names none or a host compiler that cannot be identified."""
    toolchain = getattr(box, "toolchain", "")  # a Session of another backend may not name one: no cache
    if toolchain == "host":
        identity = host_compiler_identity(compiler)
        return None if identity is None else f"host\n{identity}"
    return toolchain or None


@functools.lru_cache(maxsize=1)
def _runner_version() -> str:
    return hashlib.sha256(RUNNER_PATH.read_bytes()).hexdigest()


def compile_key(source: str, language: str, toolchain: str, argv: Sequence[str]) -> str:
    """SHA-256 (hex) over the key's parts (see the module docstring), each length-prefixed."""
    digest = hashlib.sha256()
    parts = (KEY_VERSION, language, toolchain, json.dumps(list(argv)), _runner_version())
    for part in (*(p.encode() for p in parts), source.encode("utf-8", "surrogatepass")):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def compile_cached(
    cache: CompileCache | None,
    key: str,
    compile_in_box: Callable[[bool], tuple[object, Entry | None]],
    place_in_box: Callable[[Entry], object],
):
    """The compile step through the cache: returns (outcome, "hit" | "miss" | "off").

    ``compile_in_box(keep)`` compiles in the box and returns (outcome, the Entry to store or None: a compile error,
    or ``keep`` False); ``place_in_box(entry)`` puts a cached program into the box and returns the outcome. With no
    cache (or no key) it compiles: "off". A failing cache compiles without it: "miss"."""
    if cache is None or not key:
        return compile_in_box(False)[0], "off"
    outcome: list[object] = []

    def build() -> Entry | None:
        result, entry = compile_in_box(True)
        outcome.append(result)
        return entry

    for _ in range(2):  # a second time after an entry that vanished or did not check
        try:
            entry, built = cache.store(key, build)
        except OSError as exc:
            _failed("unwritable", f"cannot write {cache.root} ({exc})")
            break
        if built or outcome:
            STATS.add(misses=1)
            return outcome[0], "miss"
        if entry is not None:
            STATS.add(hits=1)
            return place_in_box(entry), "hit"
    STATS.add(misses=1)
    return (outcome[0] if outcome else compile_in_box(False)[0]), "miss"
