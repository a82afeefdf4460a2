"""Output checkers: compare a solution's output with the jury's answer, outside the solution's sandbox.

Built in: ``tokens`` (whitespace-insensitive, case-sensitive tokens; the default) and ``float:EPS`` (numbers
within absolute OR relative error EPS, other tokens exact). External: ``testlib:PATH`` runs
``PATH INPUT OUTPUT ANSWER`` (exit 0 AC, 1 WA, 2 PE, anything else a judge error) and ``openr1:PATH`` runs an
open-r1/codeforces generated checker ``PATH INPUT ANSWER OUTPUT`` (prints 1 or 100 on stdout for a pass);
``kattis:PATH`` runs an ICPC output validator ``PATH INPUT ANSWER FEEDBACK_DIR < OUTPUT`` (exit 42 AC, 43 WA).
A ``.py`` checker is run with python3. Checkers are jury code: trusted, run with a timeout only.

Token mismatch rules follow testlib: a differing token is WA; output that ends early or has extra tokens is PE.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..results import Verdict

CHECKER_TIMEOUT_S = 30.0
PROGRAM_CHECKERS = ("testlib", "openr1", "kattis")  # spec kinds ``KIND:PATH`` that run a jury program


class Checker(Protocol):
    """Decides one test: ``check(input, output, answer) -> (verdict, message)``; verdict AC, WA, PE or JE."""

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]: ...


def _show(token: bytes) -> str:
    return repr(token[:50].decode("utf-8", "replace"))


def _compare_tokens(output: bytes, answer: bytes, same) -> tuple[Verdict, str]:
    out_tokens, ans_tokens = output.split(), answer.split()
    for i, (got, want) in enumerate(zip(out_tokens, ans_tokens)):
        if not same(got, want):
            return Verdict.WA, f"token {i + 1}: expected {_show(want)}, got {_show(got)}"
    if len(out_tokens) < len(ans_tokens):
        return Verdict.PE, f"output ended after {len(out_tokens)} tokens, expected {len(ans_tokens)}"
    if len(out_tokens) > len(ans_tokens):
        return Verdict.PE, f"extra output after {len(ans_tokens)} tokens: {_show(out_tokens[len(ans_tokens)])}"
    return Verdict.AC, f"{len(ans_tokens)} tokens"


class TokensChecker:
    """Whitespace-insensitive, case-sensitive token comparison (the usual default).

    >>> TokensChecker().check(b"", b"1  2\\n", b"1 2")[0].value
    'AC'
    >>> TokensChecker().check(b"", b"1 3", b"1 2")[0].value
    'WA'
    """

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """AC when the token sequences are equal; WA on a differing token; PE on missing or extra tokens."""
        return _compare_tokens(output, answer, bytes.__eq__)


def _number(token: bytes) -> float:
    """float(token), except that Python's digit separators ("1_000") are not a number in a judge's output."""
    if b"_" in token:
        raise ValueError(token)
    return float(token)


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
        if abs(value - expected) <= self.eps + 1e-15:
            return True
        low, high = expected * (1 - self.eps), expected * (1 + self.eps)
        return min(low, high) - 1e-15 <= value <= max(low, high) + 1e-15

    def check(self, input_data: bytes, output: bytes, answer: bytes) -> tuple[Verdict, str]:
        """AC when every token matches (numbers within eps); WA or PE otherwise."""
        return _compare_tokens(output, answer, self._same)


def program_argv(path: str | os.PathLike) -> list[str]:
    """How to run a jury program: ``python3 PATH`` for ``.py`` files, the file itself otherwise."""
    path = str(Path(path).resolve())
    return [sys.executable if sys.executable else "python3", path] if path.endswith(".py") else [path]


@dataclass
class ExternalChecker:
    """A checker program. ``style="testlib"``: ``PATH INPUT OUTPUT ANSWER``, exit 0/1/2 = AC/WA/PE, else JE.
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
                done = subprocess.run(program_argv(self.path) + args, capture_output=True, stdin=stdin,
                                      timeout=CHECKER_TIMEOUT_S, cwd=tmp)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return Verdict.JE, f"checker {self.path} failed to run: {exc}"
        message = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[:500]
        if self.style == "openr1":
            if done.returncode != 0:
                return Verdict.JE, f"checker exited with {done.returncode}: {message}"
            first = done.stdout.split()[:1]
            return (Verdict.AC if first in ([b"1"], [b"100"]) else Verdict.WA), message
        if self.style == "kattis":
            verdict = {42: Verdict.AC, 43: Verdict.WA}.get(done.returncode, Verdict.JE)
            return verdict, message if verdict != Verdict.JE else f"validator exited with {done.returncode}: {message}"
        verdict = {0: Verdict.AC, 1: Verdict.WA, 2: Verdict.PE}.get(done.returncode, Verdict.JE)
        if verdict == Verdict.JE:
            message = f"checker exited with {done.returncode} (judge failure, not the solution's): {message}"
        return verdict, message


def make_checker(spec: "str | Checker | None") -> Checker:
    """Build a checker from ``tokens`` | ``float:EPS`` | ``testlib:PATH`` | ``openr1:PATH`` | ``kattis:PATH``.

    >>> make_checker("float:1e-6").eps
    1e-06
    """
    if spec is None or spec == "tokens":
        return TokensChecker()
    if not isinstance(spec, str):
        return spec
    kind, _, arg = spec.partition(":")
    if kind == "float":
        try:
            eps = float(arg)
        except ValueError:
            eps = math.nan
        if not 0 <= eps < math.inf:
            raise ValueError(f"bad checker {spec!r}: expected float:EPS with a finite EPS >= 0, such as float:1e-6")
        return FloatChecker(eps)
    if kind in PROGRAM_CHECKERS:
        if not arg or not Path(arg).exists():
            raise ValueError(f"bad checker {spec!r}: checker program {arg!r} does not exist")
        return ExternalChecker(arg, style=kind)
    raise ValueError(f"unknown checker {spec!r}: expected tokens, float:EPS, testlib:PATH, openr1:PATH or kattis:PATH")
