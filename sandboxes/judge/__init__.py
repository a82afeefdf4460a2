"""The CodeForces-grade judge: compile once, all tests in one sandbox, checkers, interactors, problem formats
(one module per format in ``formats/``, with their registry; problems.py is their facade)."""

from .checkers import Checker, FloatChecker, TokensChecker, make_checker
from .compile import language_of, normalize_language
from .core import TestCase, classify_run, judge, run_python

__all__ = [
    "Checker",
    "FloatChecker",
    "TestCase",
    "TokensChecker",
    "classify_run",
    "judge",
    "language_of",
    "make_checker",
    "normalize_language",
    "run_python",
]
