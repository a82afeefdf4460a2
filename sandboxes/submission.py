"""What a submission is judged on: test cases and the checker kinds that name a jury program.

These values are shared by the judge (``judge/``) and the remote backend's wire format (``remote.py``,
``server.py``); they live here, below both, so that no backend imports the judge.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TestCase"]

#: Checker specs ``KIND:PATH`` whose PATH is a jury program (it travels with a remote request).
PROGRAM_CHECKERS = ("testlib", "openr1", "kattis")


@dataclass
class TestCase:
    """One test: ``input`` fed on stdin, ``answer`` given to the checker (never to the solution)."""

    input: bytes
    answer: bytes = b""
    name: str = ""

    @classmethod
    def coerce(cls, test: "TestCase | tuple | dict", index: int) -> "TestCase":
        """Accept a TestCase, an ``(input, answer)`` pair or a ``{"input", "output"|"answer"}`` dict."""
        if isinstance(test, TestCase):
            case = test
        elif isinstance(test, dict):
            case = cls(test.get("input"), test.get("answer", test.get("output", b"")), test.get("name", ""))
        else:
            inp, ans = test
            case = cls(inp, ans)
        for field_name, value in (("input", case.input), ("output", case.answer)):
            if not isinstance(value, (str, bytes, bytearray, memoryview)):
                raise ValueError(
                    f"test {index + 1}: its {field_name} must be str or bytes, got "
                    f"{type(value).__name__} (fix or drop that test)"
                )
        inp = case.input.encode() if isinstance(case.input, str) else bytes(case.input)
        ans = case.answer.encode() if isinstance(case.answer, str) else bytes(case.answer)
        return cls(inp, ans, case.name or str(index + 1))
