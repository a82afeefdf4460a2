"""testlib (Codeforces/Polygon) jury programs given as C++ source: compiled once, cached, and their exit codes read.

A checker ``checker.cpp`` (or an interactor) includes ``testlib.h``. Which header it is compiled against, first
match wins: the ``testlib_h`` argument (``--testlib-h`` on the command line), a ``testlib.h`` beside the source (a
Polygon package ships its own in ``files/``), then ``$AGENTGSPO_TESTLIB_H``. Nothing is fetched: with none of
these the source is refused, naming the fix (testlib is at https://github.com/MikeMirzayanov/testlib).

Jury programs are trusted code: they are compiled and run on the host (as the other checkers are), with
``g++ -std=gnu++17 -O2``, into ``$AGENTGSPO_CACHE/testlib/<sha256>/`` where the hash covers the source, the header,
the compiler's version and the flags, so an edited checker is rebuilt and an unchanged one never is. A source that
does not compile raises ValueError with the compiler's message before any solution runs.

Exit codes (testlib.h ``resultExitCode``, default build): 0 OK, 1 WA, 2 PE, 3 FAIL (the checker or the test is
broken: a judge error carrying the checker's message), 4 (``_dirt``; testlib reports it as PE), 7 points (``quitp``:
accepted with the points as the test's score, read from the message ``points <value> ...``; ``quitpi``'s
``points_info=...`` carries no value: accepted without a score), 8 unexpected EOF
(builds with ENABLE_UNEXPECTED_EOF; PE, as testlib reports it otherwise), 16 + n partially correct (``_pc(n)``:
accepted with score n). Any other exit status, a signal, or points that cannot be read: a judge error.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from agentgspo.core.paths import cache_root

from ..results import Verdict

__all__ = ["is_cpp_source", "find_testlib_header", "compile_testlib_program", "read_points", "testlib_outcome"]

#: Flags of every jury compile (testlib needs C++11 or newer).
TESTLIB_FLAGS = ["-std=gnu++17", "-O2"]
TESTLIB_COMPILE_TIMEOUT_S = 300.0
#: testlib.h's TResult exit codes in the default build.
EXIT_OK, EXIT_WA, EXIT_PE, EXIT_FAIL, EXIT_DIRT, EXIT_POINTS, EXIT_UNEXPECTED_EOF = 0, 1, 2, 3, 4, 7, 8
PC_BASE_EXIT_CODE = 16  # _partially (16) + PC_BASE_EXIT_CODE (0 unless the build defines TESTSYS)
CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++")
HEADER_ENV = "AGENTGSPO_TESTLIB_H"
GET_TESTLIB = (
    "put the problem's testlib.h beside it, pass testlib_h= (--testlib-h PATH), or set "
    f"{HEADER_ENV}=/path/to/testlib.h (from https://github.com/MikeMirzayanov/testlib)"
)


def is_cpp_source(path: str | os.PathLike) -> bool:
    """True when ``path`` names a C++ source file (by suffix), i.e. a jury program to compile first."""
    return str(path).lower().endswith(CPP_SUFFIXES)


def find_testlib_header(source: str | os.PathLike, testlib_h: str | os.PathLike | None = None) -> Path:
    """The testlib.h ``source`` is compiled against (see the module docstring for the order); ValueError if none."""
    candidates = [
        (testlib_h, "testlib_h"),
        (Path(source).parent / "testlib.h", "beside the source"),
        (os.environ.get(HEADER_ENV) or None, HEADER_ENV),
    ]
    for candidate, origin in candidates:
        if candidate is None:
            continue
        path = Path(candidate)
        if path.is_file():
            return path.resolve()
        if origin != "beside the source":
            raise ValueError(
                f"testlib header {str(path)!r} (from {origin}) is not a file: pass the path of a testlib.h"
            )
    raise ValueError(f"{str(source)!r} is a C++ jury program but no testlib.h was found for it: {GET_TESTLIB}")


def _compiler_version() -> str:
    if shutil.which("g++") is None:
        raise ValueError(
            "compiling a C++ jury program needs g++ on the judge's host: install it "
            "(`sudo apt-get install g++`) or pass a compiled checker"
        )
    return subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout


def _locked_build(directory: Path, product: Path, build) -> None:
    """Run ``build()`` to make ``product`` unless it exists, once across threads and processes (a lock file)."""
    directory.mkdir(parents=True, exist_ok=True)
    if product.exists():
        return
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not product.exists():
            build()


def _header_dir(header_text: bytes, version: str) -> Path:
    """A cache folder holding this testlib.h and, where g++ can build it, its precompiled form (testlib.h.gch: a
    jury program then compiles in a second or two instead of parsing testlib's ~6,000 lines each time)."""
    key = hashlib.sha256(b"\0".join([header_text, version.encode(), " ".join(TESTLIB_FLAGS).encode()])).hexdigest()
    directory = cache_root() / "testlib" / "headers" / key[:32]
    header, gch, ready = directory / "testlib.h", directory / "testlib.h.gch", directory / "ready"

    def build() -> None:
        header.write_bytes(header_text)
        tmp = directory / f"testlib.h.gch.tmp{os.getpid()}"
        try:
            done = subprocess.run(
                ["g++", *TESTLIB_FLAGS, "-x", "c++-header", str(header), "-o", str(tmp)],
                capture_output=True,
                timeout=TESTLIB_COMPILE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            done = None
        if done is not None and done.returncode == 0:
            os.replace(tmp, gch)
        else:  # no precompiled header: jury programs still compile, only slower
            tmp.unlink(missing_ok=True)
        ready.write_bytes(b"")

    _locked_build(directory, ready, build)
    return directory


def compile_testlib_program(source: str | os.PathLike, testlib_h: str | os.PathLike | None = None) -> Path:
    """Compile the jury program ``source`` against its testlib.h (cached by content hash); returns the binary.

    Safe across threads and processes (a lock file per cache entry). ValueError names the source and carries the
    compiler's message when it does not compile.
    """
    source = Path(source)
    if not source.is_file():
        raise ValueError(f"jury program {str(source)!r} does not exist")
    header = find_testlib_header(source, testlib_h)
    code, header_text, version = source.read_bytes(), header.read_bytes(), _compiler_version()
    key = hashlib.sha256(
        b"\0".join([code, header_text, version.encode(), " ".join(TESTLIB_FLAGS).encode()])
    ).hexdigest()
    target = cache_root() / "testlib" / key[:32]
    binary = target / "program"
    if binary.exists():
        return binary
    headers = _header_dir(header_text, version)

    def build() -> None:
        # The source alone in its folder, so that #include "testlib.h" finds exactly this header (and its
        # precompiled form) through -I.
        (target / "source.cpp").write_bytes(code)
        tmp = target / f"program.tmp{os.getpid()}"
        try:
            done = subprocess.run(
                ["g++", *TESTLIB_FLAGS, "-I", str(headers), "-o", str(tmp), str(target / "source.cpp"), "-lm"],
                capture_output=True,
                timeout=TESTLIB_COMPILE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ValueError(
                f"jury program {str(source)!r} did not compile within {TESTLIB_COMPILE_TIMEOUT_S:.0f} s"
            ) from None
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            message = done.stderr.decode("utf-8", "replace").strip()[-3000:]
            raise ValueError(f"jury program {str(source)!r} does not compile against {str(header)!r}:\n{message}")
        os.replace(tmp, binary)

    _locked_build(target, binary, build)
    return binary


def read_points(message: str) -> float | None:
    """The points of a ``quitp`` message, or None: testlib ends its stderr with the line ``points <value> ...``
    (anything the checker printed before stays above it)."""
    for line in reversed(message.strip().splitlines()):
        words = line.split()
        if len(words) >= 2 and words[0] == "points":
            try:
                value = float(words[1])
            except ValueError:
                return None
            return value if value == value and abs(value) != float("inf") else None
    return None


def testlib_outcome(returncode: int, message: str, role: str = "checker") -> tuple[Verdict, str, float | None]:
    """(verdict, message, score) of a testlib program's exit status (see the module docstring for the table)."""
    if returncode == EXIT_OK:
        return Verdict.AC, message, None
    if returncode == EXIT_WA:
        return Verdict.WA, message, None
    if returncode in (EXIT_PE, EXIT_DIRT, EXIT_UNEXPECTED_EOF):
        return Verdict.PE, message, None
    if returncode == EXIT_FAIL:
        return Verdict.JE, f"{role} FAIL (judge failure, not the solution's): {message}", None
    if returncode == EXIT_POINTS:
        points = read_points(message)
        if points is None and "points_info=" in message:
            return Verdict.AC, message, None  # quitpi: accepted with information for the jury, no points value
        if points is None:
            return Verdict.JE, f"{role} exited with points (7) but its message has no points value: {message}", None
        return Verdict.AC, message, points
    if PC_BASE_EXIT_CODE <= returncode <= 255:
        return Verdict.AC, message, float(returncode - PC_BASE_EXIT_CODE)
    how = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
    return Verdict.JE, f"{role} ended with {how}, which testlib does not define (judge failure): {message}", None
