"""ICPC / Kattis problem packages read and checked (legacy and 2023-07 formats of Kattis problemtools)::

    PROBLEM/
      problem.yaml             name, type (pass-fail | scoring | interactive), limits, validation, validator_flags
      .timelimit               optional: the time limit in seconds (Kattis writes it when it installs a package)
      domjudge-problem.ini     optional: timelimit='SECONDS' (DOMjudge's export); the order: ../time_limits.py
      data/testdata.yaml       optional in any group folder, inherited by its subgroups: on_reject (break |
                               continue), grading, grader_flags, accept_score, reject_score, range,
                               output_validator_flags
      data/sample/NAME.in|.ans, data/secret/**/NAME.in|.ans   tests; every folder under data/ is a test group
      output_validators/X/ (legacy) or output_validator/ (2023-07)   a C, C++ or Python output validator
      problem_statement/ (legacy) or statement/ (2023-07)        problem.LANG.md | problem.LANG.tex
      submissions/accepted | wrong_answer | time_limit_exceeded | run_time_error | partially_accepted | ...

Groups list their folder in plain sorted order (problemtools: ``sorted(os.listdir)``), files and folders
together; a test is an ``.ans`` with its ``.in``. Refused with an error that names the feature: submit-answer
problems, custom graders, ``include/`` folders, unknown grader or default-validator flags,
validators in other languages or with build scripts. C and C++ validators are compiled here, once, on the host
(cached by the hash of their files and the compiler). Judging: ``kattis.py``.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agentgspo.core.paths import cache_root

from ...submission import TestCase
from ..checkers import IcpcDefaultChecker
from ..compile import build_once
from ..time_limits import package_time_limit

__all__ = ["KattisTest", "KattisGroup", "OutputValidator", "KattisPackage", "cache_root", "load_kattis_package"]

#: problemtools' config/testdata.yaml defaults.
GROUP_DEFAULTS = {
    "on_reject": "break",
    "grading": "default",
    "grader_flags": "",
    "accept_score": 1.0,
    "reject_score": 0.0,
    "range": "-inf +inf",
    "output_validator_flags": "",
    "input_validator_flags": "",
}
SCORING_ONLY_KEYS = ("accept_score", "reject_score", "range")
VERDICT_AGGREGATORS = ("worst_error", "no_errors", "first_error", "always_accept")
SCORE_AGGREGATORS = ("sum", "avg", "max", "min")
GRADER_FLAGS = (*VERDICT_AGGREGATORS, *SCORE_AGGREGATORS, "ignore_sample", "accept_if_any_accepted")
VALIDATOR_SUFFIXES = {".py": "py", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".c": "c"}
HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".hxx")


@dataclass
class KattisTest:
    """One test: ``name`` is its path under data/ without suffix (``secret/group1/03``)."""

    name: str
    input_path: Path
    answer_path: Path


@dataclass
class KattisGroup:
    """A test-data group (a folder under data/, data/ itself being the root) with its effective testdata.yaml."""

    name: str
    config: dict
    items: list = field(default_factory=list)  # KattisGroup | KattisTest, in judging order

    def tests(self) -> list[KattisTest]:
        """All tests of the group and its subgroups, depth first."""
        out: list[KattisTest] = []
        for item in self.items:
            out += item.tests() if isinstance(item, KattisGroup) else [item]
        return out

    def groups(self) -> list["KattisGroup"]:
        """This group and all its subgroups, depth first."""
        out = [self]
        for item in self.items:
            if isinstance(item, KattisGroup):
                out += item.groups()
        return out

    def score_range(self) -> tuple[float, float]:
        """The group's ``range`` as (low, high); unbounded when absent or unreadable (as problemtools)."""
        try:
            low, high = map(float, str(self.config.get("range")).split())
            return low, high
        except (TypeError, ValueError):
            return -math.inf, math.inf


@dataclass
class OutputValidator:
    """A package's output validator: ``argv`` runs it (a compiled binary, or python3 and the script)."""

    argv: list[str]
    source: str


