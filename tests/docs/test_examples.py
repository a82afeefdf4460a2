"""Every code block the docs mark runnable (a fence written ```python {.run} or ```bash {.run}) runs, verbatim as the
built page shows it, in page order, in an empty folder: Python blocks of a page share one interpreter, bash blocks
run with `bash -euo pipefail` in the same folder. A failure names the page and the block."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The pages expected to carry runnable blocks: a page that loses them (a fence rewritten without {.run}) fails here.
PAGES_WITH_EXAMPLES = ("getting-started", "tutorials/custom-env", "concepts/gspo", "tutorials/objective")


class _RunnableBlocks(HTMLParser):
    """Collects (language, code) of every <div class="language-X run highlight"> block of a built page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str]] = []
        self._language: str | None = None
        self._depth = 0
        self._in_code = False
        self._code: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div" and self._language is None and "run" in classes:
            language = next((c.removeprefix("language-") for c in classes if c.startswith("language-")), "")
            self._language, self._depth, self._code = language, 1, []
        elif tag == "div" and self._language is not None:
            self._depth += 1
        elif tag == "code" and self._language is not None:
            self._in_code = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "code":
            self._in_code = False
        elif tag == "div" and self._language is not None:
            self._depth -= 1
            if self._depth == 0:
                self.blocks.append((self._language, "".join(self._code)))
                self._language = None

    def handle_data(self, data: str) -> None:
        if self._in_code:
            self._code.append(data)


def runnable_blocks(page_html: str) -> list[tuple[str, str]]:
    """The runnable blocks of a built page, as (language, code)."""
    parser = _RunnableBlocks()
    parser.feed(page_html)
    return parser.blocks


# Runs the blocks in order; the first failure prints the block's number and exits non-zero.
_DRIVER = """
import json, subprocess, sys, traceback
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for number, (language, code) in enumerate(blocks, 1):
    print(f"--- block {number} ({language})", flush=True)
    if language == "python":
        try:
            exec(compile(code, f"<{sys.argv[1]} block {number}>", "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            sys.exit(f"{sys.argv[1]}: block {number} failed")
    elif language == "bash":
        if subprocess.run(["bash", "-euo", "pipefail", "-c", code]).returncode:
            sys.exit(f"{sys.argv[1]}: block {number} failed")
    else:
        sys.exit(f"{sys.argv[1]}: block {number}: runnable blocks are python or bash, got {language!r}")
"""


def run_page_examples(page_html: str, name: str, folder: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a built page's runnable blocks in ``folder``; returns the finished process (output captured)."""
    blocks = runnable_blocks(page_html)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [sys.executable, "-c", _DRIVER, name],
        input=json.dumps(blocks),
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_pages_that_teach_by_example_mark_their_blocks_runnable(site):
    with_blocks = {
        page.parent.relative_to(site).as_posix()
        for page in site.rglob("index.html")
        if runnable_blocks(page.read_text())
    }
    assert set(PAGES_WITH_EXAMPLES) <= with_blocks, with_blocks
    assert not any(name.startswith("api/") for name in with_blocks)


@pytest.mark.slow
@pytest.mark.parametrize("name", PAGES_WITH_EXAMPLES)
def test_runnable_blocks_run(site, tmp_path, name):
    page = (site / name / "index.html").read_text()
    assert runnable_blocks(page), f"docs/{name}.md has no runnable block"
    done = run_page_examples(page, f"docs/{name}.md", tmp_path)
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-6000:]}"


def test_a_wrong_block_fails_and_names_its_page(tmp_path):
    page = '<div class="language-python run highlight"><pre><code>assert 1 + 1 == 3\n</code></pre></div>'
    done = run_page_examples(page, "docs/broken.md", tmp_path)
    assert done.returncode != 0 and "docs/broken.md: block 1 failed" in done.stderr
    assert runnable_blocks(html.unescape(page)) == [("python", "assert 1 + 1 == 3\n")]
