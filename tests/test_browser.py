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

import contextlib
import functools
import os
import re
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest
import yaml
from playwright.sync_api import TimeoutError as PlaywrightTimeout
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


@contextlib.contextmanager
def serve(folder: Path):
    """``folder`` served on localhost while the block runs; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site(built):
    """The built HTML served on localhost; yields its base URL."""
    with serve(built) as url:
        yield url


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


#: A phone (an iPhone 12-14's CSS viewport) and a tablet in portrait.
PHONE = {"width": 390, "height": 844}
TABLET = {"width": 768, "height": 1024}

#: How long (ms) a wait for what a tap or a click should bring about may last: only a guard
#: against a page that never responds, generous enough for a loaded machine.
RESPONSE = 30_000
#: How long (ms) loading a page may last: a guard against a page that never loads, generous
#: enough for the heaviest page (a few MB of figures and widget data) on a busy machine.
LOAD = 180_000


class Visit:
    """One page loaded in a fresh browser context, with what went wrong on the way.

    Parameters
    ----------
    browser : playwright.sync_api.Browser
        The browser (the ``browser`` fixture).
    url : str
        The page.
    width, height : int
        The viewport in CSS pixels (default: a 1280 x 900 desktop window). A viewport narrower
        than 1024 px is a touch screen (``tap`` works), as phones and tablets are.
    **options
        More options of the browser context (``is_mobile``, ``device_scale_factor``, ...).
    """

    def __init__(self, browser, url: str, width: int = 1280, height: int = 900, **options):
        self.context = browser.new_context(viewport={"width": width, "height": height},
                                           has_touch=width < 1024, **options)
        self.errors: list[str] = []
        self.external: list[str] = []
        self.context.route("**/*", self._route)
        self.context.set_default_navigation_timeout(LOAD)
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
    context.set_default_navigation_timeout(LOAD)
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


# ------------------------------------------------------------------- phones and tablets: the TOC
def _toc() -> tuple[list[str], list[str]]:
    """``(chapters, pages)`` of _toc.yml as HTML paths: the root and every chapter of every part,
    and all its pages (the chapters and their sections)."""
    data = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters, pages = [data["root"]], [data["root"]]

    def walk(entries, top):
        for entry in entries or []:
            if "file" in entry:
                (chapters if top else []).append(entry["file"])
                pages.append(entry["file"])
            walk(entry.get("sections"), False)

    for part in data.get("parts", []):
        walk(part.get("chapters"), True)
    walk(data.get("chapters"), True)
    return [c + ".html" for c in chapters], [p + ".html" for p in pages]


#: The links of the open table of contents: absolute address, and whether it can be seen (laid
#: out, not hidden, at least partly inside the dialog's width).
DIALOG_LINKS = """(dialog) => [...dialog.querySelectorAll('a[href]')].map(a => {
  const r = a.getBoundingClientRect(), d = dialog.getBoundingClientRect();
  return {href: a.href.split('#')[0], seen: a.checkVisibility({visibilityProperty: true})
          && r.width > 0 && r.right > d.left && r.left < d.right};
})"""


def _open_toc(visit: Visit, how: str = "tap"):
    """Open the table of contents with the one toggle the page shows; the dialog's locator."""
    page = visit.page
    toggle = page.locator(".primary-toggle:visible")
    assert toggle.count() == 1, f"{toggle.count()} visible table-of-contents toggles"
    if how == "tap":
        toggle.tap()
    elif how == "keyboard":
        toggle.focus()
        page.keyboard.press("Enter")
    else:
        toggle.click()
    dialog = page.locator("#pst-primary-sidebar-modal")
    try:
        dialog.wait_for(state="visible", timeout=RESPONSE)
    except PlaywrightTimeout:
        pytest.fail(f"{how}: the table of contents did not open")
    assert dialog.evaluate("d => d.open"), "the table of contents did not open"
    return dialog


