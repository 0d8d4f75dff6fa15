"""The book builds, with the Makefile's flags, and its pages show what the package computes.

The checks read the HTML of one build of the whole book (the ``built`` fixture of conftest.py);
the browser tests (test_browser.py) load the same pages in chromium.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.book


def _page(html_dir: Path, name: str) -> str:
    path = html_dir / "book" / f"{name}.html"
    assert path.is_file(), f"{path} was not built"
    return path.read_text(encoding="utf-8")


def test_only_the_toc_is_built(built):
    pages = {p.relative_to(built).as_posix() for p in built.rglob("*.html")}
    assert {"book/preface.html", "book/crossover.html", "book/bibliography.html"} <= pages
    outside = (".venv", "ioattn", "tests", "benchmarks", "_build")
    strays = [p for p in pages if p.startswith(outside)]
    assert not strays, f"pages built from outside the book: {strays[:10]}"


def test_crossover_page_has_the_figure(built):
    page = _page(built, "crossover")
    images = re.findall(r'<img[^>]*\bsrc="([^"]+\.(?:svg|png)|data:image/[^"]+)"', page)
    figures = [src for src in images if src.startswith("data:") or "_images/" in src]
    assert figures, "no matplotlib figure (<img> of an SVG) on the crossover page"
    for src in figures:
        if not src.startswith("data:"):
            assert (built / "book" / src).resolve().is_file(), f"missing image {src}"


def test_crossover_page_glues_the_crossover(built):
    """The crossover quoted in the prose is the one in ioattn's own table on the same page."""
    page = html.unescape(_page(built, "crossover"))
    table = re.search(r"crossover at M = ([\d,]+) \([\d.]+ d\^2\): square_tiling -> flash", page)
    assert table, "the table printed by Sweep.table() is missing its crossover into flash"
    pasted = re.findall(r'<span class="pasted-text">([^<]*)</span>', page)
    assert table.group(1) in pasted, (
        f"the crossover M = {table.group(1)} is not glued into the text (glued: {pasted})")


def test_bibliography_resolves(built):
    intro, bib = _page(built, "preface"), _page(built, "bibliography")
    assert 'href="bibliography.html#id' in intro, "the {cite} in the preface links nowhere"
    assert "Saha" in bib and "Hong" in bib


class _Assets(HTMLParser):
    """Collects the URLs a page loads: scripts, stylesheets, preloads, images, frames, media."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            if a.get("src"):
                self.urls.append(a["src"])
            else:
                self._in_script = True
        elif tag in ("img", "iframe", "source", "audio", "video", "embed", "track", "input") \
                and a.get("src"):
            self.urls.append(a["src"])
        elif tag == "object" and a.get("data"):
            self.urls.append(a["data"])
        elif tag == "link" and a.get("href"):
            rel = (a.get("rel") or "").lower().split()
            if {"stylesheet", "preload", "modulepreload", "prefetch"} & set(rel):
                self.urls.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.inline.append(data)


EXTERNAL = re.compile(r"^(https?:)?//", re.IGNORECASE)
LOADED_FROM_NETWORK = re.compile(r"""["'](https?:)?//[^"']+\.(js|css)(\?[^"']*)?["']""", re.I)
def test_pages_load_nothing_from_the_network(built):
    """Every script and stylesheet, MathJax included, is served from the book itself."""
    offenders = []
    for path in sorted(built.rglob("*.html")):
        parser = _Assets()
        parser.feed(path.read_text(encoding="utf-8"))
        name = path.relative_to(built).as_posix()
        offenders += [f"{name}: {url}" for url in parser.urls if EXTERNAL.match(url)]
        offenders += [f"{name}: inline script loads {m.group(0)}"
                      for text in parser.inline
                      for m in LOADED_FROM_NETWORK.finditer(text)]
    for path in sorted(built.rglob("*.css")):
        offenders += [f"{path.relative_to(built)}: {m.group(0)}"
                      for m in re.finditer(r"""(url\(|@import)\s*["']?(https?:)?//[^)"';]+""",
                                           path.read_text(encoding="utf-8", errors="replace"))]
    assert not offenders, "external assets:\n" + "\n".join(offenders[:20])

    parser = _Assets()
    parser.feed(_page(built, "crossover"))
    mathjax = [url for url in parser.urls if "mathjax" in url.lower()]
    assert mathjax, "the crossover page does not load MathJax"
    for url in mathjax:
        assert (built / "book" / url.split("?")[0]).resolve().is_file(), f"missing {url}"


