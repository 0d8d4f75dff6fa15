"""The whole book as one PDF: the built pages printed by chromium, in the order of ``_toc.yml``.

Run after ``jupyter-book build`` (the Makefile's ``book`` target does)::

    .venv/bin/python book/_ext/pdf.py _build/html

Every page that ``_toc.yml`` lists is served from localhost and opened in the chromium that the
browser tests use (Debian's, driven by Playwright; nothing is fetched from another host), and
printed once MathJax has typeset it: print media (the theme's print styles and ``ioattn.css``
keep the navigation out), A4, backgrounds on. A formula wider than the printed column is scaled
down to fit it, since paper cannot scroll. The pages' PDFs are joined with pypdf into
:data:`PDF_PATH` inside the HTML folder, with one bookmark per page, titled by the page's title,
and the links between pages turned into links inside the PDF.

The preface links to the PDF by :data:`PREFACE_LINK`.
"""

from __future__ import annotations

import argparse
import functools
import io
import shutil
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import yaml
from playwright.sync_api import sync_playwright
from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, FloatObject, NameObject, NullObject

ROOT = Path(__file__).resolve().parents[2]
#: The PDF, relative to the built HTML folder.
PDF_PATH = "_static/ioattn-book.pdf"
#: The PDF's address relative to the preface (``book/preface.html``): the preface's link.
PREFACE_LINK = "../" + PDF_PATH
#: As the browser tests start chromium: no background traffic, no first-run set-up.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
#: page.pdf's settings: A4 with the theme's colours, 15 mm margins, page numbers in the footer.
#: The pages are laid out in a window as wide as the printed column (210 - 2 x 15 mm, in CSS
#: pixels of 1/96 in), so that what PREPARE measures is what is printed.
PRINT = {
    "format": "A4",
    "print_background": True,
    "margin": {"top": "15mm", "bottom": "18mm", "left": "15mm", "right": "15mm"},
    "display_header_footer": True,
    "header_template": "<span></span>",
    "footer_template": ('<div style="font-size: 8px; width: 100%; text-align: center; '
                        'color: #555;"><span class="pageNumber"></span></div>'),
}
COLUMN = {"width": round((210 - 2 * 15) / 25.4 * 96), "height": 1000}
#: Run in each page before it is printed: unfold the exercises' solutions, the folded proofs
#: and the answers of the checks of understanding (paper has no fold button), wait for
#: MathJax, then scale every formula wider than its box down to the box's width (on paper a
#: scroll box would cut it). Returns how many formulas were scaled.
PREPARE = """async () => {
  for (const b of document.querySelectorAll('.toggle-hidden button.toggle-button')) b.click();
  for (const d of document.querySelectorAll('details')) d.open = true;
  document.querySelectorAll('.admonition.toggle *').forEach(e => { e.style.transition = 'none'; });
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  let scaled = 0;
  for (const box of document.querySelectorAll('span.math, div.math mjx-container')) {
    const inner = box.scrollWidth, room = box.clientWidth;
    if (inner > room + 1 && room > 0) {
      const math = box.querySelector('mjx-math') || box.firstElementChild;
      math.style.zoom = (room - 2) / inner;
      scaled += 1;
    }
  }
  return scaled;
}"""


