"""The built book in a real browser: Playwright driving Debian's chromium, network off.

Every page of the book is served from localhost and loaded in headless chromium, with every
request to another host refused and recorded. Each page must load with no console error and no
uncaught exception, fetch nothing from another host, have all its mathematics typeset by MathJax
(no raw TeX left, no MathJax error), and show the figures its source makes. In the static
crossover explorer, moving M from its smallest to its largest value must turn the readout from
square tiling to FlashAttention. A full-page screenshot of every page is saved (in
``$IOATTN_SCREENSHOTS``, or ``screenshots/`` beside the build).

Playwright never downloads a browser here: it launches the system's chromium (``make test``
installs Debian's package when it is missing).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import sync_playwright

from .conftest import ROOT

pytestmark = pytest.mark.book

#: As the machine's own checks start it: no background traffic, no first-run set-up.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
#: Not pages of the book (index.html only redirects to the first page: tested on its own).
SKIP = ("_static/", "_sources/", "_images/", "jupyter_execute/", "index.html")


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, ("chromium is not installed; `make test` installs Debian's package "
                 "(apt-get install chromium)")
    return exe


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(built):
    """The built HTML served on localhost; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(built)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def shots(built) -> Path:
    folder = Path(os.environ.get("IOATTN_SCREENSHOTS") or built.parent / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Visit:
    """One page loaded in a fresh browser context, with what went wrong on the way."""

    def __init__(self, browser, url: str):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.external: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(
            f"console: {m.text} ({m.location.get('url', '')})"))
        self.page.on("pageerror", lambda e: self.errors.append(f"exception: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(
            f"failed request: {r.url} ({r.failure})"))
        response = self.page.goto(url, wait_until="load")
        assert response is not None and response.ok, f"{url}: HTTP {response and response.status}"
        # MathJax typesets after the load event; wait for it to finish.
        self.page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise"
                           " ? MathJax.startup.promise.then(() => true) : true")

    def _route(self, route):
        host = urlsplit(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            self.external.append(route.request.url)
            route.abort()

    def close(self):
        self.context.close()


def _pages(built: Path) -> list[str]:
    return sorted(p.relative_to(built).as_posix() for p in built.rglob("*.html")
                  if not p.relative_to(built).as_posix().startswith(SKIP))


def _toc_pages() -> set[str]:
    """The HTML pages that _toc.yml lists (its root and every ``file:``)."""
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    files = re.findall(r"^\s*(?:root|-\s*file):\s*(\S+)", toc, re.M)
    return {f + ".html" for f in files}


def _source(name: str) -> str:
    """The MyST source of a built page (``book/flash.html`` -> ``book/flash.md``), or ''."""
    path = ROOT / Path(name).with_suffix(".md")
    return path.read_text(encoding="utf-8") if path.is_file() else ""


#: TeX that MathJax should have turned into mathematics: $...$, \(...\), or a TeX command.
RAW_TEX = re.compile(r"\$[^$\s][^$]*\$|\\\(|\\\[|\\(?:frac|sum|sqrt|begin|left|right|mathbb|"
                     r"lceil|rceil|lfloor|rfloor|operatorname|cdot|times|le|ge)\b")
PROSE = """() => {
  const main = document.querySelector('article') || document.body;
  const copy = main.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, mjx-container, .MathJax, textarea, svg')
      .forEach(e => e.remove());
  return copy.innerText;
}"""


def test_every_page_loads_offline_typeset_and_with_its_figures(built, site, browser, shots):
    pages = _pages(built)
    missing = _toc_pages() - set(pages)
    assert not missing, f"pages of _toc.yml not built: {sorted(missing)}"
    problems = []
    for name in pages:
        visit = Visit(browser, site + name)
        page = visit.page
        try:
            problems += [f"{name}: {e}" for e in visit.errors]
            problems += [f"{name}: fetched from another host: {u}" for u in visit.external]
            # mathematics: every math element typeset, no MathJax error, no raw TeX in the prose
            untyped = page.evaluate("() => [...document.querySelectorAll('.math')]"
                                    ".filter(e => !e.querySelector('mjx-container')).length")
            typeset = page.locator("mjx-container").count()
            merrors = page.locator("mjx-merror").count()
            if untyped or merrors:
                problems.append(f"{name}: {untyped} math elements not typeset, "
                                f"{merrors} MathJax errors")
            raw = RAW_TEX.findall(page.evaluate(PROSE))
            if raw:
                problems.append(f"{name}: raw TeX left in the text: {raw[:5]}")
            source = _source(name)
            if "$" in source and not typeset:
                problems.append(f"{name}: its source has mathematics but none was typeset")
            # figures: every image loaded; a page whose cells make figures shows them
            broken = page.evaluate("() => [...document.images].filter(i => !i.complete || "
                                   "i.naturalWidth === 0).map(i => i.src)")
            problems += [f"{name}: image did not load: {src[:80]}" for src in broken]
            expected = len(re.findall(r"^\s+figure:\s*$", source, re.M))
            shown = page.locator("figure img").count()
            if shown < expected:
                problems.append(f"{name}: {expected} figures in the source, {shown} shown")
            page.screenshot(path=str(shots / (name.replace("/", "__") + ".png")), full_page=True)
        finally:
            visit.close()
    assert not problems, "\n".join(problems[:40])


def test_the_front_door_opens_the_preface(built, site, browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(site + "index.html")
        page.wait_for_url("**/book/preface.html")
        assert "I/O" in page.title()
    finally:
        context.close()


def test_static_explorer_moves_from_square_tiling_to_flash(built, site, browser, shots):
    visit = Visit(browser, site + "book/crossover.html")
    page = visit.page
    try:
        assert not visit.errors and not visit.external, visit.errors + visit.external
        explorer = page.locator(".ioattn-explorer").first
        slider, readout = explorer.locator("input.ioe-M"), explorer.locator(".ioe-readout")
        now = explorer.locator(".ioe-now")
        assert slider.get_attribute("type") == "range"
        assert "M" in explorer.locator("label").first.inner_text()
        slider.focus()
        page.keyboard.press("Home")
        at_min = readout.inner_text()
        x_min = float(now.get_attribute("x1"))
        assert slider.input_value() == slider.get_attribute("min")
        page.keyboard.press("End")
        at_max = readout.inner_text()
        x_max = float(now.get_attribute("x1"))
        assert slider.input_value() == slider.get_attribute("max")
        assert "cheapest square tiling." in at_min, at_min
        assert "cheapest FlashAttention." in at_max, at_max
        assert x_max > x_min, "the marker line did not move with M"
        explorer.screenshot(path=str(shots / "crossover-explorer-max.png"))
        # the d control switches the picture: the largest d needs a larger M for flash
        d_slider = explorer.locator("input.ioe-d")
        d_slider.focus()
        page.keyboard.press("End")
        assert f"d = {explorer.locator('.ioe-dvalue').inner_text().split('= ')[1]}" in \
            readout.inner_text()
        assert not visit.errors, visit.errors
    finally:
        visit.close()
