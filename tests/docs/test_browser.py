"""The built site in a real headless Chromium over HTTP on 127.0.0.1: the home page and an API page render with no
console errors and no request leaving 127.0.0.1, the navigation works, and the search finds "GSPO" and
"CodeForces-v0". Set AGENTGSPO_DOCS_SCREENSHOTS=DIR to keep screenshots of the pages it opened."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from agentgspo.commands.docs import site_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install -y chromium; .ci/setup_sandboxes.sh installs it)"
)


@pytest.fixture(scope="module")
def base_url(site):
    server = site_server(site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, base_url):
    """A fresh page that records console errors and warnings, page errors and any request off 127.0.0.1."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.problems = []
    page.on("console", lambda m: m.type in ("error", "warning") and page.problems.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    page.on("request", lambda r: r.url.startswith(base_url) or page.problems.append(f"request off-site: {r.url}"))
    # a request cut short because the page navigated on (net::ERR_ABORTED) is the browser's doing, not a failure
    page.on(
        "requestfailed",
        lambda r: r.failure == "net::ERR_ABORTED" or page.problems.append(f"request failed: {r.url} {r.failure}"),
    )
    yield page
    page.close()


def _screenshot(page, name: str) -> None:
    folder = os.environ.get("AGENTGSPO_DOCS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


@pytest.mark.slow
def test_the_home_page_and_an_api_page_render_without_errors(page, base_url):
    page.goto(base_url + "/")
    page.wait_for_load_state("networkidle")
    assert page.locator("h1").first.inner_text().rstrip("¶") == "agentgspo"
    assert page.locator("img[src$='data-path.svg']").evaluate("img => img.complete && img.naturalWidth > 0")
    _screenshot(page, "home")
    page.goto(base_url + "/api/agentgspo.objective.gspo/")
    page.wait_for_load_state("networkidle")
    heading = page.locator("[id='agentgspo.objective.gspo.gspo']")
    assert heading.is_visible() and "gspo" in heading.inner_text()
    assert "Eq. 5" in page.locator("body").inner_text()
    _screenshot(page, "api_loss")
    assert page.problems == []


@pytest.mark.slow
def test_navigation_reaches_pages_through_the_sidebar(page, base_url):
    page.goto(base_url + "/")
    page.wait_for_load_state("networkidle")
    page.locator("nav.md-nav--primary a", has_text="Getting started").first.click()
    page.wait_for_url(base_url + "/getting-started/")
    page.wait_for_load_state("networkidle")
    assert page.locator("h1").first.inner_text().rstrip("¶") == "Getting started"
    page.locator("nav.md-nav--primary a", has_text="The GSPO objective").first.click()
    page.wait_for_url(base_url + "/concepts/gspo/")
    page.wait_for_load_state("networkidle")
    assert page.locator("math").count() >= 10
    page.locator("a[href$='#agentgspo.objective.gspo.gspo']").first.click()  # a cross-reference into the API
    page.wait_for_url(base_url + "/api/agentgspo.objective.gspo/#agentgspo.objective.gspo.gspo")
    page.wait_for_load_state("networkidle")
    assert page.problems == []


@pytest.mark.parametrize("query, expected_page", [("GSPO", "/concepts/gspo/"), ("CodeForces-v0", "/envs/")])
def test_search_finds(page, base_url, query, expected_page):
    page.goto(base_url + "/")
    page.wait_for_load_state("networkidle")
    page.locator("input.md-search__input").click(force=True)
    # Filled at once, then a key event (the theme searches on key events). Typed key by key, "CodeForces-" is a
    # moment an incomplete lunr query, which the theme's search worker reports with console.warn ("Invalid query").
    page.locator("input.md-search__input").fill(query)
    page.keyboard.press("End")
    results = page.locator(".md-search-result__item a")
    results.first.wait_for(timeout=30_000)  # the search index loads in a web worker
    links = results.evaluate_all("links => links.map(a => new URL(a.href).pathname)")
    assert expected_page in links, links
    _screenshot(page, f"search_{query}")
    assert page.problems == []
