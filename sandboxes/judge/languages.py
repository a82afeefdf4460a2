"""Which submissions the judge can run: Python 3 and C++; every other language is refused by its name.

The suffix table names the languages problem packages commonly ship (problemtools' ``languages.yaml`` lists them),
so that ``agentgspo judge --solution Different.java`` says "Java is not supported" instead of guessing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .compile import SUFFIXES

SUPPORTED = "Python 3 (.py) and C++17 (.cpp, .cc, .cxx, .c++)"
#: Languages the judge does not run, by file suffix.
UNSUPPORTED_NAMES = {
    ".c": "C",
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
# problemtools' rule (languages.yaml): a .py file whose shebang names python2 is Python 2.
_PYTHON2_SHEBANG = re.compile(rb"^#!.*python2\b")


def submission_language(path: str | os.PathLike, source: bytes | None = None) -> str:
    """The judge language ("py" or "cpp") of the submission file ``path``; ValueError names any other language.

    >>> submission_language("sol.cc")
    'cpp'
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in SUFFIXES:
        if SUFFIXES[suffix] == "py":
            head = source if source is not None else (path.read_bytes()[:200] if path.is_file() else b"")
            if _PYTHON2_SHEBANG.match(head.split(b"\n", 1)[0]):
                raise ValueError(
                    f"{str(path)!r} is Python 2 (its shebang says python2): not supported; the judge runs {SUPPORTED}"
                )
        return SUFFIXES[suffix]
    name = UNSUPPORTED_NAMES.get(suffix)
    if name is not None:
        raise ValueError(f"{str(path)!r} is {name}: not supported; the judge runs {SUPPORTED}")
    raise ValueError(
        f"cannot tell the language of {str(path)!r} from its suffix {suffix!r}: the judge runs "
        f"{SUPPORTED} (or pass the language: --lang py|cpp)"
    )
