"""The whole book as one PDF (book/_ext/pdf.py), made from the built HTML.

The PDF is printed from the build under test into a temporary file: one section per page of
``_toc.yml``, in its order, each opening with its page's title; mathematics typeset (set in
MathJax's fonts, no TeX source left in the text); links between pages kept inside the PDF; A4.
"""

from __future__ import annotations

import html
import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest
from pypdf import PdfReader

from .conftest import ROOT
from .test_browser import RAW_TEX

pytestmark = pytest.mark.book


def _module():
    spec = importlib.util.spec_from_file_location("pdf", ROOT / "book/_ext/pdf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pdf = _module()


@pytest.fixture(scope="module")
def book_pdf(built, tmp_path_factory) -> PdfReader:
    out = pdf.build(built, tmp_path_factory.mktemp("pdf") / "book.pdf")
    return PdfReader(out)


def _text(fragment: str) -> str:
    """The text of an HTML fragment, without its heading links ("#")."""
    fragment = re.sub(r"<a class=\"headerlink\".*?</a>", "", fragment, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _title(page: Path) -> str:
    """The title of a built page: the article's first heading, numbered, as the reader sees it
    (not the theme's print-only copy before the article)."""
    article = page.read_text(encoding="utf-8").split("<article", 1)[1]
    return " ".join(_text(re.search(r"<h1[^>]*>(.*?)</h1>", article, re.S).group(1)).split())


def _code(page: Path) -> str:
    """The text of a built page's code blocks (cell sources and outputs)."""
    source = page.read_text(encoding="utf-8")
    return "\n".join(_text(b) for b in re.findall(r"<pre[^>]*>(.*?)</pre>", source, re.S))


def _words(text: str) -> str:
    return " ".join(text.split())


def _squeezed(text: str) -> str:
    """The text without white space and line-break hyphens, its ligatures spelled out (the PDF's
    text has "\ufb01" for "fi"): how a title reads in the PDF's text whatever its line breaks."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text.replace("-\n", "-")))


def _sections(reader: PdfReader) -> list[tuple[str, range]]:
    """The PDF's top-level bookmarks: each one's title and the PDF pages it covers."""
    starts = [(item.title, reader.get_destination_page_number(item)) for item in reader.outline
              if not isinstance(item, list)]
    ends = [s for _, s in starts[1:]] + [len(reader.pages)]
    return [(title, range(start, end)) for (title, start), end in zip(starts, ends)]


def test_the_pdf_has_one_section_per_page_in_the_order_of_the_toc(built, book_pdf):
    pages = pdf.toc_pages()
    assert pages[0] == "book/preface.html" and len(pages) == len(set(pages))
    sections = _sections(book_pdf)
    assert [t for t, _ in sections] == [_title(built / p) for p in pages]
    assert all(len(r) >= 1 for _, r in sections), [(t, len(r)) for t, r in sections]
    assert sections[0][1].start == 0 and sections[-1][1].stop == len(book_pdf.pages)


def test_each_section_opens_with_its_pages_title(book_pdf):
    for title, pages in _sections(book_pdf):
        first = book_pdf.pages[pages.start].extract_text()
        assert _squeezed(title) in _squeezed(first), \
            f"{title!r} is not on its first page: {_words(first)[:200]!r}"


def _fonts(page) -> set[str]:
    """The names of the fonts a PDF page uses (MathJax's are embedded as Type 3 fonts, named
    only in their descriptor: ``MathJax_Main-Regular``, ...)."""
    fonts = set()
    resources = page.get("/Resources")
    stack = [resources.get_object()] if resources else []
    while stack:
        res = stack.pop()
        for ref in (res.get("/Font") or {}).values():
            font = ref.get_object()
            descriptor = font.get("/FontDescriptor")
            name = font.get("/BaseFont") or (
                descriptor.get_object().get("/FontName") if descriptor is not None else "")
            fonts.add(str(name).split("+")[-1])
        for ref in (res.get("/XObject") or {}).values():
            sub = ref.get_object().get("/Resources")
            if sub is not None:
                stack.append(sub.get_object())
    return fonts


def test_the_mathematics_is_typeset(built, book_pdf):
    """No TeX source in a section's text but what its page's code shows (a cell that labels a
    table ``"$N$"``), and every page with mathematics set in MathJax's fonts."""
    raw, untypeset = [], []
    for name, (title, pages) in zip(pdf.toc_pages(), _sections(book_pdf)):
        text = _words(" ".join(book_pdf.pages[i].extract_text() for i in pages))
        in_code = set(RAW_TEX.findall(_words(_code(built / name))))
        raw += [f"{title}: {m}" for m in RAW_TEX.findall(text) if m not in in_code]
        source = (ROOT / Path(name).with_suffix(".md")).read_text(encoding="utf-8")
        if re.search(r"\$[^$\s]", source):
            fonts = set().union(*(_fonts(book_pdf.pages[i]) for i in pages))
            if not any(f.startswith("MathJax_") for f in fonts):
                untypeset.append(f"{title}: no MathJax font among {sorted(fonts)}")
    assert not raw, f"TeX source in the PDF's text: {raw[:20]}"
    assert not untypeset, untypeset


def test_links_between_pages_stay_inside_the_pdf(book_pdf):
    inside, outside = 0, []
    for page in book_pdf.pages:
        for ref in page.get("/Annots") or []:
            annot = ref.get_object()
            if annot.get("/Subtype") != "/Link":
                continue
            action = annot.get("/A")
            uri = action.get_object().get("/URI") if action is not None else None
            if uri is not None:
                host = re.match(r"[a-z]+://([^/:]+)", str(uri))
                if host is None or host.group(1) in ("127.0.0.1", "localhost"):
                    outside.append(str(uri))
            else:
                dest = annot["/Dest"]
                assert book_pdf.get_page_number(dest[0].get_object()) >= 0
                inside += 1
    assert not outside, f"links to the local server left in the PDF: {outside[:10]}"
    assert inside > 100, inside  # every chapter cites, refers and numbers its equations


def test_the_pdf_is_a4(book_pdf):
    a4 = (210 / 25.4 * 72, 297 / 25.4 * 72)  # points
    for page in book_pdf.pages:
        box = page.mediabox  # chromium rounds the size up to whole points
        assert abs(float(box.width) - a4[0]) < 1 and abs(float(box.height) - a4[1]) < 1, box


def test_the_preface_links_the_pdf(built):
    preface = (built / "book/preface.html").read_text(encoding="utf-8")
    assert f'href="{pdf.PREFACE_LINK}"' in preface, \
        f"the preface has no link to the book's PDF ({pdf.PREFACE_LINK})"
    assert (built / "book" / pdf.PREFACE_LINK).resolve() == (built / pdf.PDF_PATH).resolve()
