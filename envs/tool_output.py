"""What the bundled envs' code-running tools tell the model: program output, truncated, with a note on how it ended."""

from __future__ import annotations

from typing import Any

from agentgspo.sandboxes import Verdict

SANDBOX_MEMORY_LIMIT_MB = 512  # the memory limit of the python tools of Math-v0 and Code-v0


def format_tool_output(text: str, max_output_chars: int, note: str = "") -> str:
    """``text`` cut to ``max_output_chars`` (saying so), then ``[note]`` if any; a hint to print when it is empty."""
    if len(text) > max_output_chars:
        text = text[:max_output_chars] + f"\n[output truncated to {max_output_chars} characters]"
    if note:
        return f"{text}\n[{note}]" if text else f"[{note}]"
    return text if text.strip() else "[no output; print() the values you want to see]"


def sandboxed_run_output(result: Any, timeout_s: float, max_output_chars: int) -> str:
    """The tool message for an ``agentgspo.sandboxes.run_python`` result: stdout+stderr, noting a kill.

    Raises ``RuntimeError`` when the sandbox itself failed (JE): the model reads that as a tool error, while the
    program's own failures (time, memory or output limits) are output with a note.
    """
    if result.verdict == Verdict.JE:
        raise RuntimeError(f"the sandbox failed: {result.error}")
    notes = {
        Verdict.TLE: f"killed: the program ran longer than {timeout_s:g} s",
        Verdict.MLE: f"killed: the program used more than {SANDBOX_MEMORY_LIMIT_MB} MB",
        Verdict.OLE: "killed: too much output",
    }
    return format_tool_output(result.stdout + result.stderr, max_output_chars, notes.get(result.verdict, ""))