@pytest.mark.parametrize("size", [PHONE, TABLET], ids=["phone", "tablet"])
def test_the_table_of_contents_opens_on_phones_and_tablets(built, site, browser, shots, size):
    chapters, pages = _toc()
    start = "book/flash.html"
    visit = Visit(browser, site + start, **size)
    page = visit.page
    try:
        assert page.locator("#pst-primary-sidebar").evaluate(
            "e => !e.checkVisibility({visibilityProperty: true})"), \
            "the sidebar is shown beside the text at this width: nothing to test"
        dialog = _open_toc(visit)
        page.screenshot(path=str(shots / f"toc-open-{size['width']}.png"))
        links = dialog.evaluate(DIALOG_LINKS)
        linked = {link["href"] for link in links}
        seen = {link["href"] for link in links if link["seen"]}
        missing = [p for p in pages if site + p not in linked]
        hidden = [c for c in chapters if site + c not in seen]
        assert not missing, f"pages of _toc.yml not in the table of contents: {missing}"
        assert not hidden, f"chapters not visible in the open table of contents: {hidden}"
        # a tap on a chapter goes there
        target = chapters[-1]
        dialog.locator(f'a[href$="{Path(target).name}"]').first.tap()
        page.wait_for_url(site + target, timeout=RESPONSE)
        assert not visit.errors, visit.errors
    finally:
        visit.close()


def test_the_table_of_contents_closes_and_works_from_the_keyboard(built, site, browser):
    visit = Visit(browser, site + "book/pebble.html", **PHONE)
    page = visit.page
    sidebar = page.locator("#pst-primary-sidebar")
    entries = sidebar.evaluate("e => e.childElementCount")
    try:
        def closed():
            # closed, and the theme has moved the sidebar's content back from the dialog (on
            # the dialog's close event, which comes after the key or the tap)
            try:
                page.wait_for_function(
                    "n => !document.getElementById('pst-primary-sidebar-modal').open && "
                    "document.getElementById('pst-primary-sidebar').childElementCount === n",
                    arg=entries, timeout=RESPONSE)
            except PlaywrightTimeout:
                pytest.fail("the table of contents did not close, or the sidebar did not get "
                            "its content back")

        # Escape closes it
        _open_toc(visit)
        page.keyboard.press("Escape")
        closed()
        # so does a tap beside it, on the dimmed page
        dialog = _open_toc(visit)
        box = dialog.bounding_box()
        assert box["x"] + box["width"] < PHONE["width"] - 20, "the dialog covers the whole width"
        page.touchscreen.tap(PHONE["width"] - 10, PHONE["height"] / 2)
        closed()
        # the keyboard alone: Enter on the focused toggle opens it, Escape closes it and gives
        # the focus back to the toggle
        _open_toc(visit, how="keyboard")
        assert page.evaluate("() => document.getElementById('pst-primary-sidebar-modal')"
                             ".contains(document.activeElement)"), "focus did not enter the dialog"
        page.keyboard.press("Escape")
        closed()
        assert page.evaluate("() => document.activeElement.matches('.primary-toggle')"), \
            "the focus did not return to the toggle"
        # this page's own contents open the same way
        toggle = page.locator(".secondary-toggle:visible")
        assert toggle.count() == 1
        toggle.tap()
        contents = page.locator("#pst-secondary-sidebar-modal")
        contents.wait_for(state="visible", timeout=RESPONSE)
        assert contents.locator("a[href^='#']").first.is_visible()
        page.keyboard.press("Escape")
        assert not contents.evaluate("d => d.open")
        assert not visit.errors, visit.errors
    finally:
        visit.close()


def test_the_sidebar_toggle_folds_the_sidebar_on_a_desktop(built, site, browser):
    visit = Visit(browser, site + "book/flash.html")
    page = visit.page
    try:
        sidebar = page.locator("#pst-primary-sidebar")
        assert sidebar.is_visible()
        # one search field (the sidebar's), not a second one in an otherwise empty header bar
        assert page.locator(".search-button-field:visible").count() == 1
        toggle = page.locator(".primary-toggle:visible")
        assert toggle.count() == 1
        toggle.click()
        try:
            sidebar.wait_for(state="hidden", timeout=RESPONSE)
        except PlaywrightTimeout:
            pytest.fail("the visible toggle did not fold the sidebar away")
        assert not page.locator("#pst-primary-sidebar-modal").evaluate("d => d.open")
        toggle.click()
        sidebar.wait_for(state="visible", timeout=RESPONSE)
        assert not visit.errors, visit.errors
    finally:
        visit.close()


