"""`agentgspo eval` run in process by the eval tests: the printed summary, and the results written."""

from __future__ import annotations

import json
from pathlib import Path

from agentgspo.cli import main


def run_eval(capsys, out: Path, *args: str) -> dict:
    """Run `agentgspo eval --out OUT --no-progress ARGS` in process (it must succeed); the printed summary."""
    capsys.readouterr()
    status = main(["eval", "--out", str(out), "--no-progress", *args])
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    return json.loads(captured.out[captured.out.index("{") :])


def results(out: Path) -> list[dict]:
    """The lines of ``OUT/results.jsonl``."""
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
