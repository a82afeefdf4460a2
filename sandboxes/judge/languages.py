"""The languages the judge runs, one entry each in ``LANGUAGES``; every other language is refused by its name.

A language is one :class:`Language`: its name (what ``lang=`` takes and what results record), its file suffixes,
its compiler or interpreter and flags, who runs it that way, and whether it is how Kattis runs its family:

    python3  CPython 3, run inside the sandbox's runner (the judge's default, Codeforces' "Python 3")
    pypy3    PyPy 3 (Debian's ``pypy3``): Kattis' Python 3 and Codeforces' "PyPy 3"
    c        GNU C17, ``gcc -std=gnu17 -O2`` (problemtools' languages.yaml)
    cpp      GNU C++17, ``g++ -std=gnu++17 -O2``

Kattis judges a package's submissions with problemtools' mapping (``config/languages.yaml``): a ``.py`` or
``.py3`` file is Python 3 and runs under PyPy (``kattis_language``), unless its first line is a python2 shebang
(Python 2: refused); ``.c`` is C; ``.cc .C .cpp .cxx .c++`` are C++. Codeforces-style problems offer both
Pythons: the submitter picks ``python3`` or ``pypy3``. The suffix table of refused languages names the ones
problem packages commonly ship, so that ``agentgspo judge --solution Different.java`` says "Java is not supported"
instead of guessing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Language",
    "PYPY_EXTRA_ADDRESS_SPACE_MB",
    "LANGUAGES",
    "normalize_language",
    "get_language",
    "platform_language",
    "kattis_language",
    "language_of",
    "submission_language",
]


@dataclass(frozen=True)
class Language:
    """One language the judge runs.

    name: the id ``lang=`` takes and results record ("python3", "pypy3", "c", "cpp").
    title: how messages and docs name it.
    family: problemtools' languages.yaml key of the language it implements ("python3", "c", "cpp"); both Pythons
        are the family "python3".
    suffixes: source file suffixes, matched case-sensitively first (problemtools' globs: ``.C`` is C++), then
        lower-cased. A suffix belongs to one language; PyPy has none of its own (a ``.py`` file is CPython unless
        PyPy is asked for by name or by the platform).
    aliases: other names ``lang=`` accepts for it (case-insensitive).
    compiler: the program of the compile step, run inside the sandbox (``()``: the runner compiles CPython itself).
    flags: the compile step's flags (C, C++).
    in_runner: the runner executes the program in its own interpreter (CPython) instead of executing a binary.
    interpreted: the compile step only checks the source and writes a launcher that runs the interpreter on it, so
        the source stays beside the program (PyPy).
    kattis: this is how Kattis runs its family (so a Kattis package's submissions of the family run as this).
    extra_address_space_mb: added to the memory limit for RLIMIT_AS only; the limit itself is then enforced on
        the peak resident memory and, for PyPy, by its garbage collector's heap limit (see ``core._run_spec``).
    used_by: who runs the language this way.
    """

    name: str
    title: str
    family: str
    suffixes: tuple[str, ...]
    aliases: tuple[str, ...]
    compiler: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    in_runner: bool = False
    interpreted: bool = False
    kattis: bool = False
    extra_address_space_mb: int = 0
    used_by: str = ""


PYPY3 = "/usr/bin/pypy3"
# PyPy reserves address space it rarely touches: sys.setrecursionlimit(10**6) maps a ~1.3 GB shadow stack, and a
# thread started after threading.stack_size(2**27) maps another: 2.8 GB of VmPeak at 57 MB resident (PyPy 7.3.11,
# measured). An RLIMIT_AS at the memory limit would make such a program MLE under any real limit; a judge that
# limits memory with a cgroup (Kattis, Codeforces' job objects) counts what is resident. So PyPy's address space is
# the limit plus this, and the limit is enforced on the peak RSS and by PYPY_GC_MAX (its heap) instead.
PYPY_EXTRA_ADDRESS_SPACE_MB = 8192

#: The languages the judge runs, by name.
LANGUAGES: dict[str, Language] = {
    language.name: language
    for language in (
        Language(
            "python3",
            "Python 3 (CPython)",
            "python3",
            (".py", ".py3"),
            ("py", "python", "cpython", "py3"),
            in_runner=True,
            used_by="the judge's default Python; Codeforces' 'Python 3'; SandboxFusion's python",
        ),
        Language(
            "pypy3",
            "Python 3 (PyPy)",
            "python3",
            (),
            ("pypy",),
            compiler=(PYPY3,),
            interpreted=True,
            kattis=True,
            extra_address_space_mb=PYPY_EXTRA_ADDRESS_SPACE_MB,
            used_by="Kattis' Python 3 (problemtools: pypy3); Codeforces' 'PyPy 3'",
        ),
        Language(
            "c",
            "C (GNU C17)",
            "c",
            (".c",),
            ("gcc", "gnu17", "c17", "gnu11", "c11"),
            compiler=("gcc",),
            flags=("-std=gnu17", "-O2", "-pipe"),
            kattis=True,
            used_by="Kattis' C (problemtools: gcc -O2 -std=gnu17); Codeforces' GNU C11",
        ),
        Language(
            "cpp",
            "C++17 (GNU)",
            "cpp",
            (".cpp", ".cc", ".cxx", ".c++", ".C"),
            ("c++", "cpp17", "c++17", "g++", "cxx", "gnu++17"),
            compiler=("g++",),
            flags=("-std=gnu++17", "-O2", "-pipe"),
            kattis=True,
            used_by="Codeforces' GNU G++17; Kattis' C++ (there gnu++23)",
        ),
    )
}
#: Source suffix -> language name (CPython for Python files); see ``language_of``.
SUFFIXES = {suffix: language.name for language in LANGUAGES.values() for suffix in language.suffixes}
_NAMES = {alias: language.name for language in LANGUAGES.values() for alias in (language.name, *language.aliases)}
SUPPORTED = "Python 3 (.py, .py3: python3 = CPython, pypy3 = PyPy), C (.c) and C++17 (.cpp, .cc, .cxx, .c++, .C)"
PLATFORMS = ("kattis",)
#: Languages the judge does not run, by file suffix.
UNSUPPORTED_NAMES = {
    ".java": "Java",
    ".kt": "Kotlin",
    ".scala": "Scala",
    ".cs": "C#",
    ".fs": "F#",
    ".go": "Go",
    ".hs": "Haskell",
    ".js": "JavaScript",
    ".ts": "TypeScript",
    ".lisp": "Common Lisp",
    ".ml": "OCaml",
    ".php": "PHP",
    ".rb": "Ruby",
    ".rs": "Rust",
    ".pl": "Prolog or Perl",
    ".pas": "Pascal",
    ".f90": "Fortran",
    ".swift": "Swift",
    ".lua": "Lua",
    ".m": "Objective-C",
    ".d": "D",
    ".jl": "Julia",
    ".py2": "Python 2",
    ".cob": "COBOL",
    ".ada": "Ada",
    ".adb": "Ada",
    ".r": "R",
    ".dart": "Dart",
    ".ex": "Elixir",
    ".erl": "Erlang",
}
_UNSUPPORTED_BY_NAME = {name.lower(): name for name in UNSUPPORTED_NAMES.values()} | {"python2": "Python 2"}
# problemtools' rule (languages.yaml): a .py file whose shebang names python2 is Python 2.
_PYTHON2_SHEBANG = re.compile(rb"^#!.*python2\b")


def _names() -> str:
    return ", ".join(f"{language.name} ({language.title})" for language in LANGUAGES.values())


def normalize_language(lang: str) -> str:
    """The name of the language ``lang`` names (a name or an alias, any case); ValueError lists the supported ones.

    >>> normalize_language("py"), normalize_language("PyPy"), normalize_language("c++")
    ('python3', 'pypy3', 'cpp')
    """
    key = str(lang).lower().strip()
    if key in _NAMES:
        return _NAMES[key]
    refused = _UNSUPPORTED_BY_NAME.get(key)
    what = f"{refused} is not supported" if refused else f"unsupported language {lang!r}"
    raise ValueError(f"{what}: expected one of {_names()} (or an alias: py, python, pypy, c++, gcc...)")


def get_language(lang: str) -> Language:
    """The :class:`Language` ``lang`` names (see ``normalize_language``)."""
    return LANGUAGES[normalize_language(lang)]


def platform_language(lang: str, platform: str | None = None) -> str:
    """The language a submission in ``lang`` is judged in on ``platform``: Kattis runs each family one way (Python 3
    under PyPy); ``None`` keeps ``lang`` (Codeforces-style problems offer both Pythons).

    >>> platform_language("python3", "kattis"), platform_language("python3"), platform_language("c", "kattis")
    ('pypy3', 'python3', 'c')
    """
    name = normalize_language(lang)
    if platform is None:
        return name
    if platform != "kattis":
        raise ValueError(f"unknown platform {platform!r}: expected None or one of {', '.join(PLATFORMS)}")
    family = LANGUAGES[name].family
    return next(language.name for language in LANGUAGES.values() if language.family == family and language.kattis)


def kattis_language(lang: str) -> str:
    """``platform_language(lang, "kattis")``: the language Kattis judges a ``lang`` submission in."""
    return platform_language(lang, "kattis")


def language_of(path: str | os.PathLike) -> str:
    """The language of a source file from its suffix (Python files: CPython); ValueError names the fix."""
    suffix = Path(path).suffix
    name = SUFFIXES.get(suffix) or SUFFIXES.get(suffix.lower())
    if name is None:
        raise ValueError(
            f"cannot tell the language of {str(path)!r} from its suffix {suffix!r}: expected one of "
            f"{sorted(SUFFIXES)}, or pass the language (--lang: {', '.join(LANGUAGES)})"
        )
    return name


def submission_language(path: str | os.PathLike, source: bytes | None = None, platform: str | None = None) -> str:
    """The judge language of the submission file ``path`` (on ``platform``, see ``platform_language``); ValueError
    names any other language, and a ``.py`` whose shebang says python2.

    >>> submission_language("sol.cc"), submission_language("sol.py3"), submission_language("a.py", platform="kattis")
    ('cpp', 'python3', 'pypy3')
    """
    path = Path(path)
    suffix = path.suffix
    name = SUFFIXES.get(suffix) or SUFFIXES.get(suffix.lower())
    if name is not None:
        if LANGUAGES[name].family == "python3":
            head = source if source is not None else (path.read_bytes()[:200] if path.is_file() else b"")
            if _PYTHON2_SHEBANG.match(head.split(b"\n", 1)[0]):
                raise ValueError(
                    f"{str(path)!r} is Python 2 (its shebang says python2): not supported; the judge runs {SUPPORTED}"
                )
        return platform_language(name, platform)
    refused = UNSUPPORTED_NAMES.get(suffix.lower())
    if refused is not None:
        raise ValueError(f"{str(path)!r} is {refused}: not supported; the judge runs {SUPPORTED}")
    raise ValueError(
        f"cannot tell the language of {str(path)!r} from its suffix {suffix!r}: the judge runs "
        f"{SUPPORTED} (or pass the language: --lang {'|'.join(LANGUAGES)})"
    )