@dataclass
class KattisPackage:
    """A read and checked package (see the module docstring); ``load_kattis_package`` builds it."""

    directory: Path
    name: str
    config: dict
    format_version: str  # "legacy" | "2023-07"
    types: frozenset
    root: KattisGroup
    validator: OutputValidator | None  # None: the default validator
    validator_flags: list[str]
    fixed_time_limit_s: float | None
    time_limit_source: str
    ac_to_time_limit: float
    time_limit_to_tle: float
    time_resolution_s: float
    memory_limit_mb: float
    output_limit_mb: float
    validation_time_s: float
    custom_score_allowed: bool
    custom_score_mandatory: bool
    validation_passes: int = 2
    statement: str = ""
    statement_path: str = ""
    names: dict = field(default_factory=dict)
    samples: list[TestCase] = field(default_factory=list)
    sample_interactions: list[str] = field(default_factory=list)

    @property
    def interactive(self) -> bool:
        """True for ``type: interactive`` (legacy: ``validation: custom interactive``)."""
        return "interactive" in self.types

    @property
    def multi_pass(self) -> bool:
        """True for ``type: multi-pass`` (legacy: ``validation: custom multi-pass``): the validator may ask for
        another run of the submission on its ``nextpass.in``, up to ``validation_passes`` runs."""
        return "multi-pass" in self.types

    @property
    def scoring(self) -> bool:
        """True for scoring problems."""
        return "scoring" in self.types

    def tests(self) -> list[KattisTest]:
        """Every test in judging order."""
        return self.root.tests()

    def max_score(self) -> float | None:
        """The best score the root group's range allows (the ``objective`` decides), None for pass-fail."""
        if not self.scoring:
            return None
        low, high = self.root.score_range()
        return low if (self.config.get("grading") or {}).get("objective") == "min" else high


