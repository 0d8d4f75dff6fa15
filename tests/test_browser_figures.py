"""Every figure of the built book, measured in the browser: its smallest text at the size it is
shown, and its alt text.

A figure is an ``<img>`` in a ``<figure>`` or a cell's output (MyST-NB writes each matplotlib
figure as an SVG file in ``_images``), or an inline ``<svg>`` in a ``<figure>``. For an image of
an SVG, the test fetches the file, puts a copy inline in the page at exactly the displayed size of
the ``<img>`` (same width and height, the file's own ``viewBox``: the scale the browser applies
to the image), and asks the browser for the screen transform of every piece of text:

- a ``<text>`` element: its computed font size times the scale of its screen transform;
- a glyph drawn as a path (matplotlib's default, ``svg.fonttype = "path"``): a ``<use>`` of a
  glyph outline defined at matplotlib's reference size of 100 units per em
  (``matplotlib.textpath.TextToPath.FONT_SCALE``), so its font size is 100 times the scale of the
  ``<use>``'s screen transform. Glyph outlines are named ``<font>-<code point>`` (a hyphen),
  marker outlines are not.

Sub- and superscripts count at their own, smaller size. The smallest size, in CSS px, must be at
least 10 at a 1280 px wide window, and at least 7 at a 390 px phone, where the figures are
scaled down to the column. A PNG figure cannot be measured this way and fails.
"""

from __future__ import annotations

import json

import pytest

# the fixtures browser and site, imported so that pytest finds them here
from .test_browser import Visit, browser, site  # noqa: F401

pytestmark = pytest.mark.book

#: Smallest text of a figure on a desktop, in CSS px.
DESKTOP_PX = 10
#: Smallest text of a figure on a phone, in CSS px: the figures are scaled to the column (about
#: 0.73 of their natural size), where 11 pt text is about 10.5 px and its exponents about 7.4 px.
PHONE_PX = 7

MEASURE = """async () => {
  const FONT_SCALE = %s;
  const scaleOf = (el) => { const m = el.getScreenCTM();
                            return Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)); };
  function sizes(svg) {
    const out = [];
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      out.push(parseFloat(getComputedStyle(t).fontSize) * scaleOf(t));
    }
    for (const u of svg.querySelectorAll('use')) {
      const ref = (u.getAttribute('href') || u.getAttribute('xlink:href') || '').slice(1);
      const target = ref && svg.getElementById(ref);
      if (!target || target.tagName !== 'path' || !ref.includes('-')) continue;  // a marker
      out.push(FONT_SCALE * scaleOf(u));
    }
    return out;
  }
  const figures = [];
  const imgs = [...document.querySelectorAll('figure img, .cell_output img')];
  for (const img of imgs) {
    const box = img.getBoundingClientRect();
    const src = img.getAttribute('src');
    const entry = {src: src, alt: img.getAttribute('alt') || '', width: box.width,
                   natural: img.naturalWidth, kind: 'img', sizes: []};
    figures.push(entry);
    if (!src.endsWith('.svg') && !src.startsWith('data:image/svg+xml')) {
      entry.kind = 'raster'; continue;
    }
    const text = await (await fetch(img.src)).text();
    const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
    const holder = document.createElement('div');
    holder.style.cssText = 'position:absolute;left:0;top:0;opacity:0;pointer-events:none';
    const copy = document.importNode(svg, true);
    copy.setAttribute('width', box.width);
    copy.setAttribute('height', box.height);
    holder.appendChild(copy);
    document.body.appendChild(holder);
    entry.sizes = sizes(copy);
    holder.remove();
  }
  for (const svg of document.querySelectorAll('figure svg')) {
    figures.push({src: 'inline svg', alt: svg.getAttribute('aria-label') || '',
                  width: svg.getBoundingClientRect().width, kind: 'inline', sizes: sizes(svg)});
  }
  return figures;
}"""


def _font_scale() -> int:
    from matplotlib.textpath import TextToPath

    return TextToPath.FONT_SCALE


def measure(page) -> list[dict]:
    """Every figure of the loaded ``page``: src, alt, displayed width, and the font size in
    CSS px of each piece of its text as displayed (``min_px``: the smallest)."""
    figures = page.evaluate(MEASURE % json.dumps(_font_scale()))
    for f in figures:
        f["min_px"] = min(f["sizes"]) if f["sizes"] else None
    return figures


def _chapters(built) -> list[str]:
    return sorted(p.relative_to(built).as_posix() for p in (built / "book").glob("*.html"))


def _visit(browser, url, width):  # noqa: F811
    """The page loaded at ``width`` from the start (a phone's a touch screen): no resize whose
    redrawing a measurement could run ahead of."""
    return Visit(browser, url, width=width)


def test_every_figure_is_readable_and_described(built, site, browser):  # noqa: F811
    desktop, phone, problems = {}, {}, []
    for name in _chapters(built):
        for width, table in ((1280, desktop), (390, phone)):
            v = _visit(browser, site + name, width)
            try:
                for f in measure(v.page):
                    table[name, f["src"]] = f
            finally:
                v.close()
    assert len(desktop) >= 18, sorted(desktop)          # 13 plots and 5 diagrams at least
    for (name, src), f in sorted(desktop.items()):
        where = f"{name} {src.rsplit('/', 1)[-1][:12]}"
        alt = f["alt"].strip()
        if not alt or alt == src or alt.endswith((".svg", ".png")):
            problems.append(f"{where}: no alt text")
        if f["kind"] == "raster":
            problems.append(f"{where}: a raster image, not SVG")
            continue
        if not f["sizes"]:
            problems.append(f"{where}: no text found to measure")
            continue
        if f["min_px"] < DESKTOP_PX:
            problems.append(f"{where}: smallest text {f['min_px']:.1f} px at 1280 px")
        small = phone[name, src]["min_px"]
        if small is None or small < PHONE_PX:
            problems.append(f"{where}: smallest text {small} px at 390 px")
    report = "\n".join(f"{n} {s.rsplit('/', 1)[-1][:12]}: {f['min_px']:.1f} px desktop, "
                       f"{phone[n, s]['min_px']:.1f} px phone"
                       for (n, s), f in sorted(desktop.items()) if f["min_px"])
    assert not problems, "\n".join(problems) + "\n" + report


def test_the_measurement_sees_matplotlib_font_sizes(browser, tmp_path):  # noqa: F811
    """Against a figure whose text sizes are known: 20 pt tick labels at the natural size are
    26.7 px, the superscript of a 10 pt title is 7 pt (9.3 px), and half the width halves
    both."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_title("ten points, with $M = d^2$", fontsize=10)
    ax.plot([1, 2], [1, 2], "o-")                        # markers must not count as text
    ax.tick_params(labelsize=20)
    fig.savefig(tmp_path / "known.svg")
    plt.close(fig)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        svg = (tmp_path / "known.svg").read_text()
        for width in (4 * 96, 2 * 96):
            page.set_content(f'<figure><img alt="a known figure" style="width:{width}px" '
                             f'src="data:image/svg+xml;charset=utf-8,{_quote(svg)}"></figure>')
            page.wait_for_function("() => document.querySelector('img').complete")
            (f,) = measure(page)
            smallest, largest = min(f["sizes"]), max(f["sizes"])
            factor = width / (4 * 96)
            assert smallest == pytest.approx(10 * 0.7 * 4 / 3 * factor, rel=0.02)
            assert largest == pytest.approx(20 * 4 / 3 * factor, rel=0.02)
    finally:
        page.close()


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text)
