"""Polygon (Codeforces) problem packages: ``problem.xml`` read for the limits, the tests, the checker and the
interactor, whose C++ sources are compiled against the package's own ``testlib.h`` (see ``judge/testlib.py``).

A package folder as Polygon exports it::

    PACKAGE/
      problem.xml                     <judging input-file output-file><testset name="tests">: time-limit (ms),
                                      memory-limit (bytes), test-count, input-path-pattern (tests/%02d),
                                      answer-path-pattern (tests/%02d.a), <tests><test sample= points= group=/>
                                      <assets><checker><source path=/>, <interactor><source path=/>
      files/testlib.h, files/check.cpp, files/interactor.cpp, tests/01, tests/01.a, ...

What is refused, with the reason, rather than judged differently from Polygon: a missing test file (a package
exported without its generated tests: run its ``doall.sh`` or export a full package), a missing answer file of a
non-interactive problem, file input/output under names other than ``input.txt``/``output.txt``, a checker that is
not a testlib C++ source, and a testset that does not exist.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from ..submission import TestCase
from .problems import Problem
from .testlib import compile_testlib_program, is_cpp_source


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
        raise ValueError(f"Polygon package {str(package)!r}: {role} {source.get('path')!r} is not C++ "
                         f"(type {source.get('type')!r}); only testlib C++ jury programs are supported")
    return path


def _io_mode(package: Path, judging) -> str:
    names = (judging.get("input-file") or "", judging.get("output-file") or "")
    if names == ("", ""):
        return "stdio"
    if names == ("input.txt", "output.txt"):
        return "file"
    raise ValueError(f"Polygon package {str(package)!r}: file I/O through {names[0] or 'stdin'!r} / "
                     f"{names[1] or 'stdout'!r} is not supported (only stdio, or input.txt and output.txt)")


def _pattern_path(package: Path, pattern: str, number: int) -> Path:
    try:
        return package / (pattern % number)
    except (TypeError, ValueError):
        raise ValueError(f"Polygon package {str(package)!r}: path pattern {pattern!r} is not a printf pattern "
                         "with one number, such as tests/%02d") from None


def load_polygon_problem(directory: str | os.PathLike, *, testset: str = "tests",
                         testlib_h: str | os.PathLike | None = None) -> Problem:
    """Read the Polygon package at ``directory`` (its ``testset``) into a Problem, compiling its checker and
    interactor now (a broken one is refused here, before any solution runs). ``testlib_h`` overrides the header
    the package ships beside its sources. Test points and groups go to ``metadata["points"]`` / ``["groups"]``."""
    package = Path(directory)
    xml_path = package / "problem.xml"
    if not xml_path.is_file():
        raise ValueError(f"{str(package)!r} is not a Polygon package: it has no problem.xml")
    try:
        root = ElementTree.parse(xml_path).getroot()
    except ElementTree.ParseError as exc:
        raise ValueError(f"Polygon package {str(package)!r}: problem.xml is not valid XML ({exc})") from None
    judging = root.find("judging")
    if judging is None:
        raise ValueError(f"Polygon package {str(package)!r}: problem.xml has no <judging> section")
    sets = {ts.get("name"): ts for ts in judging.findall("testset")}
    if testset not in sets:
        raise ValueError(f"Polygon package {str(package)!r}: no testset {testset!r} (it has {sorted(sets)})")
    ts = sets[testset]
    time_limit_s = int(_text(ts, "time-limit", package, "time limit")) / 1000
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
            raise ValueError(f"Polygon package {str(package)!r}: test {number} ({input_path.name}) is missing; "
                             "export the package with its generated tests or run its doall.sh first")
        if not answer_path.is_file() and not interactive:
            raise ValueError(f"Polygon package {str(package)!r}: answer of test {number} ({answer_path.name}) is "
                             "missing; run the package's doall.sh (it writes the answers with the main solution)")
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
            raise ValueError(f"Polygon package {str(package)!r}: checker type {checker_asset.get('type')!r} is "
                             "not supported (only testlib checkers)")
        checker = f"testlib:{compile_testlib_program(_source(package, checker_asset, 'checker'), testlib_h)}"
    interactor = None
    if interactive:
        interactor = str(compile_testlib_program(_source(package, interactor_asset, "interactor"), testlib_h))
    name_element = root.find("names/name")
    name = root.get("short-name") or (name_element.get("value") if name_element is not None else package.name)
    metadata = {"format": "polygon", "testset": testset}
    if points:
        metadata["points"] = points
    if groups:
        metadata["groups"] = groups
    return Problem(name, tests, time_limit_s, memory_limit_mb, checker, interactor, _io_mode(package, judging),
                   samples=samples, interactive=interactive, metadata=metadata)