def toc_pages(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """The HTML pages of ``_toc.yml`` in reading order (``book/preface.html``, ...).

    Parameters
    ----------
    toc : Path
        The table of contents (jupyter-book's ``jb-book`` format).

    Returns
    -------
    list of str
        Each page's path relative to the HTML folder: the root, then every ``file`` of every
        part, chapter and section, depth first.
    """
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    pages = [data["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(data.get("parts"))
    walk(data.get("chapters"))
    return [p + ".html" for p in pages]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


#: The names a Chromium-based browser goes by: Debian's package, older Ubuntu's, and Google
#: Chrome (preinstalled on GitHub's Ubuntu runners).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _chromium() -> str:
    exe = next(filter(None, map(shutil.which, BROWSERS)), None)
    if not exe:
        raise SystemExit("chromium is not installed (`make chromium` installs Debian's package)")
    return exe


def _offline(route):
    """Only localhost: the book must print from its own files."""
    url = route.request.url
    if url.startswith(("data:", "blob:")) or urlsplit(url).hostname in ("127.0.0.1", "localhost"):
        route.continue_()
    else:
        route.abort()


def print_pages(html_dir: Path, pages: list[str],
                progress=None) -> tuple[list[tuple[str, str, bytes]], str]:
    """Print each page with chromium, served from a local HTTP server.

    Parameters
    ----------
    html_dir : Path
        The built HTML folder.
    pages : list of str
        The pages to print, relative to ``html_dir``.
    progress : callable, optional
        Called with a line of text as each page is printed (``print``, say).

    Returns
    -------
    printed : list of (str, str, bytes)
        For each page: its path, its title (the article's first heading) and its PDF.
    base : str
        The server's address, which the PDFs' links to other pages start with.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(html_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    printed = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), headless=True,
                                        args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(viewport=COLUMN)
                context.route("**/*", _offline)
                page = context.new_page()
                page.emulate_media(media="print")
                for number, name in enumerate(pages, 1):
                    started = time.perf_counter()
                    response = page.goto(base + name, wait_until="load")
                    if response is None or not response.ok:
                        raise SystemExit(f"{name}: HTTP {response and response.status}")
                    page.evaluate(PREPARE)
                    title = page.evaluate(
                        "() => { const h = document.querySelector('article h1');"
                        " return (h ? h.textContent : document.title).replace(/#$/, '').trim() }")
                    printed.append((name, title, page.pdf(**PRINT)))
                    if progress:
                        sheets = len(PdfReader(io.BytesIO(printed[-1][2])).pages)
                        progress(f"  [{number}/{len(pages)}] {name}: {sheets} pages "
                                 f"({time.perf_counter() - started:.1f} s)")
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return printed, base


def _targets(reader: PdfReader, offset: int) -> dict[str, tuple[int, float | None]]:
    """The named destinations chromium made in one page's PDF (one per HTML ``id``): the PDF
    page each lands on, counted in the whole book, and its height on that page."""
    targets = {}
    for name, dest in reader.named_destinations.items():
        number = reader.get_destination_page_number(dest)
        if number is not None and number >= 0:
            top = dest.get("/Top")
            targets[str(name).lstrip("/")] = (offset + number, None if top is None else float(top))
    return targets


def _retarget_links(writer: PdfWriter, base: str, pages: list[tuple[str, int, dict]]) -> None:
    """Make every link that stays inside the book a link inside the PDF.

    Chromium writes a link within a page as a named destination (the HTML ``id``) and a link to
    another page as a URL on ``base``, the local server. Names are not unique across pages (each
    chapter has its "exercises"), so both become explicit destinations: the PDF page and height
    of the ``id`` in the page it belongs to, or that page's first page when the link has no
    ``id`` (or one chromium made no destination for). Links to ``base`` that are not printed
    pages (a download, the index) are dropped; links to other hosts are kept.

    Parameters
    ----------
    writer : PdfWriter
        The joined PDF.
    base : str
        The local server's address.
    pages : list of (str, int, dict)
        Each printed page's path, its first page in ``writer`` and its :func:`_targets`.
    """
    by_name = {name: (first, targets) for name, first, targets in pages}

    def destination(number, top):
        return ArrayObject([writer.pages[number].indirect_reference, NameObject("/XYZ"),
                            NullObject(), NullObject() if top is None else FloatObject(top),
                            FloatObject(0)])

    bounds = [first for _, first, _ in pages] + [len(writer.pages)]
    for index, page in enumerate(writer.pages):
        annots = page.get("/Annots")
        if not annots:
            continue
        here = max(k for k in range(len(pages)) if bounds[k] <= index)
        keep = ArrayObject()
        for ref in annots:
            annot = ref.get_object()
            if "/Dest" in annot and not isinstance(annot["/Dest"], ArrayObject):
                first, targets = pages[here][1], pages[here][2]
                number, top = targets.get(str(annot["/Dest"]).lstrip("/"), (first, None))
                annot[NameObject("/Dest")] = destination(number, top)
                keep.append(ref)
                continue
            action = annot.get("/A")
            uri = action.get_object().get("/URI") if action is not None else None
            if uri is None or not str(uri).startswith(base):
                keep.append(ref)
                continue
            path, fragment = urldefrag(str(uri))
            target = unquote(path[len(base):])
            if target in by_name:
                first, targets = by_name[target]
                number, top = targets.get(unquote(fragment), (first, None))
                annot[NameObject("/Dest")] = destination(number, top)
                del annot["/A"]
                keep.append(ref)
        page[NameObject("/Annots")] = keep


def build(html_dir: Path, output: Path | None = None, pages: list[str] | None = None,
          progress=None) -> Path:
    """Print the book's pages and join them into one PDF.

    Parameters
    ----------
    html_dir : Path
        The built HTML folder (``_build/html``).
    output : Path, optional
        Where to write the PDF; by default :data:`PDF_PATH` inside ``html_dir``.
    pages : list of str, optional
        The pages, relative to ``html_dir``; by default those of ``_toc.yml``, in its order.
    progress : callable, optional
        Called with a line of text at each stage and each page printed (``print``, say).

    Returns
    -------
    Path
        The PDF written.
    """
    html_dir = Path(html_dir).resolve()
    pages = toc_pages() if pages is None else pages
    missing = [p for p in pages if not (html_dir / p).is_file()]
    if missing:
        raise SystemExit(f"{html_dir}: pages of _toc.yml not built: {missing}")
    say = progress or (lambda line: None)
    say(f"printing {len(pages)} pages with chromium")
    printed, base = print_pages(html_dir, pages, progress)
    say("joining them into one PDF, its links retargeted and identical objects kept once")
    writer = PdfWriter()
    joined = []
    for name, title, data in printed:
        reader = PdfReader(io.BytesIO(data))
        joined.append((name, len(writer.pages), _targets(reader, len(writer.pages))))
        writer.append(reader, outline_item=title, import_outline=False)
    _retarget_links(writer, base, joined)
    # the pages' own named destinations clash (every chapter has its "exercises") and no link
    # uses them any more
    names = writer.root_object.get("/Names")
    if names is not None and "/Dests" in names.get_object():
        del names.get_object()["/Dests"]
    # every page's PDF embeds the same fonts and images again: keep one copy of each
    writer.compress_identical_objects()
    writer.add_metadata({"/Title": _book_title(), "/Creator": "ioattn book/_ext/pdf.py"})
    writer.page_mode = "/UseOutlines"
    output = html_dir / PDF_PATH if output is None else Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "wb") as f:
        writer.write(f)
    say(f"written: {output}")
    return output


def _book_title() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return str(config.get("title", ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", nargs="?", default=str(ROOT / "_build" / "html"),
                        help="the built HTML folder (default: _build/html)")
    parser.add_argument("-o", "--output", help=f"the PDF (default: HTML_DIR/{PDF_PATH})")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = build(Path(args.html_dir), args.output, progress=functools.partial(print, flush=True))
    pages = len(PdfReader(out).pages)
    print(f"The book as one PDF ({pages} pages, {out.stat().st_size / 1e6:.1f} MB, "
          f"{time.perf_counter() - start:.0f} s) is in {out}")


if __name__ == "__main__":
    sys.exit(main())
