"""ICPC / Kattis problem packages, read and judged the way Kattis problemtools does (legacy and 2023-07 formats).

A package::

    PROBLEM/
      problem.yaml             name, type (pass-fail | scoring | interactive), limits, validation, validator_flags
      .timelimit               optional: the time limit in seconds (Kattis writes it when it installs a package)
      data/testdata.yaml       optional in any group folder, inherited by its subgroups: on_reject (break |
                               continue), grading, grader_flags, accept_score, reject_score, range,
                               output_validator_flags
      data/sample/NAME.in|.ans, data/secret/**/NAME.in|.ans   tests; every folder under data/ is a test group
      output_validators/X/ (legacy) or output_validator/ (2023-07)   a C, C++ or Python output validator
      problem_statement/ (legacy) or statement/ (2023-07)        problem.LANG.md | problem.LANG.tex
      submissions/accepted | wrong_answer | time_limit_exceeded | run_time_error | partially_accepted | ...

How it is judged (problemtools' ``judge/`` and ``support/default_grader``, reimplemented here):
  - Tests and groups in folder order (plain sorted names, as problemtools lists them), depth first; a test is an
    ``.ans`` with its ``.in`` (an ``.in`` without ``.ans`` is refused: problemtools would silently skip it).
  - Output: the default validator (``icpc:FLAGS``, checkers.py) with ``validator_flags`` plus each group's
    ``output_validator_flags``, or the package's validator run as ``validator IN ANS FEEDBACK_DIR/ FLAGS < OUTPUT``
    (exit 42 accepted, 43 wrong, anything else a judge error; ``judgemessage.txt`` is the message; ``score.txt``
    is the test's score where the problem allows custom scores, a judge error where it does not or on a 43).
    C and C++ validators are compiled once on the host (cached by the hash of their files and the compiler).
  - Interactive problems: the validator talks to the submission (its stdin is the submission's stdout and the
    reverse), through ``kattis_interactor.py``; verdict precedence as in ``judge.core``.
  - Grading per group: a test scores ``accept_score`` (default 1) when AC, else ``reject_score`` (0), unless its
    validator wrote a score; after a non-AC child a group with ``on_reject: break`` stops. The group's verdict and
    score come from the default grader's flags: verdicts ``worst_error`` (default; JE > RTE > MLE > TLE > OLE > WA >
    AC), ``no_errors``, ``first_error``, ``always_accept``; scores ``sum`` (default), ``avg``, ``max``, ``min``;
    ``ignore_sample`` (only the last child counts) and ``accept_if_any_accepted``. A JE anywhere makes the group JE.
  - Limits: memory ``limits.memory`` (MiB, default 1024), output ``limits.output`` (MiB, default 8), validator
    time ``limits.validation_time`` (default 60 s). Time limit: ``limits.time_limit`` (2023-07) or ``.timelimit``;
    otherwise problemtools' rule: the slowest accepted submission's CPU time times ``ac_to_time_limit`` (legacy
    ``time_multiplier``, default 5; 2023-07 ``time_multipliers.ac_to_time_limit``, default 2), rounded up to
    ``time_resolution`` (default 1 s) and at least that. Only the Python and C++ accepted submissions are run for
    it (cached per package content). ``slow_accepted`` submissions must be accepted within that limit times
    ``time_limit_to_tle`` (legacy ``time_safety_margin``, default 2; 2023-07 default 1.5).
  - Refused with an error that names the feature: multi-pass and submit-answer problems, custom graders,
    ``include/`` folders, unknown default-validator or grader flags, validators in other languages or with build
    scripts, submissions in languages other than Python 3 and C++.

Verdict names: the judge's own (AC WA TLE MLE OLE RE JE, ILE for an idle interactive solution); Kattis calls RE
"RTE". problemtools itself reports a solution killed at the memory limit as RTE (its ``run_time_error``
folder holds such submissions), where this judge says MLE.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..results import JudgeResult, Limits, TestResult, Verdict
from ..submission import TestCase
from .checkers import IcpcDefaultChecker
from .languages import submission_language
from .testdata import Problem

EXIT_AC, EXIT_WA = 42, 43
INTERACTOR_ADAPTER = Path(__file__).with_name("kattis_interactor.py")
#: problemtools' config/testdata.yaml defaults.
GROUP_DEFAULTS = {"on_reject": "break", "grading": "default", "grader_flags": "", "accept_score": 1.0,
                  "reject_score": 0.0, "range": "-inf +inf", "output_validator_flags": "",
                  "input_validator_flags": ""}
SCORING_ONLY_KEYS = ("accept_score", "reject_score", "range")
VERDICT_AGGREGATORS = ("worst_error", "no_errors", "first_error", "always_accept")
SCORE_AGGREGATORS = ("sum", "avg", "max", "min")
GRADER_FLAGS = (*VERDICT_AGGREGATORS, *SCORE_AGGREGATORS, "ignore_sample", "accept_if_any_accepted")
#: The default grader's order, worst first.
ERROR_ORDER = ("JE", "IF", "RTE", "MLE", "TLE", "OLE", "WA", "PE", "AC")
TO_KATTIS = {Verdict.AC: "AC", Verdict.WA: "WA", Verdict.PE: "WA", Verdict.TLE: "TLE", Verdict.ILE: "TLE",
             Verdict.MLE: "MLE", Verdict.OLE: "OLE", Verdict.RE: "RTE", Verdict.JE: "JE"}
FROM_KATTIS = {"AC": Verdict.AC, "WA": Verdict.WA, "PE": Verdict.PE, "TLE": Verdict.TLE, "MLE": Verdict.MLE,
               "OLE": Verdict.OLE, "RTE": Verdict.RE, "JE": Verdict.JE, "IF": Verdict.JE}
VALIDATOR_SUFFIXES = {".py": "py", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".c": "c"}
HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".hxx")
TIME_LIMIT_PROBE_S = 60.0  # CPU limit while timing the accepted submissions (problemtools allows up to 300 s)


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


def _types(config: dict, path: Path, legacy: bool) -> frozenset:
    if legacy:
        kind = str(config.get("type", "pass-fail"))
        validation = str(config.get("validation", "default")).split()
        if not validation or validation[0] not in ("default", "custom"):
            raise ValueError(f"{path}: validation must be 'default' or 'custom [interactive] [score]', got "
                             f"{config.get('validation')!r}")
        unknown = [w for w in validation[1:] if w not in ("interactive", "score", "multi-pass")]
        if unknown or (validation[0] == "default" and validation[1:]):
            raise ValueError(f"{path}: unknown validation options {validation[1:]!r} (known after 'custom': "
                             "interactive, score)")
        types = {kind, *(w for w in validation[1:] if w in ("interactive", "multi-pass"))}
    else:
        raw = config.get("type", "pass-fail")
        types = set(raw if isinstance(raw, list) else str(raw).split())
    known = {"pass-fail", "scoring", "interactive", "multi-pass", "submit-answer"}
    if types - known:
        raise ValueError(f"{path}: unknown problem type {sorted(types - known)} (known: {sorted(known)})")
    if "multi-pass" in types:
        raise ValueError(f"{path}: multi-pass problems are not supported (the validator's nextpass.in would need "
                         "further runs of the submission); judging only the first pass would accept wrong "
                         "submissions, so the package is refused")
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
        raise ValueError(f"{where}: grading {config['grading']!r} (a custom grader) is not supported; use the "
                         "default grader's grader_flags")
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
        elif path.suffix == ".in" and not path.with_suffix(".ans").exists():
            raise ValueError(f"test input {str(path)!r} has no answer file {path.with_suffix('.ans').name!r}: "
                             "problemtools would skip it unjudged; add the answer (or remove the input)")
        elif path.suffix == ".ans":
            raise ValueError(f"answer files without input: {str(path)!r} has no {path.with_suffix('.in').name!r}; "
                             "add the input (or remove the answer)")
    return group


def _validator_dir(directory: Path) -> Path | None:
    for name in ("output_validator", "output_validators"):
        if (directory / name).is_dir():
            return directory / name
    return None


def _cache_root() -> Path:
    base = os.environ.get("AGENTGSPO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "agentgspo")
    return Path(base)


def _compile_validator(files: list[Path], lang: str, where: str) -> Path:
    """Compile a C/C++ validator (all its sources, its folder on the include path) once; cached by content hash."""
    compiler = ["gcc", "-std=gnu11"] if lang == "c" else ["g++", "-std=gnu++17"]
    try:
        version = subprocess.run([compiler[0], "--version"], capture_output=True, text=True).stdout
    except OSError:
        raise ValueError(f"{where}: compiling the output validator needs {compiler[0]} (not found); install it") \
            from None
    digest = hashlib.sha256(version.encode() + " ".join(compiler).encode())
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    target = _cache_root() / "kattis-validators" / digest.hexdigest()[:32]
    binary = target / "validator"
    if binary.exists():
        return binary
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        sources = [str(p) for p in files if p.suffix in VALIDATOR_SUFFIXES]
        tmp = target / f"validator.tmp{os.getpid()}"
        done = subprocess.run([*compiler, "-O2", "-I", str(files[0].parent), "-o", str(tmp), *sources, "-lm"],
                              capture_output=True, timeout=300)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise ValueError(f"{where}: the output validator does not compile:\n"
                             f"{done.stderr.decode('utf-8', 'replace')[-3000:]}")
        os.replace(tmp, binary)
    return binary


def _output_validator(directory: Path, custom: bool) -> OutputValidator | None:
    folder = _validator_dir(directory)
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder else []
    if not custom:
        return None  # the default validator (problemtools ignores a validator folder then)
    if not entries:
        raise ValueError(f"{directory / 'problem.yaml'}: the problem needs a custom output validator (custom "
                         "validation or interactive) but output_validator/ (2023-07) or output_validators/"
                         "NAME/ (legacy) holds none: add it there")
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
        raise ValueError(f"{program}: expected one output validator in C, C++ or Python, found "
                         f"{[p.name for p in files][:8]} (other languages are not supported)")
    lang = langs.pop()
    if lang == "py":
        scripts = [p for p in files if p.suffix == ".py"]
        main = scripts[0] if len(scripts) == 1 else next((p for p in scripts if p.stem in ("validate", "main")), None)
        if main is None:
            raise ValueError(f"{program}: several Python files {[p.name for p in scripts]} and none is "
                             "validate.py or main.py: name the entry point so")
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
    custom = custom or "interactive" in types or (not legacy and _validator_dir(directory) is not None)
    validator = _output_validator(directory, custom)
    flags = str(config.get("validator_flags") or "").split() if legacy else []
    if validator is None:
        for group in root.groups():  # refuse bad default-validator flags now, naming where they come from
            joined = " ".join(flags + str(group.config.get("output_validator_flags") or "").split())
            try:
                IcpcDefaultChecker.from_flags(joined)
            except ValueError as exc:
                raise ValueError(f"{config_path} validator_flags with the output_validator_flags of "
                                 f"{directory / group.name / 'testdata.yaml'}: {exc}") from None
    fixed, source = None, "computed from the accepted submissions"
    if limits.get("time_limit") is not None:
        fixed, source = _float(limits["time_limit"], f"{config_path}: limits.time_limit"), "problem.yaml"
    elif (directory / ".timelimit").is_file():
        words = (directory / ".timelimit").read_text().split()
        fixed, source = _float(words[0] if words else "", str(directory / ".timelimit")), ".timelimit"
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
    samples = [TestCase(t.input_path.read_bytes(), t.answer_path.read_bytes(), t.name)
               for t in root.tests() if t.name.startswith("sample/")]
    interactions = [p.read_text(errors="replace") for p in sorted(sample_dir.glob("*.interaction"))] \
        if sample_dir.is_dir() else []
    return KattisPackage(
        directory=directory, name=name, config=config, format_version="legacy" if legacy else "2023-07",
        types=types, root=root, validator=validator, validator_flags=flags, fixed_time_limit_s=fixed,
        time_limit_source=source, ac_to_time_limit=ac_to_tl, time_limit_to_tle=tl_to_tle,
        time_resolution_s=_float(limits.get("time_resolution", 1.0), f"{config_path}: limits.time_resolution"),
        memory_limit_mb=_float(limits.get("memory", 1024), f"{config_path}: limits.memory"),
        output_limit_mb=_float(limits.get("output", 8), f"{config_path}: limits.output"),
        validation_time_s=_float(limits.get("validation_time", 60), f"{config_path}: limits.validation_time"),
        custom_score_allowed=("score" in validation_words) if legacy else scoring,
        custom_score_mandatory=("score" in validation_words) if legacy else False,
        statement=statement, statement_path=statement_path, names=names, samples=samples,
        sample_interactions=interactions)


# --- checking one test's output ---------------------------------------------------------------------------------
def _feedback(feedback_dir: Path) -> str:
    try:
        return (feedback_dir / "judgemessage.txt").read_text(errors="replace").strip()[:500]
    except OSError:
        return ""


def _validator_score(package: KattisPackage, feedback_dir: Path, verdict: Verdict) -> tuple[Verdict, str, float | None]:
    """Apply problemtools' score.txt rules to a validator's verdict (AC/WA); returns (verdict, message, score)."""
    message = _feedback(feedback_dir)
    score_file = feedback_dir / "score.txt"
    if verdict == Verdict.WA:
        if score_file.is_file():
            return Verdict.JE, "output validator wrote score.txt with a wrong-answer verdict", None
        return verdict, message, None
    if score_file.is_file() and not package.custom_score_allowed:
        return Verdict.JE, "output validator wrote score.txt but the problem has no custom scores", None
    if score_file.is_file():
        try:
            return verdict, message, float(score_file.read_text())
        except ValueError as exc:
            return Verdict.JE, f"output validator wrote an unreadable score.txt: {exc}", None
    if package.custom_score_mandatory:
        return Verdict.JE, "the problem has custom scores but the output validator wrote no score.txt", None
    return verdict, message, None


class KattisOutputChecker:
    """Checks a test's output with the package's validator (or the default one) and its group's flags."""

    def __init__(self, package: KattisPackage, flags_by_test: dict[str, list[str]]) -> None:
        self.package, self.flags_by_test = package, flags_by_test
        self._default: dict[str, IcpcDefaultChecker] = {}

    def check(self, input_data: bytes, output: bytes, answer: bytes):
        """Check with the problem-wide flags only (the judge calls ``check_case``, which knows the test's group)."""
        return self._check(input_data, output, answer, self.package.validator_flags)

    def check_case(self, case: TestCase, output: bytes):
        """Check ``output`` of test ``case`` with its group's output_validator_flags; (verdict, message, score)."""
        return self._check(case.input, output, case.answer, self.flags_by_test.get(case.name, []))

    def _check(self, input_data: bytes, output: bytes, answer: bytes, flags: list[str]):
        if self.package.validator is None:
            key = " ".join(flags)
            if key not in self._default:
                self._default[key] = IcpcDefaultChecker.from_flags(key)
            verdict, message = self._default[key].check(input_data, output, answer)
            return verdict, message, None
        with tempfile.TemporaryDirectory(prefix="agentgspo-kattis-") as tmp:
            tmp_path = Path(tmp)
            (tmp_path / "feedback").mkdir()
            (tmp_path / "in").write_bytes(input_data)
            (tmp_path / "ans").write_bytes(answer)
            (tmp_path / "out").write_bytes(output)
            argv = self.package.validator.argv + [str(tmp_path / "in"), str(tmp_path / "ans"),
                                                  str(tmp_path / "feedback") + os.sep, *flags]
            try:
                with open(tmp_path / "out", "rb") as stdin:
                    done = subprocess.run(argv, stdin=stdin, capture_output=True, cwd=tmp,
                                          timeout=self.package.validation_time_s)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return Verdict.JE, f"output validator failed to run: {exc}", None
            if done.returncode in (EXIT_AC, EXIT_WA):
                return _validator_score(self.package, tmp_path / "feedback",
                                        Verdict.AC if done.returncode == EXIT_AC else Verdict.WA)
            detail = (_feedback(tmp_path / "feedback") or done.stderr.decode("utf-8", "replace").strip())[-500:]
            return Verdict.JE, (f"output validator exited with {done.returncode} (judge failure, not the "
                                f"solution's; expected 42 or 43): {detail}"), None


