"""The results store of one eval folder: ``DIR/eval.json`` (what is evaluated) and ``DIR/results.jsonl`` (one
line per finished attempt, appended and flushed to disk as each attempt ends).

An interrupted eval resumes: the same command finds the attempts already in ``results.jsonl`` (keyed by problem id
and sample index) and runs only the others. A last line cut short by a kill is dropped (it was not finished); any
other unreadable line is an error naming it. ``eval.json`` pins what the results mean (problem source, agent,
policy, env options, sampling): rerunning into the folder with different settings is an error instead of a mix.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

RESULTS = "results.jsonl"
CONFIG = "eval.json"


class ResultsStore:
    """Append-only results of one eval folder (thread-safe appends). ``identity`` is compared with the folder's
    ``eval.json``; other ``settings`` (samples, k) may change between runs."""

    def __init__(self, out: str | Path, identity: dict[str, Any], settings: dict[str, Any] | None = None):
        self.out = Path(out)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"--out {str(out)!r}: cannot create the output folder ({exc.strerror}); pass a "
                             "writable folder") from None
        self.path = self.out / RESULTS
        self._lock = threading.Lock()
        config_path = self.out / CONFIG
        if config_path.exists():
            stored = json.loads(config_path.read_text()).get("identity")
            has_results = self.path.exists() and self.path.stat().st_size > 0
            if has_results and stored != json.loads(json.dumps(identity)):
                changed = sorted(k for k in set(stored or {}) | set(identity)
                                 if (stored or {}).get(k) != json.loads(json.dumps(identity)).get(k))
                raise ValueError(f"{self.out} holds an eval with other settings ({', '.join(changed)} differ); "
                                 "rerun with the same options to resume it, or pass another --out")
        config_path.write_text(json.dumps({"identity": identity, "settings": settings or {}}, indent=2) + "\n")
        self.results = self._read()

    def _read(self) -> list[dict[str, Any]]:
        """Results so far; a truncated last line (killed mid-write) is cut off the file."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        results, offset = [], 0
        for number, line in enumerate(data.split(b"\n"), start=1):
            end = offset + len(line)
            if line.strip():
                try:
                    results.append(json.loads(line))
                except json.JSONDecodeError:
                    if end < len(data):  # not the last line: the file is damaged, not just cut short
                        raise ValueError(f"{self.path}:{number} is not valid JSON; delete that line to rerun the "
                                         "attempt") from None
                    with open(self.path, "r+b") as f:
                        f.truncate(offset)
                    return results
            offset = end + 1
        if data and not data.endswith(b"\n"):  # a whole line whose newline was not written: complete it
            with open(self.path, "ab") as f:
                f.write(b"\n")
        return results

    def done(self) -> set[tuple[str, int]]:
        """``(problem_id, sample)`` of every stored attempt."""
        return {(r["problem_id"], r["sample"]) for r in self.results}

    def append(self, result: dict[str, Any]) -> None:
        """Write one finished attempt as a line and force it to disk (a kill after this keeps it)."""
        line = json.dumps(result, allow_nan=True) + "\n"
        with self._lock:
            with open(self.path, "a") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self.results.append(result)
