"""Sandboxes and the judge (draft; full API docstring below is filled in)."""
from .judge import TestCase, judge, run_python
from .protocol import get_sandbox, SandboxUnavailable
from .results import ExecResult, JudgeResult, Limits, TestResult, Verdict