# --- grading -------------------------------------------------------------------------------------------------
@dataclass
class _Graded:
    verdict: str  # Kattis verdict name
    score: float | None


def grade(children: list[_Graded], grader_flags: str) -> _Graded:
    """problemtools' default grader on a group's child results: (verdict, score); see the module docstring."""
    verdict_rule, score_rule, ignore_sample, any_accepted = "worst_error", "sum", False, False
    for flag in grader_flags.split():  # later flags override earlier ones, as in the default grader
        if flag in VERDICT_AGGREGATORS:
            verdict_rule = flag
        elif flag in SCORE_AGGREGATORS:
            score_rule = flag
        ignore_sample = ignore_sample or flag == "ignore_sample"
        any_accepted = any_accepted or flag == "accept_if_any_accepted"
    verdicts = [c.verdict for c in children]
    scores = [0.0 if c.score is None else float(c.score) for c in children]
    if ignore_sample:
        if not 1 <= len(verdicts) <= 2:
            return _Graded("JE", 0.0)  # the default grader's assertion: ignore_sample is for sample + secret
        verdicts, scores = verdicts[-1:], scores[-1:]
    if any_accepted and "AC" in verdicts:
        verdict = "AC"
    elif verdict_rule in ("worst_error", "no_errors"):
        verdict = min(verdicts + ["AC"], key=ERROR_ORDER.index)
    elif verdict_rule == "first_error":
        verdict = next((v for v in verdicts if v != "AC"), "AC")
    else:
        verdict = "AC"
    total = {"sum": sum, "max": max, "min": min, "avg": lambda s: sum(s) / len(s)}[score_rule](scores)
    return _Graded(verdict, total)