# --- reading ---------------------------------------------------------------------------------------------------
def _yaml(path: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of keys to values, got {type(data).__name__}")
    return data


def _float(value, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{where}: expected a positive number, got {value!r}")
    return number


def _passes(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"{where}: expected a whole number of passes >= 2, got {value!r}")
    return value


def _types(config: dict, path: Path, legacy: bool) -> frozenset:
    if legacy:
        kind = str(config.get("type", "pass-fail"))
        validation = str(config.get("validation", "default")).split()
        if not validation or validation[0] not in ("default", "custom"):
            raise ValueError(
                f"{path}: validation must be 'default' or 'custom [interactive] [score]', got "
                f"{config.get('validation')!r}"
            )
        unknown = [w for w in validation[1:] if w not in ("interactive", "score", "multi-pass")]
        if unknown or (validation[0] == "default" and validation[1:]):
            raise ValueError(
                f"{path}: unknown validation options {validation[1:]!r} (known after 'custom': interactive, score)"
            )
        types = {kind, *(w for w in validation[1:] if w in ("interactive", "multi-pass"))}
    else:
        raw = config.get("type", "pass-fail")
        types = set(raw if isinstance(raw, list) else str(raw).split())
    known = {"pass-fail", "scoring", "interactive", "multi-pass", "submit-answer"}
    if types - known:
        raise ValueError(f"{path}: unknown problem type {sorted(types - known)} (known: {sorted(known)})")
    if "submit-answer" in types:
        raise ValueError(f"{path}: submit-answer problems are not supported (there is no program to run)")
    return frozenset(types)


def _group_config(directory: Path, parent: dict | None, package: dict) -> dict:
    own = _yaml(directory / "testdata.yaml") if (directory / "testdata.yaml").is_file() else {}
    config = dict(own)
    for key, value in (parent or {}).items():
        config.setdefault(key, value)
    legacy_grading = package["legacy_grading"]
    for key in SCORING_ONLY_KEYS:  # problem.yaml's (pre-)legacy grading keys apply to every group
        if legacy_grading.get(key) is not None:
            config[key] = legacy_grading[key]
    if legacy_grading.get("on_reject") == "first_error":
        config["on_reject"] = "break"
    elif legacy_grading.get("on_reject") == "grade":
        config["on_reject"] = "continue"
    if not package["scoring"]:
        for key in SCORING_ONLY_KEYS:
            config.setdefault(key, None)
    for key, value in GROUP_DEFAULTS.items():
        config.setdefault(key, value)
    where = directory / "testdata.yaml"
    if config["on_reject"] not in ("break", "continue"):
        raise ValueError(f"{where}: on_reject must be 'break' or 'continue', got {config['on_reject']!r}")
    if config["grading"] != "default":
        raise ValueError(
            f"{where}: grading {config['grading']!r} (a custom grader) is not supported; use the "
            "default grader's grader_flags"
        )
    unknown = [f for f in str(config["grader_flags"] or "").split() if f not in GRADER_FLAGS]
    if unknown:
        raise ValueError(f"{where}: unknown grader_flags {unknown} (the default grader knows {list(GRADER_FLAGS)})")
    for key in ("accept_score", "reject_score"):
        if config[key] is not None:
            try:
                config[key] = float(config[key])
            except (TypeError, ValueError):
                raise ValueError(f"{where}: {key} must be a number, got {config[key]!r}") from None
    return config


def _read_group(directory: Path, data_root: Path, parent: dict | None, package: dict) -> KattisGroup:
    config = _group_config(directory, parent, package)
    group = KattisGroup(str(directory.relative_to(data_root.parent)), config)
    for entry in sorted(os.listdir(directory)):  # problemtools: sorted(os.listdir), files and folders together
        path = directory / entry
        if path.is_dir():
            group.items.append(_read_group(path, data_root, config, package))
        elif path.suffix == ".ans" and path.with_suffix(".in").is_file():
            name = str(path.with_suffix("").relative_to(data_root))
            group.items.append(KattisTest(name, path.with_suffix(".in"), path))
        elif (
            path.suffix == ".in"
            and not path.with_suffix(".ans").exists()
            and not path.with_suffix(".interaction").exists()
        ):  # a sample transcript's input is no test
            raise ValueError(
                f"test input {str(path)!r} has no answer file {path.with_suffix('.ans').name!r}: "
                "problemtools would skip it unjudged; add the answer (or remove the input)"
            )
        elif path.suffix == ".ans":
            raise ValueError(
                f"answer files without input: {str(path)!r} has no {path.with_suffix('.in').name!r}; "
                "add the input (or remove the answer)"
            )
    return group


def _validator_dir(directory: Path) -> Path | None:
    for name in ("output_validator", "output_validators"):
        if (directory / name).is_dir():
            return directory / name
    return None


def _compile_validator(files: list[Path], lang: str, where: str) -> Path:
    """Compile a C/C++ validator (all its sources, its folder on the include path) once; cached by content hash."""
    compiler = ["gcc", "-std=gnu11"] if lang == "c" else ["g++", "-std=gnu++17"]
    try:
        version = subprocess.run([compiler[0], "--version"], capture_output=True, text=True).stdout
    except OSError:
        raise ValueError(
            f"{where}: compiling the output validator needs {compiler[0]} (not found); install it"
        ) from None
    digest = hashlib.sha256(version.encode() + " ".join(compiler).encode())
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    sources = [str(p) for p in files if p.suffix in VALIDATOR_SUFFIXES]

    def build(binary: Path) -> None:
        done = subprocess.run(
            [*compiler, "-O2", "-I", str(files[0].parent), "-o", str(binary), *sources, "-lm"],
            capture_output=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise ValueError(
                f"{where}: the output validator does not compile:\n{done.stderr.decode('utf-8', 'replace')[-3000:]}"
            )

    return build_once(cache_root() / "kattis-validators" / digest.hexdigest()[:32], "validator", build)


def _output_validator(directory: Path, custom: bool) -> OutputValidator | None:
    folder = _validator_dir(directory)
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder else []
    if not custom:
        return None  # the default validator (problemtools ignores a validator folder then)
    if not entries:
        raise ValueError(
            f"{directory / 'problem.yaml'}: the problem needs a custom output validator (custom "
            "validation, interactive or multi-pass) but output_validator/ (2023-07) or output_validators/"
            "NAME/ (legacy) holds none: add it there"
        )
    # A program is one file or one folder (problemtools' find_programs); output_validator/ in 2023-07 may also be
    # the program's own folder, its files directly inside.
    if len(entries) > 1 and any(p.is_dir() for p in entries):
        raise ValueError(f"{folder}: several output validators {[p.name for p in entries]}; a package has one")
    program = entries[0] if len(entries) == 1 else folder
    files = sorted(p for p in program.rglob("*") if p.is_file()) if program.is_dir() else [program]
    if program.is_dir() and ((program / "build").exists() or (program / "run").exists()):
        raise ValueError(f"{program}: validators with build/run scripts are not supported (use C, C++ or Python)")
    langs = {VALIDATOR_SUFFIXES[p.suffix] for p in files if p.suffix in VALIDATOR_SUFFIXES}
    if len(langs) != 1:
        raise ValueError(
            f"{program}: expected one output validator in C, C++ or Python, found "
            f"{[p.name for p in files][:8]} (other languages are not supported)"
        )
    lang = langs.pop()
    if lang == "py":
        scripts = [p for p in files if p.suffix == ".py"]
        main = scripts[0] if len(scripts) == 1 else next((p for p in scripts if p.stem in ("validate", "main")), None)
        if main is None:
            raise ValueError(
                f"{program}: several Python files {[p.name for p in scripts]} and none is "
                "validate.py or main.py: name the entry point so"
            )
        return OutputValidator([sys.executable or "python3", str(main.resolve())], str(main))
    binary = _compile_validator(files, lang, str(program))
    return OutputValidator([str(binary)], str(program))


def _statement(directory: Path) -> tuple[str, str, dict]:
    names: dict = {}
    for folder in ("statement", "problem_statement"):
        base = directory / folder
        if not base.is_dir():
            continue
        candidates = sorted(base.glob("problem*.md")) + sorted(base.glob("problem*.tex"))
        for path in candidates:
            match = re.search(r"\\problemname\{(.*?)\}", path.read_text(errors="replace"))
            if match:
                names.setdefault(path.stem.partition(".")[2] or "en", match.group(1).strip())
        preferred = [p for p in candidates if p.stem in ("problem.en", "problem")] + candidates
        if preferred:
            return preferred[0].read_text(errors="replace"), str(preferred[0]), names
    return "", "", names


def load_kattis_package(directory: str | os.PathLike) -> KattisPackage:
    """Read and check an ICPC/Kattis package (see the module docstring). ValueError names the file, the field and
    the fix for anything malformed or unsupported; nothing is run except compiling a C/C++ output validator."""
    directory = Path(directory)
    config_path = directory / "problem.yaml"
    if not config_path.is_file():
        raise ValueError(f"{str(directory)!r} is not a Kattis package: problem.yaml is missing")
    config = _yaml(config_path)
    version = str(config.get("problem_format_version", "legacy"))
    legacy = version == "legacy"
    if not legacy and not version.startswith("2023-07"):
        raise ValueError(f"{config_path}: problem_format_version {version!r} is not supported (legacy or 2023-07)")
    types = _types(config, config_path, legacy)
    if (directory / "include").is_dir():
        raise ValueError(f"{directory / 'include'}: packages whose submissions get included files are not supported")
    if (directory / "graders").is_dir() and any((directory / "graders").iterdir()):
        raise ValueError(f"{directory / 'graders'}: custom graders are not supported (the default grader is)")
    limits = config.get("limits") or {}
    if not isinstance(limits, dict):
        raise ValueError(f"{config_path}: limits must be a mapping, got {limits!r}")
    grading = config.get("grading") or {}
    validation_words = str(config.get("validation", "default")).split()
    scoring = "scoring" in types
    package_info = {"scoring": scoring, "legacy_grading": grading if legacy else {}}
    if not (directory / "data").is_dir():
        raise ValueError(f"{directory}: no data/ folder (expected data/sample and data/secret with NAME.in/.ans)")
    root = _read_group(directory / "data", directory / "data", None, package_info)
    if not root.tests():
        raise ValueError(f"{directory / 'data'}: no tests (NAME.in with NAME.ans) in data/ or its folders")
    custom = validation_words[0] == "custom" if legacy else False
    custom = (
        custom or bool({"interactive", "multi-pass"} & types) or (not legacy and _validator_dir(directory) is not None)
    )
    validator = _output_validator(directory, custom)
    flags = str(config.get("validator_flags") or "").split() if legacy else []
    if validator is None:
        for group in root.groups():  # refuse bad default-validator flags now, naming where they come from
            joined = " ".join(flags + str(group.config.get("output_validator_flags") or "").split())
            try:
                IcpcDefaultChecker.from_flags(joined)
            except ValueError as exc:
                raise ValueError(
                    f"{config_path} validator_flags with the output_validator_flags of "
                    f"{directory / group.name / 'testdata.yaml'}: {exc}"
                ) from None
    # problem.yaml limits.time_limit, else .timelimit, else domjudge-problem.ini (time_limits.py says why)
    fixed, source = package_time_limit(directory, limits)
    source = source or "computed from the accepted submissions"
    multipliers = limits.get("time_multipliers") or {}
    if legacy:
        ac_to_tl = _float(limits.get("time_multiplier", 5.0), f"{config_path}: limits.time_multiplier")
        tl_to_tle = _float(limits.get("time_safety_margin", 2.0), f"{config_path}: limits.time_safety_margin")
    else:
        ac_to_tl = _float(multipliers.get("ac_to_time_limit", 2.0), f"{config_path}: ac_to_time_limit")
        tl_to_tle = _float(multipliers.get("time_limit_to_tle", 1.5), f"{config_path}: time_limit_to_tle")
    statement, statement_path, names = _statement(directory)
    raw_name = config.get("name")
    if isinstance(raw_name, dict):
        names = {**names, **{str(k): str(v) for k, v in raw_name.items()}}
    elif raw_name:
        names = {**names, "en": str(raw_name)}
    name = names.get("en") or next(iter(names.values()), None) or directory.name
    sample_dir = directory / "data" / "sample"
    samples = [
        TestCase(t.input_path.read_bytes(), t.answer_path.read_bytes(), t.name)
        for t in root.tests()
        if t.name.startswith("sample/")
    ]
    interactions = (
        [p.read_text(errors="replace") for p in sorted(sample_dir.glob("*.interaction"))] if sample_dir.is_dir() else []
    )
    return KattisPackage(
        directory=directory,
        name=name,
        config=config,
        format_version="legacy" if legacy else "2023-07",
        types=types,
        root=root,
        validator=validator,
        validator_flags=flags,
        fixed_time_limit_s=fixed,
        time_limit_source=source,
        ac_to_time_limit=ac_to_tl,
        time_limit_to_tle=tl_to_tle,
        time_resolution_s=_float(limits.get("time_resolution", 1.0), f"{config_path}: limits.time_resolution"),
        memory_limit_mb=_float(limits.get("memory", 1024), f"{config_path}: limits.memory"),
        output_limit_mb=_float(limits.get("output", 8), f"{config_path}: limits.output"),
        validation_time_s=_float(limits.get("validation_time", 60), f"{config_path}: limits.validation_time"),
        custom_score_allowed=("score" in validation_words) if legacy else scoring,
        custom_score_mandatory=("score" in validation_words) if legacy else False,
        validation_passes=_passes(limits.get("validation_passes", 2), f"{config_path}: limits.validation_passes"),
        statement=statement,
        statement_path=statement_path,
        names=names,
        samples=samples,
        sample_interactions=interactions,
    )