# ------------------------------------------------------------------ phones: no clipped formulas
#: Measures every formula of the article once MathJax has typeset it, after unfolding what is
#: folded (solutions, hidden cells); returns the formulas that break a rule of the test below.
MATH_FITS = """(tol) => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden button.toggle-button').forEach(b => b.click());
  const article = document.querySelector('article.bd-article');
  const source = new Map();
  for (const item of MathJax.startup.document.math) source.set(item.typesetRoot, item.math);
  const clips = v => v === 'hidden' || v === 'clip';
  const scrolls = v => v === 'auto' || v === 'scroll';
  const name = x => '<' + x.tagName.toLowerCase() + (x.className ? '.' +
      String(x.className).trim().split(/\\s+/).join('.') : '') + '>';
  const found = [];
  for (const e of article.querySelectorAll('.math')) {
    const c = e.querySelector('mjx-container');
    if (!c || !e.getClientRects().length) continue;   // untypeset (tested above) or not laid out
    const hidden = [], wide = [];
    // (i) horizontally: the content's extent, then each clipping or scrolling ancestor
    const cr = c.getBoundingClientRect();
    let left = cr.left, right = cr.left + c.scrollWidth;
    for (let x = c; x; x = x === article ? null : x.parentElement) {
      const s = getComputedStyle(x), r = x.getBoundingClientRect();
      const inLeft = r.left + x.clientLeft, inRight = inLeft + x.clientWidth;
      const out = Math.max(right - inRight, inLeft - left);
      if ((clips(s.overflowX) || x === article) && out > tol) {
        hidden.push(`${out.toFixed(1)} px cut off by ${name(x)}`);
        left = Math.max(left, inLeft); right = Math.min(right, inRight);
      } else if (scrolls(s.overflowX)) {
        left = r.left; right = r.right;
      }
    }
    // (i) vertically, in the formula's own boxes
    for (const x of [e, c]) {
      const s = getComputedStyle(x), out = x.scrollHeight - x.clientHeight;
      if (clips(s.overflowY) && out > tol)
        hidden.push(`${out.toFixed(1)} px cut off at the top or bottom by ${name(x)}`);
    }
    // (ii) an inline formula fits on a line
    if (e.tagName === 'SPAN') {
      let b = e.parentElement;
      while (getComputedStyle(b).display.startsWith('inline')) b = b.parentElement;
      const s = getComputedStyle(b);
      const line = b.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
      const width = c.querySelector('mjx-math').getBoundingClientRect().width;
      if (width > line + tol)
        wide.push(`${width.toFixed(0)} px wide in a ${line.toFixed(0)} px line`);
    }
    if (hidden.length || wide.length)
      found.push({tex: (source.get(c) || c.textContent).replace(/\\s+/g, ' ').trim(),
                  inline: e.tagName === 'SPAN', hidden, wide});
  }
  return found;
}"""
#: How far (CSS px) a box may be exceeded before its content counts as cut off: sub-pixel layout.
TOLERANCE = 1.0


#: The elements that stick out past the right edge of the window, outside any scroll box: what
#: makes a whole page scroll sideways.
STICKING_OUT = """(width) => [...document.querySelectorAll('body *')].filter(e => {
  const box = e.getBoundingClientRect();
  if (box.right <= width + 1 || box.width === 0 || getComputedStyle(e).visibility === 'hidden')
    return false;
  for (let a = e.parentElement; a; a = a.parentElement)
    if (getComputedStyle(a).overflowX !== 'visible') return false;
  return true;
}).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')} ` +
            `"${e.textContent.trim().slice(0, 60)}" ` +
            `(right edge ${Math.round(e.getBoundingClientRect().right)} px)`)"""


@pytest.fixture(scope="module")
def phone_pages(built, site, browser) -> dict[str, dict]:
    """Every page at 390 px: ``math``, the formulas that break a rule (see the tests below), and
    ``sideways``, how far the page can be scrolled sideways and what sticks out."""
    found = {}
    for name in _pages(built):
        visit = Visit(browser, site + name, **PHONE)
        try:
            page = visit.page
            has_math = page.evaluate("() => !!(window.MathJax && MathJax.startup)")
            found[name] = {
                "math": page.evaluate(MATH_FITS, TOLERANCE) if has_math else [],
                "sideways": (page.evaluate("() => document.documentElement.scrollWidth")
                             - PHONE["width"], page.evaluate(STICKING_OUT, PHONE["width"])),
            }
        finally:
            visit.close()
    return found