def test_pebble_page_has_the_stepper_and_the_table(built):
    """The static stepper replays a complete game of the glued optimal I/O; the table is there."""
    import json

    from ioattn.pebble import PebbleGame, attention_graph

    page = _page(built, "pebble")
    assert re.search(r'<input type="range" class="pebble-move" min="0" max="\d+"', page), (
        "no range input of the static stepper on the pebble page")
    found = re.findall(r'<script type="application/json" class="pebble-states">(.*?)</script>',
                       page, re.S)
    assert len(found) == 1, "the stepper's states are missing"
    data = json.loads(found[0])
    graph = attention_graph(2, 1)
    vertex = {repr(v): v for v in graph}
    assert data["vertices"] == [repr(v) for v in graph.order]
    moves = [(kind, graph.order[i]) for kind, i in data["moves"]]
    assert len(data["states"]) == len(moves) + 1
    game = PebbleGame.replay(graph, data["M"], moves)
    assert game.is_complete() and game.peak <= data["M"]
    final = data["states"][-1]
    assert {vertex[r] for r, c in zip(data["vertices"], final) if int(c) & 1} == game.red
    assert {vertex[r] for r, c in zip(data["vertices"], final) if int(c) & 2} == game.blue
    text = html.unescape(page)
    pasted = re.findall(r'<span class="pasted-text">([^<]*)</span>', text)
    assert str(game.io) in pasted, f"the optimum {game.io} is not glued into the text"
    assert f"move 0 of {len(moves)}: start" in text

    tables = re.findall(r"<table.*?</table>", text, re.S)
    games = [t for t in tables if "most red pebbles beyond the peak" in t]
    assert len(games) == 1, "the table of every algorithm played as a game is missing"
    for name in ("flash", "square_tiling", "standard"):
        assert games[0].count(name) >= 2, f"{name} is not played forward and backward"
    tables = [t for t in tables if "Q(G, M)" in t]
    assert len(tables) == 3, "the tables of optimum, algorithms and bounds are missing"
    for attention in tables[:2]:
        for heading in ("flash", "square tiling, blocked", "square tiling, outer", "partition",
                        "reduction", "lower_bound"):
            assert heading in attention, f"no column {heading!r} in an attention table"
        assert attention.count("<tr") > 5
    matmul = tables[2]
    assert "outer product" in matmul and "matmul_lower" in matmul and matmul.count("<tr") > 10
    assert "http://" not in found[0] and "https://" not in found[0]


def test_crossover_page_embeds_the_static_explorer(built):
    page = _page(built, "crossover")
    assert page.count('type="range"') >= 2, "the explorer's M and d sliders are missing"
    assert "ioe-data" in page, "the explorer's exact totals are not embedded"


def test_chapters_have_launch_buttons_to_their_notebooks(built):
    """Every notebook page offers its student notebook for download. Its Colab and Binder
    buttons open that notebook on the `notebooks` branch of the repository the site was built
    in, next to the repository and issue buttons; a build in no repository (no
    GITHUB_REPOSITORY, as locally) has none of these buttons rather than dead ones."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("repository", ROOT / "book/_ext/repository.py")
    repository = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("repository", repository)
    spec.loader.exec_module(repository)
    repo = repository.from_environment()
    pages = sorted(p.relative_to(ROOT / "book").with_suffix("").as_posix()
                   for p in (ROOT / "book").rglob("*.md")
                   if not {"_ext", "_static"} & set(p.parts)
                   and "\nkernelspec:" in p.read_text(encoding="utf-8").split("\n---", 1)[0])
    assert len(pages) >= 14 and "assignments/guide" in pages, pages
    for name in pages:
        page = html.unescape(_page(built, name))
        hrefs = re.findall(r'href="([^"]+)"', page)
        download = "../" * (name.count("/") + 1) + f"notebooks/book/{name}.ipynb"
        assert download in hrefs, f"{name}: no download of its notebook"
        assert (built / "book" / name).parent.joinpath(download).resolve().is_file(), download
        if repo is None:
            for gone in ("colab.research.google.com", "mybinder.org", "/issues/new",
                         "github.com/ioattn", "executablebooks"):
                assert not [h for h in hrefs if gone in h], \
                    f"{name}: a link to {gone} in a build with no repository"
            continue
        path = f"book/{name}.ipynb"
        assert f"https://colab.research.google.com/github/{repo.slug}/blob/{repo.branch}/{path}" \
            in hrefs, (name, [h for h in hrefs if "colab" in h])
        assert f"https://mybinder.org/v2/gh/{repo.slug}/{repo.branch}?urlpath=tree/{path}" \
            in hrefs, (name, [h for h in hrefs if "binder" in h])
        assert repo.url in hrefs, f"{name}: no repository button"
        assert any(h.startswith(f"{repo.url}/issues/new") for h in hrefs), f"{name}: no issues"
