"""Self-contained HTML for trajectories: one page, inline CSS, no script and no network.

Each attempt is a ``<details class="attempt">`` whose body shows the whole token sequence as the policy saw it,
split into runs coloured by what the loss does with them (kinds from :mod:`agentgspo.eval.segments`):
``span.seg.seg-trained`` (trained, mask 1), ``seg-masked`` (a sampled turn excluded from the loss),
``seg-prompt`` (the prompt) and ``seg-env`` (tool outputs and template glue). Every span carries ``data-ids`` (its
id count), so a page's trained-id total can be read back and compared with the records' masks.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

COLOURS = {"trained": "#c8f7c5", "masked": "#f7c5c5", "prompt": "#dde6f7", "env": "#f7e7c5"}
LABELS = {
    "trained": "sampled by the policy, trained by the loss (mask 1)",
    "masked": "sampled, excluded from the loss (mask 0)",
    "prompt": "prompt: system and statement (mask 0)",
    "env": "tool outputs and template glue (mask 0)",
}

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f2f2f2; }
details.attempt { border: 1px solid #ccc; border-radius: 4px; margin: 0.4em 0; padding: 0.3em 0.6em; }
details.attempt > summary { cursor: pointer; font-family: monospace; }
pre.after-episode { white-space: pre-wrap; font-size: 12px; border-left: 3px solid #bbb; padding-left: 0.5em; }
pre.tokens { white-space: pre-wrap; word-break: break-word; font-size: 12px; line-height: 1.45; }
span.seg { border-radius: 2px; }
.legend span.seg { padding: 0 0.5em; margin-right: 0.3em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
.plots svg { max-width: 560px; height: auto; }
.verdict-AC { color: #176e17; font-weight: bold; }
""" + "\n".join(f"span.seg-{kind} {{ background: {colour}; }}" for kind, colour in COLOURS.items())


def escape(value: Any) -> str:
    """HTML-escaped ``str(value)``."""
    return html.escape(str(value), quote=True)


def legend() -> str:
    """The colour key of the token kinds."""
    items = "".join(f'<li><span class="seg seg-{k}">&nbsp;</span>{escape(LABELS[k])}</li>' for k in COLOURS)
    return f'<ul class="legend">{items}</ul>'


def tokens_html(segments: Iterable[Sequence[Any]]) -> str:
    """``<pre class="tokens">`` with one coloured span per ``[kind, text, n_ids]`` run."""
    spans = "".join(
        f'<span class="seg seg-{escape(kind)}" data-ids="{int(n)}">{escape(text)}</span>' for kind, text, n in segments
    )
    return f'<pre class="tokens">{spans}</pre>'


def final_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the last assistant turn: the env's answer to the episode's last action (e.g. the
    accepted verdict), which no later turn reads, so it is not in the token sequence."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=len(messages) - 1)
    return list(messages[last + 1 :])


def attempt_html(
    title: str,
    facts: dict[str, Any],
    segments: Iterable[Sequence[Any]],
    verdict: str = "",
    after: Sequence[dict[str, Any]] = (),
) -> str:
    """One collapsible attempt: a summary line (title, verdict, facts), its coloured token sequence, and the
    messages ``after`` the last turn (shown apart: they are not in the token sequence)."""
    details = ", ".join(f"{escape(k)} {escape(v)}" for k, v in facts.items() if v not in (None, ""))
    badge = f' <span class="verdict-{escape(verdict)}">{escape(verdict)}</span>' if verdict else ""
    tail = "".join(
        f'<pre class="after-episode">{escape(m.get("role"))}'
        f"{' (' + escape(m['name']) + ')' if m.get('name') else ''}: {escape(m.get('content'))}</pre>"
        for m in after
    )
    if tail:
        tail = "<p>After the last turn (not in the token sequence, not trained):</p>" + tail
    return (
        f'<details class="attempt" data-verdict="{escape(verdict)}"><summary>{escape(title)}{badge} '
        f"({details})</summary>{tokens_html(segments)}{tail}</details>"
    )


def table_html(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """An HTML table of ``rows`` with ``columns``; floats with 3 decimals."""
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(_cell(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "" if value is None else str(value)


def page(title: str, body: str) -> str:
    """A complete HTML document with the inline style."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<link rel="icon" href="data:,"><style>{STYLE}</style></head><body>{body}</body></html>\n'
    )
