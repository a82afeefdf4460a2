"""The eval report: ``DIR/summary.json``, ``DIR/report.md`` (with the plots as ``DIR/*.svg``) and a self-contained
``DIR/report.html`` (plots inline as SVG, every attempt's token sequence coloured by loss mask; no server, no
network, no script)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgspo.eval import html
from agentgspo.core.trajectory import UNCOUNTED_STOPS

__all__ = ["plots", "markdown", "attempts_html", "html_report", "write_report"]

PLOTS = ("pass_by_rating.svg", "verdicts.svg")


def _svg(figure: Any) -> str:
    """A matplotlib figure as an inline ``<svg>`` element (XML prolog dropped)."""
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def plots(summary: dict[str, Any]) -> dict[str, str]:
    """``{file name: svg}``: pass@1 by rating bucket (bars, attempts as labels) and the final-verdict mix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3))
    rows = summary["by_rating"]
    axis.bar([r["group"] for r in rows], [r["pass@1"] or 0.0 for r in rows], color="#4c72b0")
    for i, r in enumerate(rows):
        axis.annotate(f"n={r['attempts']}", (i, r["pass@1"] or 0.0), ha="center", va="bottom", fontsize=7)
    axis.set(xlabel="problem rating", ylabel="pass@1", ylim=(0, 1.1), title="pass@1 by rating")
    axis.tick_params(axis="x", labelrotation=45, labelsize=7)
    by_rating = _svg(figure)
    figure, axis = plt.subplots(figsize=(6, 3))
    verdicts = sorted(summary["verdicts"].items(), key=lambda kv: -kv[1])
    axis.bar([v for v, _ in verdicts], [n for _, n in verdicts], color="#dd8452")
    axis.set(xlabel="final verdict", ylabel="attempts", title="verdict mix")
    return {PLOTS[0]: by_rating, PLOTS[1]: _svg(figure)}


def _headline(summary: dict[str, Any], config: dict[str, Any]) -> list[tuple[str, Any]]:
    passes = [(k, v) for k, v in summary.items() if k.startswith("pass@")]
    rows = [
        ("agent", config.get("agent_label")),
        ("problems", config.get("problems")),
        ("problems evaluated", summary["problems"]),
        ("attempts", summary["attempts"]),
        *passes,
        ("endings (share of attempts)", _shares(summary.get("stop_frac") or {})),
        ("judge-error rate", summary["judge_error_rate"]),
        ("excluded attempts (not counted in pass@k)", summary["excluded"] or 0),
        ("rating", summary["rating_fit"]["description"]),
    ]
    if summary.get("problems_without_counted_attempts"):
        rows.append(
            (
                "problems with every attempt excluded (not in pass@k)",
                ", ".join(summary["problems_without_counted_attempts"]),
            )
        )
    if summary.get("skipped_rows"):  # the source's rows that cannot be judged here (eval command)
        rows.append(("source rows skipped (cannot be judged here)", len(summary["skipped_rows"])))
    if summary.get("dropped_duplicates"):  # ResultsStore.dropped_duplicates, when the caller passes it on
        rows.append(("duplicate result lines ignored", summary["dropped_duplicates"]))
    if summary.get("codeelo"):
        rows.append(("CodeElo rating", _codeelo_text(summary["codeelo"])))
    return rows


def _shares(stop_frac: dict[str, float]) -> str:
    """``completed 62.5%, max_turns 25.0%, sampler_error 12.5%``: each ending's share, not-counted ones marked."""
    return (
        ", ".join(
            f"{reason}{' (not counted)' if reason in UNCOUNTED_STOPS else ''} {share:.1%}"
            for reason, share in stop_frac.items()
        )
        or "none"
    )


def _codeelo_text(codeelo: dict[str, Any]) -> str:
    """The CodeElo headline: the rating, and what it rests on when samples were dropped or clamped."""
    if codeelo["rating"] is None:
        return (
            f"none: every sample of every contest met an ending not counted in pass@k (a judge, env or sampler "
            f"error...) ({codeelo['method']})"
        )
    notes = []
    if codeelo.get("clamped"):
        notes.append(
            f"{codeelo['clamped']} participation(s) ahead of or behind every rated participant: the search "
            "bound stands in, so the rating is a bound there"
        )
    if codeelo.get("dropped"):
        notes.append(
            f"{codeelo['dropped']} participation(s) left out for endings not counted in pass@k (judge, env "
            "or sampler errors...)"
        )
    return f"{codeelo['rating']:.0f} ({codeelo['method']}{''.join('; ' + n for n in notes)})"


def _md_cell(value: Any, table: bool = True) -> str:
    """``value`` as markdown text on one line: newlines become spaces and, in a table cell, ``|`` is escaped
    (``\\|``) so a title or tag holding one cannot shift the columns."""
    text = " ".join(html._cell(value).splitlines())
    return text.replace("|", "\\|") if table else text


