"""Output checkers: compare a solution's output with the jury's answer, outside the solution's sandbox.

Built in: ``tokens`` (whitespace-insensitive, case-sensitive tokens; the default), ``float:EPS`` (numbers
within absolute OR relative error EPS, other tokens exact) and ``icpc[:FLAGS]``, the ICPC/Kattis default output
validator with a ``problem.yaml``'s ``validator_flags`` (case-insensitive unless ``case_sensitive``, whitespace-
insensitive unless ``space_change_sensitive``, numbers within ``float_absolute_tolerance`` /
``float_relative_tolerance`` / ``float_tolerance`` EPS; any mismatch is WA). External: ``testlib:PATH`` runs
``PATH INPUT OUTPUT ANSWER`` (exit 0 AC, 1 WA, 2 PE, anything else a judge error) and ``openr1:PATH`` runs an
open-r1/codeforces generated checker ``PATH INPUT ANSWER OUTPUT`` (prints 1 or 100 on stdout for a pass);
``kattis:PATH`` runs an ICPC output validator ``PATH INPUT ANSWER FEEDBACK_DIR < OUTPUT`` (exit 42 AC, 43 WA).
A ``.py`` checker is run with python3; its uncaught exception (exit 1 with a traceback) is a judge error, not WA.
Checkers are jury code: trusted, run with a timeout only.

Token rules as testlib's standard checkers (checkers/wcmp.cpp, rcmp*.cpp, testlib.h ``isBlanks``): ``tokens`` and
``float:EPS`` separate tokens by space, tab, CR and LF only (a form feed or vertical tab is part of a token); a
differing token is WA; output that ends early or has extra tokens is WA for ``tokens`` (as wcmp and ncmp say) and PE
for ``float:EPS`` (rcmp's unexpected EOF and "extra information in the output file"), as is an output token that is
no number where the jury's is one (rcmp's "expected double"). ``icpc`` splits on every C
``isspace`` character, as problemtools' default validator does, and every mismatch there is WA.

Two more compares mirror the services ``sandbox-server --compat-apis`` stands in for (docs/sandbox_apis.md), and are
built by those APIs rather than named by a spec: :class:`LinesChecker` (SandboxFusion's stdin/stdout compare) and
:class:`YesNoTokensChecker` (open-r1's Codeforces Piston package's diff).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..results import Verdict
from .testlib import compile_testlib_program, is_cpp_source, testlib_outcome
from ..submission import PROGRAM_CHECKERS

__all__ = [
    "Checker",
    "testlib_tokens",
    "TokensChecker",
    "FloatChecker",
    "c_float",
    "IcpcDefaultChecker",
    "LinesChecker",
    "YesNoTokensChecker",
    "program_argv",
    "python_crashed",
    "ExternalChecker",
    "CaptureChecker",
    "make_checker",
]

CHECKER_TIMEOUT_S = 30.0


class Checker(Protocol):
    """Decides one test: ``check(input, output, answer) -> (verdict, message)``; verdict AC, WA, PE or JE. A scoring
    checker may return ``(verdict, message, score)`` (testlib's points and partial scores)."""

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """The verdict and message of ``output`` on the test ``input_data`` with the expected ``answer``."""
        ...


def _show(token: bytes) -> str:
    return repr(token[:50].decode("utf-8", "replace"))


_TESTLIB_BLANKS = re.compile(rb"[ \t\r\n]+")


def testlib_tokens(data: bytes) -> list[bytes]:
    """The tokens testlib reads: runs of anything but space, tab, CR and LF (testlib.h ``isBlanks``), so a form feed
    or vertical tab stays inside a token, unlike ``bytes.split()``.

    >>> testlib_tokens(b"1\\x0c2 3\\n")
    [b'1\\x0c2', b'3']
    """
    if b"\x0b" not in data and b"\x0c" not in data:
        return data.split()  # the same split without those two, and faster
    return [token for token in _TESTLIB_BLANKS.split(data) if token]


def _compare_tokens(
    output: bytes,
    answer: bytes,
    same,
    length_mismatch: Verdict = Verdict.PE,
    split=bytes.split,
    mismatch=lambda got, want: Verdict.WA,
) -> tuple[Verdict, str]:
    out_tokens, ans_tokens = split(output), split(answer)
    for i, (got, want) in enumerate(zip(out_tokens, ans_tokens)):
        if not same(got, want):
            return mismatch(got, want), f"token {i + 1}: expected {_show(want)}, got {_show(got)}"
    if len(out_tokens) < len(ans_tokens):
        return length_mismatch, f"output ended after {len(out_tokens)} tokens, expected {len(ans_tokens)}"
    if len(out_tokens) > len(ans_tokens):
        return length_mismatch, (f"extra output after {len(ans_tokens)} tokens: {_show(out_tokens[len(ans_tokens)])}")
    return Verdict.AC, f"{len(ans_tokens)} tokens"


class TokensChecker:
    """Case-sensitive token comparison as testlib's wcmp (the usual default): tokens separated by space, tab, CR,
    LF; a differing, missing or extra token is WA.

    >>> TokensChecker().check(b"", b"1  2\\n", b"1 2")[0].value
    'AC'
    >>> TokensChecker().check(b"", b"1 3", b"1 2")[0].value
    'WA'
    """

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """AC when the token sequences are equal; else WA (wcmp: no PE for missing or extra tokens)."""
        return _compare_tokens(output, answer, bytes.__eq__, Verdict.WA, testlib_tokens)


def _number(token: bytes) -> float:
    """float(token), except that Python's digit separators ("1_000") and whitespace around the digits (a form feed
    inside a testlib token) do not make a number in a judge's output."""
    if b"_" in token or token != token.strip():
        raise ValueError(token)
    return float(token)


def _close(value: float, expected: float, absolute: float | None, relative: float | None, slack: float = 0.0) -> bool:
    """``|value - expected|`` within ``absolute`` or within ``relative * |expected|`` (None: not that test), each
    plus ``slack`` (float round-off)."""
    error = abs(value - expected)
    return (absolute is not None and error <= absolute + slack) or (
        relative is not None and error <= relative * abs(expected) + slack
    )


@dataclass
class FloatChecker:
    """Tokens where numbers match within absolute or relative error ``eps`` (testlib's doubleCompare).

    >>> FloatChecker(1e-6).check(b"", b"0.3333333", b"0.333333333")[0].value
    'AC'
    >>> FloatChecker(1e-6).check(b"", b"0.3334", b"0.333333333")[0].value
    'WA'
    """

    eps: float

    def _same(self, got: bytes, want: bytes) -> bool:
        try:
            expected = _number(want)
        except ValueError:
            return got == want
        try:
            value = _number(got)
        except ValueError:
            return False
        if math.isnan(expected) or math.isnan(value):
            return math.isnan(expected) and math.isnan(value)
        if math.isinf(expected) or math.isinf(value):
            return expected == value
        return _close(value, expected, self.eps, self.eps, slack=1e-15)

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """AC when every token matches (numbers within eps); WA on a differing token; PE when tokens are missing or
        extra, or no number stands where the jury's is one (as testlib's rcmp family: unexpected EOF, extra
        information in the output file, expected double)."""
        return _compare_tokens(output, answer, self._same, Verdict.PE, testlib_tokens, self._mismatch)

    @staticmethod
    def _mismatch(got: bytes, want: bytes) -> Verdict:
        """PE where the jury has a number and the output no number (rcmp: "expected double"), else WA."""
        for token, verdict in ((want, Verdict.WA), (got, Verdict.PE)):
            try:
                _number(token)
            except ValueError:
                return verdict
        return Verdict.WA


# A whole token as C's strtod reads it (the Kattis default validator's ``isfloat``: sscanf "%lf" with nothing left):
# decimal, or hexadecimal with an optional binary exponent (C99 6.4.4.2); only finite values count as numbers.
_C_DECIMAL = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_C_HEX = re.compile(rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?")


def c_float(token: bytes) -> float | None:
    """The finite number a whole token spells for C's strtod (``1e-3``, ``.5``, ``0x10``, ``0x1.8p1``), else None.

    >>> c_float(b"0x10"), c_float(b"1e400"), c_float(b"1_0")
    (16.0, None, None)
    """
    try:
        if _C_DECIMAL.fullmatch(token):
            value = float(token)
        elif _C_HEX.fullmatch(token):
            value = float.fromhex(token.decode())
        else:
            return None
    except (OverflowError, ValueError):
        return None
    return value if math.isfinite(value) else None


ICPC_FLAGS_WITH_VALUE = ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance")
ICPC_FLAGS = ("case_sensitive", "space_change_sensitive", *ICPC_FLAGS_WITH_VALUE)


@dataclass
class IcpcDefaultChecker:
    """The ICPC/Kattis default output validator (problem package format, ``validator_flags``).

    Tokens compare case-insensitively unless ``case_sensitive``; whitespace only separates tokens unless
    ``space_change_sensitive`` (then it must match exactly). When the jury token is a number and a tolerance is set,
    the output's number is accepted within the absolute tolerance OR the relative one (``float_tolerance`` sets
    both); with no tolerance numbers compare as text. Every mismatch is WA (the format has no PE).

    >>> IcpcDefaultChecker().check(b"", b"YES", b"yes")[0].value
    'AC'
    >>> IcpcDefaultChecker(case_sensitive=True).check(b"", b"YES", b"yes")[0].value
    'WA'
    >>> IcpcDefaultChecker(absolute_tolerance=1e-3).check(b"", b"1.0005", b"1")[0].value
    'AC'
    """

    case_sensitive: bool = False
    space_change_sensitive: bool = False
    absolute_tolerance: float | None = None
    relative_tolerance: float | None = None

    @classmethod
    def from_flags(cls, flags: str) -> "IcpcDefaultChecker":
        """Parse ``validator_flags`` such as ``"float_tolerance 1e-6 case_sensitive"``; unknown flags are errors."""
        words, options, i = flags.split(), {}, 0
        while i < len(words):
            flag = words[i]
            if flag not in ICPC_FLAGS:
                raise ValueError(f"validator_flags {flags!r}: unknown flag {flag!r}; expected some of {ICPC_FLAGS}")
            if flag in ICPC_FLAGS_WITH_VALUE:
                try:
                    value = float(words[i + 1])
                except (IndexError, ValueError):
                    value = math.nan
                if not 0 <= value < math.inf:
                    raise ValueError(
                        f"validator_flags {flags!r}: {flag} needs a finite tolerance >= 0 after it, "
                        "such as float_tolerance 1e-6"
                    )
                if flag in ("float_tolerance", "float_absolute_tolerance"):
                    options["absolute_tolerance"] = value
                if flag in ("float_tolerance", "float_relative_tolerance"):
                    options["relative_tolerance"] = value
                i += 2
            else:
                options[flag] = True
                i += 1
        return cls(**options)

    def _same(self, got: bytes, want: bytes) -> bool:
        if got == want or (not self.case_sensitive and got.lower() == want.lower()):
            return True
        if self.absolute_tolerance is None and self.relative_tolerance is None:
            return False
        expected, value = c_float(want), c_float(got)  # numbers as the validator's C parser reads them (hex too)
        if expected is None or value is None:
            return False  # a jury token that is no finite number compares as text (done above)
        return _close(value, expected, self.absolute_tolerance, self.relative_tolerance)

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """AC when every token matches under the flags (and whitespace too when space_change_sensitive); else WA."""
        if self.space_change_sensitive:
            got, want = re.split(rb"(\s+)", output), re.split(rb"(\s+)", answer)  # tokens and the spaces between
            for i, (g, w) in enumerate(zip(got, want)):
                if (i % 2 == 1 and g != w) or (i % 2 == 0 and not self._same(g, w)):
                    return Verdict.WA, (
                        f"at piece {i + 1} (space_change_sensitive): expected {_show(w)}, got {_show(g)}"
                    )
            if len(got) != len(want):
                return Verdict.WA, f"output has {len(got)} tokens and spaces, expected {len(want)}"
            return Verdict.AC, f"{len(want) // 2 + 1} tokens, spaces exact"
        verdict, message = _compare_tokens(output, answer, self._same)
        return (Verdict.WA if verdict == Verdict.PE else verdict), message


@dataclass
class LinesChecker:
    """SandboxFusion's compare of a stdin/stdout test (``sandbox/utils/testing.py``, ``check_stdio_test_case``, what
    its ``/submit`` uses for CommonOJDataset): both texts are stripped and cut at each LF; the line counts must be
    equal; two lines match when they are equal once stripped (and lower-cased unless ``case_sensitive``), or when
    both read as Python floats and ``|got - want| / max(|want|, 1e-10) < relative_tolerance``. Whitespace inside a
    line counts. Any mismatch is WA.

    >>> LinesChecker().check(b"", b"YES\\n3.0000001\\n", b"yes\\n3")[0].value
    'AC'
    >>> LinesChecker().check(b"", b"1  2", b"1 2")[0].value, LinesChecker().check(b"", b"1\\n2", b"1 2")[0].value
    ('WA', 'WA')
    """

    case_sensitive: bool = False
    relative_tolerance: float = 1e-5

    def _same(self, got: str, want: str) -> bool:
        if not self.case_sensitive:
            got, want = got.lower(), want.lower()
        got, want = got.strip(), want.strip()
        if got == want:
            return True
        try:
            value, expected = float(got), float(want)
        except ValueError:
            return False
        return abs(value - expected) / max(abs(expected), 1e-10) < self.relative_tolerance

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """AC when the stripped texts have as many lines and each pair matches; else WA."""
        got = output.decode("utf-8", "replace").strip().split("\n")
        want = answer.decode("utf-8", "replace").strip().split("\n")
        if len(got) != len(want):
            return Verdict.WA, f"output has {len(got)} lines, expected {len(want)}"
        for i, (line, expected) in enumerate(zip(got, want)):
            if not self._same(line, expected):
                return Verdict.WA, f"line {i + 1}: expected {_show(expected.encode())}, got {_show(line.encode())}"
        return Verdict.AC, f"{len(want)} lines"


_YES_NO = re.compile(rb"\b(?:yes|no)\b", re.IGNORECASE)


class YesNoTokensChecker:
    """The compare of open-r1's Codeforces Piston package (guipenedo/piston, ``packages/codeforces/1.0.0/run``,
    ``normalize_output`` then ``diff -b``): the whole words yes and no, in any case, become YES and NO (word
    boundaries as GNU sed's ``\\b`` in the C locale: letters, digits and ``_`` make words); then tokens separated by
    any whitespace must be equal. Any mismatch is WA.

    >>> YesNoTokensChecker().check(b"", b"Yes\\nno 3", b"YES NO\\n3")[0].value
    'AC'
    >>> YesNoTokensChecker().check(b"", b"Yess", b"YES")[0].value, YesNoTokensChecker().check(b"", b"a", b"A")[0].value
    ('WA', 'WA')
    """

    @staticmethod
    def _same(got: bytes, want: bytes) -> bool:
        return got == want or _YES_NO.sub(_upper, got) == _YES_NO.sub(_upper, want)

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """AC when the token sequences are equal once yes/no are upper-cased; else WA."""
        return _compare_tokens(output, answer, self._same, Verdict.WA)


def _upper(match: re.Match) -> bytes:
    return match.group(0).upper()


def program_argv(path: str | os.PathLike) -> list[str]:
    """How to run a jury program: ``python3 PATH`` for ``.py`` files, the file itself otherwise."""
    path = str(Path(path).resolve())
    return [sys.executable if sys.executable else "python3", path] if path.endswith(".py") else [path]


PYTHON_TRACEBACK = b"Traceback (most recent call last):"


def python_crashed(path: str | os.PathLike, returncode: int | None, stderr: bytes) -> bool:
    """A ``.py`` jury program that ended on an uncaught exception: exit 1 with a traceback on stderr (a deliberate
    ``sys.exit(1)`` prints none). That is the jury's failure, not a WA. A BrokenPipeError is not counted: the
    solution closed its end of an interactor's pipe."""
    if returncode != 1 or not str(path).endswith(".py"):
        return False
    at = stderr.rfind(PYTHON_TRACEBACK)
    if at < 0:
        return False
    last = stderr[at:].strip().splitlines()[-1]
    return not last.startswith(b"BrokenPipeError")


@dataclass
class ExternalChecker:
    """A checker program. ``style="testlib"``: ``PATH INPUT OUTPUT ANSWER``, exit codes as testlib defines them
    (``testlib.testlib_outcome``: 0/1/2 = AC/WA/PE, 3 FAIL = JE with its message, points and ``_pc(n)`` = AC with a
    score, anything else JE).
    ``style="openr1"``: ``PATH INPUT ANSWER OUTPUT``, a pass prints 1 (or 100) on stdout; a crash is JE.
    ``style="kattis"``: ``PATH INPUT ANSWER FEEDBACK_DIR < OUTPUT``, exit 42 AC, 43 WA, else JE."""

    path: str
    style: str = "testlib"

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """Run the checker on the three files; never blames the solution for the checker's failure."""
        with tempfile.TemporaryDirectory(prefix="agentgspo-check-") as tmp:
            paths = {}
            for name, data in (("input", input_data), ("output", output), ("answer", answer)):
                paths[name] = os.path.join(tmp, name)
                with open(paths[name], "wb") as f:
                    f.write(data)
            if self.style == "kattis":  # validator JUDGE_IN JUDGE_ANS FEEDBACK_DIR < output
                args, stdin = [paths["input"], paths["answer"], tmp + "/"], open(paths["output"], "rb")
            else:
                order = ("input", "output", "answer") if self.style == "testlib" else ("input", "answer", "output")
                args, stdin = [paths[k] for k in order], subprocess.DEVNULL
            try:
                done = subprocess.run(
                    program_argv(self.path) + args, capture_output=True, stdin=stdin, timeout=CHECKER_TIMEOUT_S, cwd=tmp
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return Verdict.JE, f"checker {self.path} failed to run: {exc}"
        if self.style == "testlib" and not python_crashed(self.path, done.returncode, done.stderr):
            verdict, message, score = testlib_outcome(
                done.returncode, (done.stderr or done.stdout).decode("utf-8", "replace").strip()[-2000:]
            )
            return (verdict, message[:500]) if score is None else (verdict, message[:500], score)
        message = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[:500]
        if self.style == "openr1":
            if done.returncode != 0:
                return Verdict.JE, f"checker exited with {done.returncode}: {message}"
            first = done.stdout.split()[:1]
            return (Verdict.AC if first in ([b"1"], [b"100"]) else Verdict.WA), message
        if self.style == "kattis":
            verdict = {42: Verdict.AC, 43: Verdict.WA}.get(done.returncode, Verdict.JE)
            return verdict, message if verdict != Verdict.JE else f"validator exited with {done.returncode}: {message}"
        tail = done.stderr.decode("utf-8", "replace").strip()[-500:]  # a testlib-style .py checker that crashed
        return Verdict.JE, f"checker crashed (judge failure, not the solution's): {tail}"


class CaptureChecker:
    """``capture[:SPEC]``: the program's output itself as the test's message (what a "run my program" tool shows),
    with the verdict of checker SPEC, or AC for any output without one. A spec string, so it travels to a sandbox
    server like the other checkers (a Python checker object cannot)."""

    def __init__(self, inner: Checker | None = None):
        self.inner = inner

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """SPEC's verdict (AC without one) and the output, decoded, as the message."""
        verdict = self.inner.check(input_data, output, answer)[0] if self.inner is not None else Verdict.AC
        return verdict, output.decode("utf-8", "replace")


def make_checker(spec: "str | Checker | None", testlib_h: str | os.PathLike | None = None) -> Checker:
    """Build a checker from ``tokens`` | ``float:EPS`` | ``icpc[:FLAGS]`` | ``testlib:PATH`` | ``openr1:PATH`` |
    ``kattis:PATH``, or ``capture[:SPEC]`` (:class:`CaptureChecker`: the output as the message).

    >>> make_checker("float:1e-6").eps
    1e-06
    >>> make_checker("capture:float:1e-6").inner.eps
    1e-06
    """
    if spec is None or spec == "tokens":
        return TokensChecker()
    if not isinstance(spec, str):
        return spec
    kind, _, arg = spec.partition(":")
    if kind == "capture":
        try:
            return CaptureChecker(make_checker(arg, testlib_h) if arg else None)
        except ValueError as exc:
            raise ValueError(f"bad checker {spec!r}: {exc}") from None
    if kind == "float":
        try:
            eps = float(arg)
        except ValueError:
            eps = math.nan
        if not 0 <= eps < math.inf:
            raise ValueError(f"bad checker {spec!r}: expected float:EPS with a finite EPS >= 0, such as float:1e-6")
        return FloatChecker(eps)
    if kind == "icpc":
        return IcpcDefaultChecker.from_flags(arg)
    if kind in PROGRAM_CHECKERS:
        if not arg or not Path(arg).exists():
            raise ValueError(f"bad checker {spec!r}: checker program {arg!r} does not exist")
        if kind == "testlib" and is_cpp_source(arg):  # compiled now, so that a broken one is refused up front
            return ExternalChecker(str(compile_testlib_program(arg, testlib_h)), style=kind)
        if is_cpp_source(arg):
            raise ValueError(
                f"bad checker {spec!r}: {kind} checkers are run as programs; compile {arg!r} first "
                "(only testlib:SOURCE.cpp is compiled by the judge)"
            )
        return ExternalChecker(arg, style=kind)
    raise ValueError(
        f"unknown checker {spec!r}: expected tokens, float:EPS, icpc[:FLAGS], testlib:PATH, openr1:PATH, kattis:PATH "
        "or capture[:SPEC]"
    )
