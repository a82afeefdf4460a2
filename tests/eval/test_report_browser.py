"""The HTML report and the trajectory viewer in a real headless Chromium: no console errors, no network, and the
loss masks shown are the records' masks (read back from the rendered page)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentgspo.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install -y chromium; .ci/setup_sandboxes.sh installs it)"
)


def _open(page_path: Path) -> dict:
    """Load the page in headless Chromium, open every attempt, read back what it shows."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: m.type in ("error", "warning") and problems.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("request", lambda r: r.url.startswith("file:") or problems.append(f"request: {r.url}"))
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")
            page.eval_on_selector_all("details.attempt", "els => els.forEach(e => e.open = true)")
            shown = page.evaluate("""() => {
                const kinds = {};
                for (const kind of ['trained', 'masked', 'prompt', 'env']) {
                    const spans = [...document.querySelectorAll('span.seg-' + kind + '[data-ids]')];
                    const visible = spans.filter(s => s.getClientRects().length > 0);
                    kinds[kind] = {spans: spans.length, visible: visible.length,
                                   ids: spans.reduce((n, s) => n + Number(s.dataset.ids), 0),
                                   colour: spans.length ? getComputedStyle(spans[0]).backgroundColor : null};
                }
                const plots = [...document.querySelectorAll('.plots svg')].map(s => s.getBoundingClientRect().width);
                const text = [...document.querySelectorAll('pre.tokens')].map(p => p.innerText).join('\\n');
                const after = [...document.querySelectorAll('pre.after-episode')].map(p => p.innerText).join('\\n');
                return {kinds, plots, attempts: document.querySelectorAll('details.attempt').length, text, after};
            }""")
        finally:
            browser.close()
    return {**shown, "problems": problems}


def _trained_ids(rows: list[dict]) -> int:
    return sum(sum(r["trajectory"]["loss_mask"]) for r in rows)


@pytest.mark.slow
def test_the_report_opens_without_errors_and_shows_the_masks(tmp_path, capsys):
    out = tmp_path / "eval"
    assert (
        main(
            [
                "eval",
                "--problems",
                "starter",
                "--agent",
                "reference",
                "--only",
                "9000A,9000E",
                "--samples",
                "2",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert "<script" not in (out / "report.html").read_text()
    shown = _open(out / "report.html")
    assert shown["problems"] == []
    assert shown["attempts"] == 4 and len(shown["plots"]) == 2 and all(w > 100 for w in shown["plots"])
    kinds = shown["kinds"]
    assert kinds["trained"]["ids"] == _trained_ids(rows) > 0  # every trained id of the records, and only those
    assert kinds["trained"]["visible"] == kinds["trained"]["spans"] > 0
    colours = {kinds[k]["colour"] for k in ("trained", "prompt", "env")}
    assert len(colours) == 3 and "rgba(0, 0, 0, 0)" not in colours  # three distinct, visible backgrounds
    assert "run_samples" in shown["text"] and "Examples: AC" in shown["text"]
    assert shown["after"].count("Submission 1: AC") == 4  # the final verdicts, shown apart from the tokens


def test_the_viewer_shows_a_rollout_trajectories_file_with_its_masks(tmp_path, capsys):
    from agentgspo.core.trajectory import read_jsonl, write_jsonl

    # A trajectories.jsonl as rollout writes it (records only, ids to decode with the tokenizer), with one sampled
    # turn excluded from the loss as an env's mask policy would.
    out = tmp_path / "rollout"
    assert (
        main(
            [
                "rollout",
                "--env",
                "agentgspo/Calculator-v0",
                "--policy",
                "oracle",
                "--episodes",
                "3",
                "--group-size",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    trajectories = read_jsonl(out / "trajectories.jsonl")
    trajectories[1].mask_turn(0)
    write_jsonl(trajectories, out / "trajectories.jsonl")
    assert main(["view", str(out / "trajectories.jsonl"), "--out", str(tmp_path / "view.html")]) == 0
    shown = _open(tmp_path / "view.html")
    assert shown["problems"] == [] and shown["attempts"] == 3
    kinds = shown["kinds"]
    start, end = trajectories[1].turn_spans[0]
    assert kinds["masked"]["ids"] == end - start > 0
    assert kinds["trained"]["ids"] == sum(sum(t.loss_mask) for t in trajectories) > 0
    assert kinds["prompt"]["ids"] == sum(t.turn_spans[0][0] for t in trajectories)
    total = sum(len(t.token_ids) for t in trajectories)
    assert kinds["env"]["ids"] == total - kinds["prompt"]["ids"] - kinds["trained"]["ids"] - kinds["masked"]["ids"] > 0
    assert len({kinds[k]["colour"] for k in kinds}) == 4 and "calculate" in shown["text"]