def _grade_group(group: KattisGroup, results: dict[str, TestResult], scoring: bool, counted: set,
                 report: list[dict]) -> _Graded | None:
    """Walk ``group`` as problemtools' SubmissionJudge does; None when it holds no test at all."""
    children: list[_Graded] = []
    for item in group.items:
        if isinstance(item, KattisGroup):
            child = _grade_group(item, results, scoring, counted, report)
            if child is None:
                continue
        else:
            result = results[item.name]
            kattis = TO_KATTIS.get(result.verdict, "JE")
            score = result.score if result.score is not None else \
                group.config["accept_score"] if kattis == "AC" else group.config["reject_score"]
            child = _Graded(kattis, score)
            counted.add(item.name)
        children.append(child)
        if child.verdict != "AC" and group.config["on_reject"] == "break":
            break
    if not children:
        return None
    je = next((c for c in children if c.verdict == "JE"), None)
    graded = _Graded("JE", None) if je else grade(children, str(group.config["grader_flags"] or ""))
    if not scoring:
        graded.score = None
    report.append({"name": group.name, "verdict": FROM_KATTIS.get(graded.verdict, Verdict.JE).value,
                   "score": graded.score})
    return graded


# --- judging ---------------------------------------------------------------------------------------------------
def _flags_by_test(package: KattisPackage) -> dict[str, list[str]]:
    flags: dict[str, list[str]] = {}
    for group in package.root.groups():
        for item in group.items:
            if isinstance(item, KattisTest):
                flags[item.name] = package.validator_flags + str(group.config.get("output_validator_flags")
                                                                  or "").split()
    return flags


