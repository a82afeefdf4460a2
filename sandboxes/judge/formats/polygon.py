"""Polygon (Codeforces) problem packages: ``problem.xml`` read for the limits, the tests, the checker and the
interactor, whose C++ sources are compiled against the package's own ``testlib.h`` (see ``judge/testlib.py``).

A package folder as Polygon exports it::

    PACKAGE/
      problem.xml                     <judging input-file output-file><testset name="tests">: time-limit (ms),
                                      memory-limit (bytes), test-count, input-path-pattern (tests/%02d),
                                      answer-path-pattern (tests/%02d.a), <tests><test sample= points= group=/>
                                      <assets><checker><source path=/>, <interactor><source path=/>
                                      <assets><solutions><solution tag="main"><source path= type=/>
                                      <tags><tag value=/>
      files/testlib.h, files/check.cpp, files/interactor.cpp, tests/01, tests/01.a, ...
      statements/english/problem-properties.json    the statement's sections as JSON (legend, input, output,
                                                    interaction, notes), or
      statement-sections/english/legend.tex, input.tex, output.tex, interaction.tex, notes.tex, or
      statements/english/problem.tex                \\begin{problem}{Title}...\\InputFile...\\OutputFile...
      solutions/...                                 the solutions problem.xml lists

What is refused, with the reason, rather than judged differently from Polygon: a missing test file (a package
exported without its generated tests: run its ``doall.sh`` or export a full package), a missing answer file of a
non-interactive problem, file input/output under names other than ``input.txt``/``output.txt``, a checker that is
not a testlib C++ source, and a testset that does not exist.

Registered as the format ``polygon`` (marker ``problem.xml``, see ``registry.py``). For an env
(:func:`polygon_package`): the statement is read from the first of the three statement layouts above that the
package has (the English one, else the first language), in Polygon's LaTeX; the examples are the testset's
``sample="true"`` tests (none shown for an interactive problem); solutions tagged ``main`` or ``accepted`` are the
references, those tagged ``wrong-answer``, ``presentation-error``, ``time-limit-exceeded``, ``memory-limit-exceeded``,
``time-limit-exceeded-or-memory-limit-exceeded``, ``failed`` or ``rejected`` the wrong ones (``time-limit-exceeded-
or-accepted`` and ``do-not-run`` are neither); solutions in languages other than Python 3 and C++ are left out.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from ...submission import TestCase
from ..calibration import Submission
from ..testdata import Problem
from ..testlib import compile_testlib_program, is_cpp_source
from ..time_limits import polygon_time_limit
from .registry import SUFFIX_LANGS, ProblemFormat, ProblemPackage

__all__ = ["load_polygon_problem", "polygon_statement", "polygon_solutions", "polygon_submissions", "polygon_package"]

REFERENCE_TAGS = ("main", "accepted")
WRONG_TAGS = (
    "wrong-answer",
    "presentation-error",
    "time-limit-exceeded",
    "memory-limit-exceeded",
    "time-limit-exceeded-or-memory-limit-exceeded",
    "failed",
    "rejected",
)
# statement sections in the order they are shown; notes go after the examples
SECTIONS = (
    ("legend", None),
    ("input", "Input"),
    ("output", "Output"),
    ("interaction", "Interaction"),
    ("scoring", "Scoring"),
)


def _text(element, path: str, package: Path, what: str) -> str:
    found = element.find(path)
    if found is None or not (found.text or "").strip():
        raise ValueError(f"Polygon package {str(package)!r}: problem.xml has no {what} ({path})")
    return found.text.strip()


def _source(package: Path, asset, role: str) -> Path:
    source = asset.find("source")
    if source is None or not source.get("path"):
        raise ValueError(f"Polygon package {str(package)!r}: the {role} in problem.xml names no <source path=...>")
    path = package / source.get("path")
    if not path.is_file():
        raise ValueError(f"Polygon package {str(package)!r}: {role} source {source.get('path')!r} is missing")
    if not is_cpp_source(path):
        raise ValueError(
            f"Polygon package {str(package)!r}: {role} {source.get('path')!r} is not C++ "
            f"(type {source.get('type')!r}); only testlib C++ jury programs are supported"
        )
    return path


def _io_mode(package: Path, judging) -> str:
    names = (judging.get("input-file") or "", judging.get("output-file") or "")
    if names == ("", ""):
        return "stdio"
    if names == ("input.txt", "output.txt"):
        return "file"
    raise ValueError(
        f"Polygon package {str(package)!r}: file I/O through {names[0] or 'stdin'!r} / "
        f"{names[1] or 'stdout'!r} is not supported (only stdio, or input.txt and output.txt)"
    )


def _pattern_path(package: Path, pattern: str, number: int) -> Path:
    try:
        return package / (pattern % number)
    except (TypeError, ValueError):
        raise ValueError(
            f"Polygon package {str(package)!r}: path pattern {pattern!r} is not a printf pattern "
            "with one number, such as tests/%02d"
        ) from None


def _root(package: Path):
    xml_path = package / "problem.xml"
    if not xml_path.is_file():
        raise ValueError(f"{str(package)!r} is not a Polygon package: it has no problem.xml")
    try:
        return ElementTree.parse(xml_path).getroot()
    except ElementTree.ParseError as exc:
        raise ValueError(f"Polygon package {str(package)!r}: problem.xml is not valid XML ({exc})") from None


def load_polygon_problem(
    directory: str | os.PathLike, *, testset: str = "tests", testlib_h: str | os.PathLike | None = None
) -> Problem:
    """Read the Polygon package at ``directory`` (its ``testset``) into a Problem, compiling its checker and
    interactor now (a broken one is refused here, before any solution runs). ``testlib_h`` overrides the header
    the package ships beside its sources. Test points and groups go to ``metadata["points"]`` / ``["groups"]``."""
    package = Path(directory)
    root = _root(package)
    judging = root.find("judging")
    if judging is None:
        raise ValueError(f"Polygon package {str(package)!r}: problem.xml has no <judging> section")
    sets = {ts.get("name"): ts for ts in judging.findall("testset")}
    if testset not in sets:
        raise ValueError(f"Polygon package {str(package)!r}: no testset {testset!r} (it has {sorted(sets)})")
    ts = sets[testset]
    time_limit_s, time_limit_source = polygon_time_limit(
        _text(ts, "time-limit", package, "time limit"), f"Polygon package {str(package)!r}: problem.xml"
    )
    memory_limit_mb = int(_text(ts, "memory-limit", package, "memory limit")) / (1 << 20)
    count = int(_text(ts, "test-count", package, "test count"))
    input_pattern = _text(ts, "input-path-pattern", package, "input path pattern")
    answer_pattern = _text(ts, "answer-path-pattern", package, "answer path pattern")
    assets = root.find("assets")
    interactor_asset = assets.find("interactor") if assets is not None else None
    checker_asset = assets.find("checker") if assets is not None else None
    interactive = interactor_asset is not None
    descriptions = ts.findall("tests/test")
    tests, samples, points, groups = [], [], {}, {}
    for number in range(1, count + 1):
        input_path = _pattern_path(package, input_pattern, number)
        answer_path = _pattern_path(package, answer_pattern, number)
        if not input_path.is_file():
            raise ValueError(
                f"Polygon package {str(package)!r}: test {number} ({input_path.name}) is missing; "
                "export the package with its generated tests or run its doall.sh first"
            )
        if not answer_path.is_file() and not interactive:
            raise ValueError(
                f"Polygon package {str(package)!r}: answer of test {number} ({answer_path.name}) is "
                "missing; run the package's doall.sh (it writes the answers with the main solution)"
            )
        answer = answer_path.read_bytes() if answer_path.is_file() else b""
        case = TestCase(input_path.read_bytes(), answer, input_path.name)
        tests.append(case)
        description = descriptions[number - 1] if number <= len(descriptions) else None
        if description is not None:
            if description.get("sample") == "true":
                samples.append(case)
            if description.get("points") is not None:
                points[case.name] = float(description.get("points"))
            if description.get("group") is not None:
                groups[case.name] = description.get("group")
    if not tests:
        raise ValueError(f"Polygon package {str(package)!r}: testset {testset!r} has no tests")
    checker = "tokens"
    if checker_asset is not None:
        if checker_asset.get("type") not in (None, "testlib"):
            raise ValueError(
                f"Polygon package {str(package)!r}: checker type {checker_asset.get('type')!r} is "
                "not supported (only testlib checkers)"
            )
        checker = f"testlib:{compile_testlib_program(_source(package, checker_asset, 'checker'), testlib_h)}"
    interactor = None
    if interactive:
        interactor = str(compile_testlib_program(_source(package, interactor_asset, "interactor"), testlib_h))
    name_element = root.find("names/name")
    name = root.get("short-name") or (name_element.get("value") if name_element is not None else package.name)
    metadata = {"format": "polygon", "testset": testset, "time_limit_source": time_limit_source}
    if points:
        metadata["points"] = points
    if groups:
        metadata["groups"] = groups
    return Problem(
        name,
        tests,
        time_limit_s,
        memory_limit_mb,
        checker,
        interactor,
        _io_mode(package, judging),
        samples=samples,
        interactive=interactive,
        metadata=metadata,
    )


# ----------------------------------------------------------------------------------------------- for an env


def _language(package: Path, root) -> str:
    """The statement language: English when the package has it, else the first one it names or holds."""
    named = [n.get("language") for n in root.findall("names/name") if n.get("language")]
    held = [
        p.name
        for base in ("statements", "statement-sections")
        if (package / base).is_dir()
        for p in sorted((package / base).iterdir())
        if p.is_dir() and not p.name.startswith(".")
    ]
    languages = named + held
    return "english" if "english" in languages else (languages[0] if languages else "english")


def _sections_from_tex(text: str) -> tuple[str, dict[str, str]]:
    """``(title, sections)`` of a Polygon ``problem.tex``: ``\\begin{problem}{Title}{in}{out}{time}{memory}``, the
    legend, then ``\\InputFile``, ``\\OutputFile``, ``\\Interaction``, ``\\Scoring``, ``\\Examples``, ``\\Note``."""
    head = re.search(r"\\begin\{problem\}\{([^}]*)\}(?:\{[^}]*\}){4}", text)
    title = head.group(1).strip() if head else ""
    body = text[head.end() :] if head else text
    body = body.split("\\end{problem}")[0]
    body = re.sub(r"^\s*\\exmp(file)?\{.*$", "", body, flags=re.MULTILINE)  # examples come from the tests
    marks = {
        "InputFile": "input",
        "OutputFile": "output",
        "Interaction": "interaction",
        "Scoring": "scoring",
        "Examples": "examples",
        "Example": "examples",
        "Note": "notes",
        "Notes": "notes",
    }
    parts = re.split(r"\\(" + "|".join(sorted(marks, key=len, reverse=True)) + r")\b", body)
    sections = {"legend": parts[0]}
    for mark, content in zip(parts[1::2], parts[2::2]):
        sections[marks[mark]] = content
    sections.pop("examples", None)
    return title, {key: value.strip() for key, value in sections.items() if value.strip()}


def polygon_statement(package: Path, root=None) -> tuple[str, dict[str, str], str]:
    """``(title, sections, where)`` of the package's statement: ``sections`` maps legend, input, output,
    interaction, scoring, notes to their LaTeX text; ``where`` names the file(s) read ("" when the package has no
    statement)."""
    package = Path(package)
    root = _root(package) if root is None else root
    language = _language(package, root)
    properties = package / "statements" / language / "problem-properties.json"
    if properties.is_file():
        try:
            data = json.loads(properties.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"Polygon package {str(package)!r}: {properties.name} is not valid JSON ({exc})") from None
        sections = {
            key: str(data[key]).strip()
            for key in ("legend", "input", "output", "interaction", "scoring", "notes")
            if data.get(key) and str(data[key]).strip()
        }
        return str(data.get("name") or ""), sections, str(properties.relative_to(package))
    folder = package / "statement-sections" / language
    if folder.is_dir():
        sections = {
            key: (folder / f"{key}.tex").read_text().strip()
            for key in ("legend", "input", "output", "interaction", "scoring", "notes")
            if (folder / f"{key}.tex").is_file() and (folder / f"{key}.tex").read_text().strip()
        }
        title = (folder / "name.tex").read_text().strip() if (folder / "name.tex").is_file() else ""
        return title, sections, str(folder.relative_to(package))
    tex = package / "statements" / language / "problem.tex"
    if tex.is_file():
        title, sections = _sections_from_tex(tex.read_text())
        return title, sections, str(tex.relative_to(package))
    return "", {}, ""


def _solution_lang(path: str, source_type: str) -> str | None:
    """``"py"`` / ``"cpp"`` from a Polygon source type (``python.3``, ``cpp.g++17``...), else from the suffix;
    ``None`` for the languages the judge does not run (Python 2, Java...)."""
    if source_type.startswith("python"):
        return None if source_type == "python.2" else "py"
    if source_type.startswith("cpp"):
        return "cpp"
    return SUFFIX_LANGS.get(Path(path).suffix) if not source_type else None


def _solutions_by_tag(package: Path, root) -> dict[str, list[tuple[str, str, str]]]:
    """``{tag: [(lang, file name, source)]}`` of problem.xml's ``<solutions>`` in Python 3 or C++; a listed
    solution whose file is missing is an error."""
    by_tag: dict[str, list[tuple[str, str, str]]] = {}
    for solution in root.findall("assets/solutions/solution"):
        source = solution.find("source")
        if source is None or not source.get("path"):
            raise ValueError(
                f"Polygon package {str(package)!r}: a <solution tag={solution.get('tag')!r}> in "
                "problem.xml names no <source path=...>"
            )
        lang = _solution_lang(source.get("path"), source.get("type") or "")
        if lang is None:
            continue
        path = package / source.get("path")
        if not path.is_file():
            raise ValueError(
                f"Polygon package {str(package)!r}: solution {source.get('path')!r} (tag "
                f"{solution.get('tag')!r}) is missing"
            )
        by_tag.setdefault(solution.get("tag") or "", []).append((lang, path.name, path.read_text()))
    return by_tag


def polygon_solutions(package: Path, root=None) -> tuple[dict[str, str], list[dict[str, str]]]:
    """``(references, wrong)`` from problem.xml's ``<solutions>``, by tag (see the module docstring); a listed
    solution whose file is missing is an error."""
    package = Path(package)
    by_tag = _solutions_by_tag(package, _root(package) if root is None else root)
    references: dict[str, str] = {}
    for tag in REFERENCE_TAGS:
        for lang, _, code in by_tag.get(tag, []):
            references.setdefault(lang, code)
    wrong = [
        {"name": f"{tag}/{name}", "lang": lang, "code": code}
        for tag in WRONG_TAGS
        for lang, name, code in by_tag.get(tag, [])
    ]
    return references, wrong


def polygon_submissions(package: Path, root=None) -> tuple[list[Submission], list[Submission]]:
    """``(accepted, too_slow)`` for a time-limit calibration (``judge/calibration.py``): the solutions tagged
    ``main`` or ``accepted``, and those tagged ``time-limit-exceeded``, named ``TAG/FILE``."""
    package = Path(package)
    by_tag = _solutions_by_tag(package, _root(package) if root is None else root)

    def of(tags: tuple[str, ...]) -> list[Submission]:
        return [Submission(f"{tag}/{name}", code, lang) for tag in tags for lang, name, code in by_tag.get(tag, [])]

    return of(REFERENCE_TAGS), of(("time-limit-exceeded",))


def polygon_package(directory: str | os.PathLike, **options) -> ProblemPackage:
    """A Polygon package with what an env needs: statement, examples, solutions by tag, tags (module docstring).
    ``options`` go to :func:`load_polygon_problem`."""
    package = Path(directory)
    root = _root(package)
    problem = load_polygon_problem(package, **options)
    title, sections, where = polygon_statement(package, root)
    if where:
        problem.metadata["statement_path"] = where
    body = "\n\n".join(
        f"## {heading}\n{sections[key]}" if heading else sections[key] for key, heading in SECTIONS if key in sections
    )
    if not body:
        body = "(This package has no statement; the examples show the format.)"
    names = {n.get("language"): n.get("value") for n in root.findall("names/name")}
    title = title or names.get("english") or next(iter(names.values()), None) or problem.name
    examples = [] if problem.interactive else [(t.input.decode(), t.answer.decode()) for t in problem.samples]
    references, wrong = polygon_solutions(package, root)
    tags = [t.get("value") for t in root.findall("tags/tag") if t.get("value")]
    return ProblemPackage(
        problem,
        body,
        examples,
        references,
        wrong,
        title=title,
        id=problem.name,
        tags=tags,
        note=sections.get("notes", ""),
    )


FORMAT = ProblemFormat(
    name="polygon",
    marker="problem.xml",
    description="Polygon package",
    load_problem=load_polygon_problem,
    load_package=polygon_package,
    options=("testset", "testlib_h"),
)