def _md_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    lines = ["| " + " | ".join(map(_md_cell, columns)) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(_md_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def markdown(summary: dict[str, Any], config: dict[str, Any]) -> str:
    """``report.md``: headline numbers, the plots (linked files), breakdowns, per-problem results."""
    lines = [f"# Eval report: {_md_cell(config.get('agent_label'), table=False)}", ""]
    lines += [f"- **{k}**: {_md_cell(v, table=False)}" for k, v in _headline(summary, config)]
    lines += [
        "",
        f"![pass@1 by rating]({PLOTS[0]})",
        f"![verdict mix]({PLOTS[1]})",
        "",
        "## By rating",
        _md_table(summary["by_rating"], ["group", "problems", "attempts", "pass@1"]),
        "",
        "## By tag",
        _md_table(summary["by_tag"], ["group", "problems", "attempts", "pass@1"]),
        "",
        "## Verdicts",
        f"Final verdict per attempt: {_md_cell(summary['verdicts'], table=False)}",
        "",
        f"Every submission: {_md_cell(summary['submission_verdicts'], table=False)}",
        "",
        "## Problems",
        _md_table(
            summary["per_problem"], ["problem_id", "title", "rating", "tags", "attempts", "accepted", "verdicts"]
        ),
        "",
    ]
    if summary.get("codeelo"):
        lines += [
            "## CodeElo",
            _md_table(
                summary["codeelo"]["contests"], ["name", "participants", "places", "rating", "dropped", "clamped"]
            ),
            "",
        ]
    lines += [
        "Each attempt's conversation, with the tokens the loss would train coloured apart from prompts and "
        "tool outputs, is in report.html.",
        "",
    ]
    return "\n".join(lines)


def attempts_html(results: Sequence[dict[str, Any]]) -> str:
    """Every attempt, sorted by problem then sample."""
    parts = []
    for r in sorted(results, key=lambda r: (r["index"], r["sample"])):
        facts = {
            "sample": r["sample"],
            "rating": r["rating"],
            "reward": round(float(r["reward"]), 3),
            "stop": r["stop_reason"],
            "turns": r["turns"],
            "submissions": " ".join(r["verdicts"]) or None,
            "trained ids": r["sampled_tokens"],
            "error": r.get("error"),
        }
        parts.append(
            html.attempt_html(
                f"{r['problem_id']} {r['title'] or ''}",
                facts,
                r["segments"],
                r["verdict"],
                html.final_messages(r["trajectory"]["messages"]),
            )
        )
    return "".join(parts)


def html_report(
    summary: dict[str, Any], config: dict[str, Any], results: Sequence[dict[str, Any]], svgs: dict[str, str]
) -> str:
    """``report.html`` (see the module docstring)."""
    headline = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(html._cell(v))}</td></tr>"
        for k, v in _headline(summary, config)
    )
    body = [
        f"<h1>Eval report: {html.escape(config.get('agent_label'))}</h1>",
        f"<table>{headline}</table>",
        '<div class="plots">' + "".join(svgs.values()) + "</div>",
        "<h2>By rating</h2>",
        html.table_html(summary["by_rating"], ["group", "problems", "attempts", "pass@1"]),
        "<h2>By tag</h2>",
        html.table_html(summary["by_tag"], ["group", "problems", "attempts", "pass@1"]),
        "<h2>Problems</h2>",
        html.table_html(
            summary["per_problem"], ["problem_id", "title", "rating", "tags", "attempts", "accepted", "verdicts"]
        ),
    ]
    if summary.get("codeelo"):
        body += [
            "<h2>CodeElo</h2>",
            html.table_html(
                summary["codeelo"]["contests"], ["name", "participants", "places", "rating", "dropped", "clamped"]
            ),
        ]
    body += ["<h2>Attempts</h2>", html.legend(), attempts_html(results)]
    return html.page(f"Eval report: {config.get('agent_label')}", "".join(body))


def write_report(
    out: str | Path, summary: dict[str, Any], config: dict[str, Any], results: Sequence[dict[str, Any]]
) -> dict[str, Path]:
    """Write summary.json, the plots, report.md and report.html into ``out``; returns their paths."""
    out = Path(out)
    svgs = plots(summary)
    paths = {"summary": out / "summary.json", "markdown": out / "report.md", "html": out / "report.html"}
    paths["summary"].write_text(json.dumps(summary, indent=2) + "\n")
    for name, svg in svgs.items():
        (out / name).write_text(svg)
    paths["markdown"].write_text(markdown(summary, config))
    paths["html"].write_text(html_report(summary, config, results, svgs))
    return paths
