"""Any ``trajectories.jsonl`` (from ``agentgspo rollout`` or training) or an eval's ``results.jsonl`` as one
self-contained HTML page: every trajectory's token sequence coloured by loss mask (see :mod:`agentgspo.eval.html`).

Trajectory records hold ids, not text: they are decoded with the tokenizer that produced them (``tokenizer``:
``"tiny"`` or a model folder). Eval results already carry their decoded segments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgspo.eval import html
from agentgspo.eval.agents import load_renderer
from agentgspo.eval.segments import segments
from agentgspo.core.trajectory import read_jsonl

__all__ = ["trajectory_items", "view_page"]


def _is_eval_results(path: Path) -> bool:
    """True when the first line is an eval result (it has ``segments``), not a bare trajectory record."""
    with open(path) as f:
        for line in f:
            if line.strip():
                return "segments" in json.loads(line)
    return False


def trajectory_items(path: Path, tokenizer: str) -> list[tuple[str, dict[str, Any], list, str, list]]:
    """``(title, facts, segments, verdict, messages after the last turn)`` per trajectory of ``path`` (trajectories or
    eval results)."""
    if _is_eval_results(path):
        items = []
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                facts = {
                    "sample": r["sample"],
                    "reward": r["reward"],
                    "stop": r["stop_reason"],
                    "turns": r["turns"],
                    "trained ids": r["sampled_tokens"],
                }
                items.append(
                    (
                        f"{r['problem_id']} {r.get('title') or ''}",
                        facts,
                        r["segments"],
                        r["verdict"],
                        html.final_messages(r["trajectory"]["messages"]),
                    )
                )
        return items
    decode = load_renderer(tokenizer).decode
    items = []
    for t in read_jsonl(path):
        record = t.to_record().model_dump(mode="json")
        facts = {
            "seed": t.seed,
            "group": t.group_id,
            "sample": t.sample_id,
            "reward": round(t.reward, 4),
            "stop": t.stop_reason,
            "turns": t.num_turns,
            "trained ids": t.num_sampled_tokens,
        }
        items.append((t.env_id or "trajectory", facts, segments(record, decode), "", html.final_messages(t.messages)))
    return items


def view_page(path: str | Path, tokenizer: str = "tiny") -> str:
    """The HTML page of the trajectories in ``path`` (a .jsonl file, or an eval folder's results.jsonl)."""
    path = Path(path)
    if path.is_dir():
        candidates = [path / "results.jsonl", path / "trajectories.jsonl"]
        path = next((c for c in candidates if c.is_file()), candidates[0])
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} does not exist; pass a trajectories.jsonl, a results.jsonl or a folder holding one"
        )
    items = trajectory_items(path, tokenizer)
    trained = sum(int(n) for _, _, segs, *_ in items for kind, _, n in segs if kind == "trained")
    body = [
        f"<h1>{html.escape(path)}</h1>",
        f"<p>{len(items)} trajectories; {trained} ids trained by the loss (mask 1).</p>",
        html.legend(),
        "".join(html.attempt_html(*item) for item in items),
    ]
    return html.page(f"trajectories: {path.name}", "".join(body))
