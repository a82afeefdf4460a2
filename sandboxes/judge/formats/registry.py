"""The one registry of problem-folder formats: how to recognise a folder, and how to load it for the judge and for
an env.

A format is one :class:`ProblemFormat` value and one :func:`register_format` line::

    FORMAT = ProblemFormat(name="polygon", marker="problem.xml", description="Polygon package",
                           load_problem=load_polygon_problem, load_package=polygon_package,
                           options=("testset", "testlib_h"))
    register_format(FORMAT)

Everything that takes a problem folder dispatches through here: ``agentgspo judge --problem DIR``
(:func:`load_any_problem`), CodeForces-v0's ``data_files=DIR`` and so ``agentgspo eval --problems DIR``
(:func:`load_any_package`, :func:`problem_folders`). A folder is in the first registered format whose marker file it
holds; the built-in formats are registered in ``formats/__init__.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..testdata import Problem

__all__ = [
    "ProblemPackage",
    "ProblemFormat",
    "register_format",
    "unregister_format",
    "format_of",
    "expected_markers",
    "load_any_problem",
    "load_any_package",
    "problem_folders",
    "solution_files",
]

#: file suffix -> the judge's language name, for shipped solutions found by file name
SUFFIX_LANGS = {".py": "py", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp"}


@dataclass
class ProblemPackage:
    """A problem folder as an env and the eval use it: the judgeable ``Problem`` plus what a player and a scripted
    agent need.

    ``statement``: the statement's text (legend, input, output, interaction, scoring) without title, limits and
    examples, which the env adds; ``examples``: ``[(input, output)]`` shown in the statement; ``references``:
    ``{lang: source}`` of accepted solutions (``lang`` ``"py"`` or ``"cpp"``); ``wrong``: ``[{"name", "lang",
    "code"}]`` of solutions the tests reject; ``note``: a note shown after the examples; ``id``: a stable problem id
    (default: ``problem.name``); ``format``: the registered format's name (set by :func:`load_any_package`).
    """

    problem: Problem
    statement: str = ""
    examples: list[tuple[str, str]] = field(default_factory=list)
    references: dict[str, str] = field(default_factory=dict)
    wrong: list[dict[str, str]] = field(default_factory=list)
    note: str = ""
    title: str = ""
    id: str = ""
    rating: int | None = None
    tags: list[str] = field(default_factory=list)
    format: str = ""


@dataclass(frozen=True)
class ProblemFormat:
    """One problem-folder format.

    name: short id (``"own"``, ``"kattis"``, ``"polygon"``), recorded as an env task's ``metadata["source"]``;
    marker: a file name; a folder holding it is in this format; description: what such a folder is called in
    messages ("Polygon package"); load_problem: ``(directory, **options) -> Problem`` for the judge;
    load_package: ``(directory, **options) -> ProblemPackage`` for an env (statement, shipped solutions);
    options: the keyword options ``load_problem`` takes beyond the folder (``agentgspo judge`` passes
    ``testlib_h`` only to a format that lists it); judge_folder: optional ``(directory, source, lang, *, backend,
    time_limit_s, memory_limit_mb, output_limit_mb) -> JudgeResult`` for a format the CLI judges whole (Kattis:
    groups and grading, the package's own limits where none is given).
    """

    name: str
    marker: str
    description: str
    load_problem: Callable[..., Problem]
    load_package: Callable[..., ProblemPackage]
    options: tuple[str, ...] = ()
    judge_folder: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"ProblemFormat name: expected a short id such as 'polygon', got {self.name!r}")
        if not self.marker or "/" in self.marker or os.sep in self.marker:
            raise ValueError(
                f"ProblemFormat {self.name!r} marker: expected a file name such as 'problem.xml', got {self.marker!r}"
            )
        for role in ("load_problem", "load_package"):
            if not callable(getattr(self, role)):
                raise ValueError(
                    f"ProblemFormat {self.name!r} {role}: expected a function (directory, **options), "
                    f"got {getattr(self, role)!r}"
                )


#: name -> format, in the order folders are matched against them
FORMATS: dict[str, ProblemFormat] = {}


def register_format(problem_format: ProblemFormat) -> ProblemFormat:
    """Add ``problem_format`` to the registry (returned, so a module can write ``FORMAT = register_format(...)``).
    A name or marker already registered is an error naming the format that holds it."""
    if not isinstance(problem_format, ProblemFormat):
        raise TypeError(f"register_format: expected a ProblemFormat, got {type(problem_format).__name__}")
    for known in FORMATS.values():
        if problem_format.name == known.name or problem_format.marker == known.marker:
            raise ValueError(
                f"format {problem_format.name!r} ({problem_format.marker}) clashes with the registered "
                f"format {known.name!r} ({known.marker}); unregister_format({known.name!r}) first"
            )
    FORMATS[problem_format.name] = problem_format
    return problem_format


def unregister_format(name: str) -> None:
    """Remove the format ``name`` (a test's temporary format, or to replace a built-in one)."""
    if name not in FORMATS:
        raise ValueError(f"no format {name!r}; registered: {', '.join(FORMATS)}")
    del FORMATS[name]


def format_of(directory: str | os.PathLike) -> ProblemFormat | None:
    """The format of the folder ``directory`` (the first whose marker file it holds), or ``None``."""
    directory = Path(directory)
    return next((f for f in FORMATS.values() if (directory / f.marker).is_file()), None)


def expected_markers() -> str:
    """The registered markers, for messages: "problem.json (the project's format), problem.yaml (...)"."""
    return ", ".join(f"{f.marker} ({f.description})" for f in FORMATS.values())


def _format_for(directory: Path) -> ProblemFormat:
    if not directory.is_dir():
        raise ValueError(f"problem folder {str(directory)!r} does not exist or is not a folder")
    found = format_of(directory)
    if found is None:
        hint = " (it looks like a tests folder: pass it as --tests)" if any(directory.glob("*.in")) else ""
        raise ValueError(f"{str(directory)!r} is not a problem folder: expected one of {expected_markers()}{hint}")
    return found


def load_any_problem(directory: str | os.PathLike, **options) -> Problem:
    """The ``Problem`` of the folder ``directory`` in whichever registered format its marker file names.
    ``options`` go to the format's loader; one it does not take is an error. ValueError names what is missing."""
    directory = Path(directory)
    found = _format_for(directory)
    unknown = sorted(set(options) - set(found.options))
    if unknown:
        takes = ", ".join(found.options) or "none"
        raise ValueError(
            f"{directory}: a {found.description} ({found.marker}) takes no option {unknown[0]!r} (its options: {takes})"
        )
    return found.load_problem(directory, **options)


def load_any_package(directory: str | os.PathLike) -> ProblemPackage:
    """The ``ProblemPackage`` (problem, statement, shipped solutions) of the folder ``directory``, in whichever
    registered format its marker file names; ``format`` is set to the format's name, ``id`` and ``title`` default
    to the problem's name."""
    directory = Path(directory)
    found = _format_for(directory)
    package = found.load_package(directory)
    if not isinstance(package, ProblemPackage):
        raise TypeError(
            f"format {found.name!r}: load_package returned {type(package).__name__}, expected a ProblemPackage"
        )
    package.format = found.name
    package.id = package.id or package.problem.name
    package.title = package.title or package.problem.name
    return package


def problem_folders(directory: str | os.PathLike) -> list[Path]:
    """The folders directly in ``directory`` that are in a registered format (sorted by name)."""
    return sorted(p for p in Path(directory).iterdir() if p.is_dir() and format_of(p) is not None)


def solution_files(folder: Path) -> list[tuple[str, Path]]:
    """``(lang, path)`` of the Python and C++ files directly in ``folder`` (sorted; none if it does not exist)."""
    if not folder.is_dir():
        return []
    return [(SUFFIX_LANGS[p.suffix], p) for p in sorted(folder.iterdir()) if p.is_file() and p.suffix in SUFFIX_LANGS]