@pytest.fixture(scope="module")
def phone_math(phone_pages) -> dict[str, list[dict]]:
    return {name: seen["math"] for name, seen in phone_pages.items() if seen["math"]}


def test_no_page_scrolls_sideways_on_a_phone(phone_pages):
    """At 390 px no page is wider than the window: long code, links and tables wrap or scroll in
    their own box, so the reader never has to pan the whole page."""
    wide = {name: seen["sideways"] for name, seen in phone_pages.items()
            if seen["sideways"][0] > TOLERANCE}
    assert not wide, "pages wider than a 390 px phone:\n" + "\n".join(
        f"{name}: {over} px too wide; {culprits[:4]}" for name, (over, culprits) in wide.items())


def _report(found: dict[str, list[dict]], key: str) -> str:
    lines = []
    for name, formulas in found.items():
        bad = [f for f in formulas if f[key]]
        if bad:
            lines.append(f"{name}: {len(bad)}")
            lines += [f"    {'inline' if f['inline'] else 'display'} ${f['tex']}$  "
                      f"({'; '.join(f[key])})" for f in bad]
    return "\n".join(lines)


def test_no_formula_is_cut_off_on_a_phone(phone_math):
    """At 390 px no part of any formula is hidden.

    A formula's content is the box of its ``mjx-container`` widened to the container's scroll
    width (which takes in every box inside that sticks out of it, such as an italic letter's
    overhang). Going up from the container to the article, an element with ``overflow-x:
    hidden`` or ``clip`` must hold that extent within ``TOLERANCE`` px of its padding box,
    otherwise the excess is hidden; past an element with ``overflow-x: auto`` or ``scroll`` the
    content can be scrolled into view, and that element's own box is what must fit further up.
    The article's padding box (the column and its margins) must hold it too. Vertically, the
    ``.math`` box and its container, where they clip, must be as tall as their content. Folded
    parts (solutions, hidden cells) are unfolded first. Ink that reaches past every box (a glyph
    drawn outside its advance width) is not measured: the boxes have room for it (ioattn.css).
    """
    report = _report(phone_math, "hidden")
    assert not report, "formulas cut off at 390 px (the page, the TeX, what hides it):\n" + report


def test_no_inline_formula_is_wider_than_a_phone_line(phone_math):
    """At 390 px every inline formula fits on one line.

    The typeset formula (its ``mjx-math`` box) may be at most ``TOLERANCE`` px wider than the
    line it sits in: the content box of its nearest block-level ancestor (paragraph, list item,
    table cell, ...). A longer formula would have to be scrolled sideways in the middle of a
    sentence; set it as display mathematics (``$$ ... $$``) instead.
    """
    report = _report(phone_math, "wide")
    assert not report, ("inline formulas wider than a line at 390 px; set them as display "
                        "mathematics:\n" + report)


# -------------------------------------------------------------------------------- the favicon
def test_every_page_links_the_favicon(built, site, browser):
    icons = set()
    for name in _pages(built):
        html = (built / name).read_text(encoding="utf-8")
        links = re.findall(r'<link rel="(?:shortcut )?icon" href="([^"]+)"', html)
        assert len(links) == 1, f"{name}: {len(links)} favicon links"
        icons.add((built / name).parent.joinpath(links[0]).resolve())
    assert len(icons) == 1, icons
    icon = icons.pop()
    assert icon.is_file() and icon.is_relative_to(built), icon
    root = ElementTree.fromstring(icon.read_bytes())
    assert root.tag.endswith("svg") and root.get("viewBox"), "the favicon is not an SVG image"
    # and a browser draws it
    visit = Visit(browser, site + "book/preface.html")
    try:
        href = visit.page.evaluate("() => document.querySelector('link[rel~=icon]').href")
        drawn = visit.page.evaluate("""async (href) => { const i = new Image(); i.src = href;
            await i.decode(); return [i.naturalWidth, i.naturalHeight]; }""", href)
        assert min(drawn) > 0, drawn
    finally:
        visit.close()