def _stops_at_first_failure(package: KattisPackage) -> bool:
    """Every group breaks on a rejection: the first failing test (in order) ends the judging, as in problemtools."""
    return all(group.config["on_reject"] == "break" for group in package.root.groups())


def _interactive_cases(package: KattisPackage, tests: list[KattisTest], flags: dict, tmp: Path) -> list[TestCase]:
    cases = []
    for i, test in enumerate(tests):
        manifest = {"argv": package.validator.argv, "input": str(test.input_path.resolve()),
                    "answer": str(test.answer_path.resolve()), "feedback_dir": str(tmp / f"feedback{i}"),
                    "flags": flags.get(test.name, [])}
        cases.append(TestCase(json.dumps(manifest).encode(), b"", test.name))
    return cases


def _package_archive(package: KattisPackage, with_accepted: bool) -> bytes:
    """The package as a gzipped tar of what judging needs (problem.yaml, .timelimit, data/, the validator)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        names = ["problem.yaml", ".timelimit", "data", "output_validator", "output_validators"]
        if with_accepted:
            names.append("submissions/accepted")
        for name in names:
            if (package.directory / name).exists():
                tar.add(package.directory / name, arcname=name)
    return buffer.getvalue()


def _package_digest(package: KattisPackage) -> str:
    """SHA-256 of the files a computed time limit depends on: problem.yaml, data/, the validator, the accepted
    submissions (names and contents, in a fixed order)."""
    digest = hashlib.sha256()
    for name in ("problem.yaml", "data", "output_validator", "output_validators", "submissions/accepted"):
        path = package.directory / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
        for file in files:
            digest.update(str(file.relative_to(package.directory)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def time_limit_of(package: KattisPackage, backend="local") -> tuple[float, str]:
    """The package's time limit in seconds and where it comes from (see the module docstring for the rule).

    When problem.yaml or .timelimit fixes none, the accepted Python/C++ submissions are judged (each with a
    generous CPU limit) and their slowest CPU time sets it; the result is cached per package content.
    ValueError when there is no fixed limit and no accepted submission to time, or one of them is not accepted.
    """
    if package.fixed_time_limit_s is not None:
        return package.fixed_time_limit_s, package.time_limit_source
    accepted = sorted(p for p in (package.directory / "submissions" / "accepted").glob("*")
                      if p.is_file()) if (package.directory / "submissions" / "accepted").is_dir() else []
    runnable = []
    for path in accepted:
        try:
            runnable.append((path, submission_language(path)))
        except ValueError:
            continue
    if not runnable:
        raise ValueError(f"{package.directory}: no time limit (limits.time_limit in problem.yaml, or .timelimit) and "
                         "no Python or C++ submission in submissions/accepted to compute it from: add one of them, "
                         "or pass a time limit (--time-limit / time_limit_s=)")
    digest = _package_digest(package)
    cache = _cache_root() / "kattis-timelimits" / f"{digest}.json"
    if cache.is_file():
        saved = json.loads(cache.read_text())
        return saved["time_limit_s"], saved["source"]
    slowest, slowest_name = 0.0, ""
    for path, lang in runnable:
        result = judge_kattis(package, path.read_text(), lang, backend=backend, time_limit_s=TIME_LIMIT_PROBE_S)
        if result.verdict != Verdict.AC:
            raise ValueError(f"{path}: this accepted submission got {result.verdict.value} ({result.message[:200]}), "
                             "so the time limit cannot be computed from it; fix the package or pass a time limit")
        runtime = max((t.time_s for t in result.tests if t.verdict != Verdict.SKIPPED), default=0.0)
        if runtime >= slowest:
            slowest, slowest_name = runtime, path.name
    resolution = package.time_resolution_s
    time_limit = max(1, math.ceil(slowest * package.ac_to_time_limit / resolution)) * resolution
    source = (f"computed: slowest accepted submission {slowest_name} ({slowest:.3f} s CPU) x ac_to_time_limit "
              f"{package.ac_to_time_limit:g}, rounded up to {resolution:g} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"time_limit_s": time_limit, "source": source}))
    os.replace(tmp, cache)
    return time_limit, source


def judge_kattis(package: "KattisPackage | str | os.PathLike", source: str, lang: str = "py", *,
                 backend="local", time_limit_s: float | None = None, memory_limit_mb: float | None = None,
                 output_limit_mb: float | None = None, workers: int | None = None) -> JudgeResult:
    """Judge ``source`` on a Kattis package as problemtools does (see the module docstring).

    Returns a JudgeResult whose ``tests`` are in judging order (tests a ``break`` left unjudged are SKIPPED),
    ``groups`` the per-group verdicts and scores (the root ``data`` last), ``score`` the root score for scoring
    problems. The limits default to the package's (``time_limit_of`` for the time). Never raises for a bad
    submission; ValueError for a bad package or arguments.
    """
    from ..registry import get_sandbox
    from .core import judge

    if not isinstance(package, KattisPackage):
        package = load_kattis_package(package)
    sandbox = get_sandbox(backend)
    if hasattr(sandbox, "judge_package_remote"):  # the server judges the package with this same code
        with_accepted = time_limit_s is None and package.fixed_time_limit_s is None
        return sandbox.judge_package_remote(
            _package_archive(package, with_accepted), source, lang=lang, time_limit_s=time_limit_s,
            memory_limit_mb=memory_limit_mb, output_limit_mb=output_limit_mb)
    if time_limit_s is None:
        time_limit_s, _ = time_limit_of(package, backend)
    limits = Limits(time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb or package.memory_limit_mb,
                    output_limit_mb=output_limit_mb or package.output_limit_mb)
    tests = package.tests()
    flags = _flags_by_test(package)
    stop = _stops_at_first_failure(package)
    with tempfile.TemporaryDirectory(prefix="agentgspo-kattis-") as tmp:
        if package.interactive:
            cases = _interactive_cases(package, tests, flags, Path(tmp))
            result = judge(source, cases, lang=lang, interactor=INTERACTOR_ADAPTER, limits=limits,
                           stop_on_failure=stop, backend=sandbox, workers=workers)
            for i, test_result in enumerate(result.tests):
                if test_result.verdict == Verdict.AC:  # the validator's score.txt rules, as for batch tests
                    verdict, message, score = _validator_score(package, Path(tmp) / f"feedback{i}", Verdict.AC)
                    test_result.verdict, test_result.score = verdict, score
                    test_result.message = message or test_result.message
        else:
            cases = [TestCase(t.input_path.read_bytes(), t.answer_path.read_bytes(), t.name) for t in tests]
            result = judge(source, cases, lang=lang, checker=KattisOutputChecker(package, flags), limits=limits,
                           stop_on_failure=stop, backend=sandbox, workers=workers)
    if result.verdict == Verdict.CE or (result.verdict == Verdict.JE and not result.tests):
        return result
    by_name = {t.name: t for t in result.tests}
    missing = [t.name for t in tests if t.name not in by_name]
    for name in missing:  # the judge stopped early (a JE, or stop_on_failure): unjudged tests are skipped
        by_name[name] = TestResult(name, Verdict.SKIPPED)
    counted: set = set()
    report: list[dict] = []
    graded = _grade_group(package.root, by_name, package.scoring, counted, report)
    ordered = []
    for test in tests:
        test_result = by_name[test.name]
        if test.name not in counted and test_result.verdict != Verdict.SKIPPED:
            test_result = TestResult(test.name, Verdict.SKIPPED,
                                     message=f"not counted: an earlier rejection ended its group "
                                             f"(on_reject: break); it had {test_result.verdict.value}")
        ordered.append(test_result)
    verdict = FROM_KATTIS.get(graded.verdict, Verdict.JE) if graded else Verdict.JE
    message = result.message
    if package.scoring and graded is not None and graded.score is not None:
        message = (message + "; " if message else "") + f"score {graded.score:g} (best possible " \
                                                         f"{package.max_score():g})"
    return JudgeResult(verdict, ordered, compile_output=result.compile_output, compile_time_s=result.compile_time_s,
                       message=message, score=graded.score if graded else None, groups=report)


def load_kattis_problem(directory: str | os.PathLike, *, time_limit_s: float | None = None,
                        backend="local") -> Problem:
    """A Kattis package as a ``Problem`` (the public loader; ``judge_problem`` judges it with ``judge_kattis``).

    name: problem.yaml's name (English when there are several) or the statement's ``\\problemname``; statement:
    the text of ``problem.en.md`` / ``problem.md`` / ``problem.en.tex`` (``metadata["statement_path"]`` says
    which; "" when there is none); samples: ``data/sample`` tests (an interactive problem's ``.interaction``
    transcripts are in ``metadata["sample_interactions"]``); tests: every test in judging order; time limit:
    ``time_limit_s`` or ``time_limit_of`` (which may run the accepted submissions on ``backend`` once and cache
    it); checker: ``icpc:FLAGS`` (default validator) or ``kattis:VALIDATOR``. ``metadata["package"]`` is the
    KattisPackage; ``metadata["time_limit_source"]`` says where the time limit came from.
    """
    package = load_kattis_package(directory)
    source = "given"
    if time_limit_s is None:
        time_limit_s, source = time_limit_of(package, backend)
    tests = [TestCase(t.input_path.read_bytes(), t.answer_path.read_bytes(), t.name) for t in package.tests()]
    if package.validator is None:
        checker = "icpc:" + " ".join(package.validator_flags) if package.validator_flags else "icpc"
    else:
        checker = f"kattis:{package.validator.argv[-1]}"
    metadata = {"source": "kattis", "config": package.config, "package": package, "names": package.names,
                "statement_path": package.statement_path, "sample_interactions": package.sample_interactions,
                "time_limit_source": source, "scoring": package.scoring}
    return Problem(package.name, tests, time_limit_s, package.memory_limit_mb, checker, statement=package.statement,
                   samples=package.samples, interactive=package.interactive, metadata=metadata)
