"""How sources are compiled: the compile step of each language (``languages.py``), and the precompiled
``bits/stdc++.h`` cached on the host.

Compilation itself always happens inside the sandbox (a source is untrusted: ``#include "/etc/..."`` must see
nothing); only the precompiled header, built from the trusted system header, is made on the host, once per
compiler version and flag set, and bound read-only into the boxes.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

from agentgspo.core.paths import cache_root

from .languages import LANGUAGES, get_language
from .languages import SUFFIXES, language_of, normalize_language  # noqa: F401 -- their old home re-exports them

#: Flags of every C++ compile; the precompiled header is only used when built with exactly these.
CPP_FLAGS = list(LANGUAGES["cpp"].flags)
# PyPy's compile step (problemtools: ``pypy3 -m py_compile``): a syntax error is CE; else it writes the program the
# runner executes, ``PYPY_GC_MAX=LIMIT exec pypy3 SOURCE`` (argv, line numbers and tracebacks as ``pypy3
# solution.py`` gives them; the heap limit makes an allocation beyond the memory limit a MemoryError, i.e. MLE).
# SOURCE is found beside the launcher (``${0%/*}``, the launcher's own directory, where the source stays), so the
# launcher holds no path of one box and the compile cache can place it in another.
PYPY_CHECK = """import os, shlex, sys, traceback
source, program, heap_kb, interpreter = sys.argv[1:5]
try:
    with open(source, "rb") as f:
        compile(f.read(), "solution.py", "exec", dont_inherit=True)
except (SyntaxError, ValueError) as exc:
    sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
    sys.exit(1)
name = shlex.quote(os.path.basename(source))
with open(program, "w") as f:
    f.write('#!/bin/sh\\nPYPY_GC_MAX=%sKB exec %s "${0%%/*}"/%s\\n' % (heap_kb, shlex.quote(interpreter), name))
os.chmod(program, 0o755)
"""
_pch_lock = threading.Lock()
_pch_dir: Path | None = None


def cpp_compile_command(source_path: str, binary_path: str, pch_dir: str = "") -> list[str]:
    """The g++ argv that builds ``binary_path``; with ``pch_dir`` the precompiled bits/stdc++.h is found first."""
    include = ["-I", pch_dir, "-Winvalid-pch"] if pch_dir else []
    return ["g++", *CPP_FLAGS, *include, "-o", binary_path, source_path, "-lm"]


def source_name(lang: str) -> str:
    """The file name a ``lang`` source is compiled from (``solution.cpp``, ``solution.c``, ``solution.py``)."""
    language = get_language(lang)
    return "solution" + (language.suffixes[0] if language.suffixes else ".py").lower()


def compile_command(lang: str, source_path: str, binary_path: str, pch_dir: str = "", memory_limit_mb: float = 0):
    """The argv of ``lang``'s compile step inside the box, which leaves the program to execute at ``binary_path``;
    None for CPython (the runner compiles it). ``memory_limit_mb``: PyPy's heap limit (PYPY_GC_MAX)."""
    language = get_language(lang)
    if language.in_runner:
        return None
    if language.name == "cpp":
        return cpp_compile_command(source_path, binary_path, pch_dir)
    if language.interpreted:
        heap_kb = str(int(memory_limit_mb * 1024))
        return [*language.compiler, "-c", PYPY_CHECK, source_path, binary_path, heap_kb, language.compiler[0]]
    return [*language.compiler, *language.flags, "-o", binary_path, source_path, "-lm"]


def _stdcpp_header() -> str | None:
    probe = subprocess.run(
        ["g++", *CPP_FLAGS, "-x", "c++", "-E", "-H", "-", "-o", os.devnull],
        input="#include <bits/stdc++.h>\n",
        capture_output=True,
        text=True,
    )
    for line in probe.stderr.splitlines():
        if line.startswith(". ") and line.endswith("bits/stdc++.h"):
            return line[2:].strip()
    return None


def host_pch_dir(build: bool = False) -> Path | None:
    """Directory holding ``bits/stdc++.h.gch`` for this g++ and CPP_FLAGS, or None.

    With ``build=True`` it is built once (about a second) under ``$AGENTGSPO_CACHE`` or ``~/.cache/agentgspo``,
    safely across threads and processes. Returns None when g++ is missing or the build fails (compiles then just
    take longer).
    """
    global _pch_dir
    with _pch_lock:
        if _pch_dir is not None or not build:
            return _pch_dir
        if shutil.which("g++") is None:
            return None
        version = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
        key = hashlib.sha256((version + " ".join(CPP_FLAGS)).encode()).hexdigest()[:16]
        target = cache_root() / "pch" / key
        gch = target / "bits" / "stdc++.h.gch"
        if not gch.exists():
            header = _stdcpp_header()
            if header is None:
                return None
            gch.parent.mkdir(parents=True, exist_ok=True)
            with open(target / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not gch.exists():
                    tmp = gch.with_suffix(f".tmp{os.getpid()}")
                    done = subprocess.run(
                        ["g++", *CPP_FLAGS, "-x", "c++-header", header, "-o", str(tmp)], capture_output=True
                    )
                    if done.returncode != 0:
                        return None
                    os.chmod(tmp, 0o644)
                    os.replace(tmp, gch)
        for path in (target, target / "bits"):
            os.chmod(path, 0o755)
        _pch_dir = target
        return _pch_dir


def build_once(directory: Path, product: str, build, lock: Path | None = None) -> Path:
    """``directory/product``, made by ``build(path)`` the first time it is asked for: under an exclusive lock (safe
    across threads and processes), written to a temporary name and renamed into place, so that a reader never
    sees half a file. ``build`` raises to refuse (nothing is left behind); the cache key is ``directory``'s name,
    or ``product``'s where many products share a directory and each names its own ``lock`` file (default
    ``directory/.lock``; the compile cache's: ``compile_cache.py``)."""
    target = directory / product
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    lock_path = lock if lock is not None else directory / ".lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        if not target.exists():
            tmp = directory / f"{product}.tmp{os.getpid()}.{threading.get_ident()}"
            try:
                build(tmp)
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
    return target
