"""The book's teaching conventions, read from its MyST sources and its built pages.

Every chapter of the book teaches with the same few devices (``CONTRIBUTING.md`` shows how to
write each):

- a **worked example** on small numbers, an admonition of class ``worked-example``;
- a **check of understanding** in each main (``##``) section, an admonition of class
  ``quick-check`` whose answer is folded;
- a **difficulty** on every exercise: its title starts with one to three stars (``★`` a direct
  application, ``★★`` a page of work, ``★★★`` a long derivation);
- **text for the student**: no sentence about how the book is built or checked, and no display
  broken by hand for phones (``&\\quad`` continuation lines: wide displays scroll sideways);
- **weight**: no page carries more than :data:`MAX_FIGURE_BYTES` of figures, and none is taller
  than :data:`MAX_SCREENS` phone screens.

This module only reads; ``benchmarks/teaching.py`` prints its table and ``tests/test_teaching.py``
and ``tests/test_browser_teaching.py`` assert the conventions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[2]

#: At most this many bytes of figures (inline SVG, images, data URIs) on one page.
MAX_FIGURE_BYTES = 1_000_000
#: The phone screen the page heights are measured on (CSS pixels), and at most how many of its
#: heights one page may be.
PHONE = {"width": 390, "height": 844}
MAX_SCREENS = 25

#: ``##`` sections that need no check of understanding (they are the checks, or lists).
UNCHECKED_SECTIONS = re.compile(
    r"^(exercises|takeaways?|summary|notes|further reading|references|bibliography|sources"
    r"|notes and references|what this chapter (shows|does)|what comes next)\b", re.I)
#: Labs: chapters whose main sections are the steps of a measurement (set up, measure, save);
#: only the sections that teach (a prediction, a comparison) need a check of understanding.
LABS = {"gpu_measure": ("Settings", "Is there a GPU?", "Measure", "Save the result",
                        "Contribute your measurement")}
#: A difficulty: one to three stars, then the exercise's title.
DIFFICULTY = re.compile(r"^(★{1,3})(?!★)(\s+\S.*)?$")
#: Sentences about the build, the tests or the checks, which the student's text never has.
ABOUT_THE_BUILD = re.compile(
    r"\bthe build\b|\bbuild(?:s)? fails?\b|\bwould not build\b|\bPASS or FAIL\b|"
    r"\bclick to show\b|\btest suite\b|\bpytest\b|\bthe page's (?:code|cells) checks?\b",
    re.I)
#: A display continued by hand on a new line.
HAND_BREAK = re.compile(r"&\s*\\quad")

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\{[\w-]+\})?")
_COLON = re.compile(r"^(:{3,}|`{3,})\{([\w:-]+)\}\s*(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


@dataclass
class Section:
    """A ``##`` section of a page and its checks of understanding."""

    title: str
    checks: int = 0

    @property
    def needs_check(self) -> bool:
        return not UNCHECKED_SECTIONS.match(self.title)


@dataclass
class Page:
    """What one page's MyST source holds of the teaching devices."""

    path: Path
    worked: int = 0
    checks: int = 0
    takeaways: int = 0
    exercises: list = field(default_factory=list)      # the exercises' titles
    sections: list = field(default_factory=list)       # Section, in order
    about_the_build: list = field(default_factory=list)  # (line number, text)
    hand_breaks: list = field(default_factory=list)      # line numbers

    @property
    def rated(self) -> int:
        """How many exercises carry a difficulty."""
        return sum(bool(DIFFICULTY.match(t)) for t in self.exercises)

    @property
    def unchecked(self) -> list[str]:
        """The main sections with no check of understanding (a lab's steps need none)."""
        steps = LABS.get(self.path.stem, ())
        return [s.title for s in self.sections
                if s.needs_check and not s.checks and s.title not in steps]


def _prose_lines(text: str):
    """``(line number, line)`` of the Markdown, without code cells and code blocks (a fenced
    directive other than ``{code-cell}``, such as ``{math}`` or ``{prf:proof}``, is prose)."""
    code = None          # the fence of the code block we are in
    directives = []      # the fences of the open backtick directives
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = _FENCE.match(stripped)
        if code:
            if m and stripped == m.group(1) and m.group(1).startswith(code):
                code = None
            continue
        if m:
            fence, name = m.group(1), m.group(2)
            if stripped == fence and directives and fence.startswith(directives[-1]):
                directives.pop()
            elif name and name != "{code-cell}":
                directives.append(fence)
                yield n, line
            else:
                code = fence
            continue
        yield n, line


def read_page(path: Path) -> Page:
    """The teaching devices of the MyST page at ``path``."""
    page = Page(Path(path))
    lines = list(_prose_lines(Path(path).read_text(encoding="utf-8")))
    in_front_matter = bool(lines) and lines[0][1].strip() == "---"
    section = None
    for i, (n, line) in enumerate(lines):
        if in_front_matter:
            in_front_matter = not (i > 0 and line.strip() == "---")
            continue
        heading = _HEADING.match(line)
        if heading and len(heading.group(1)) <= 2:
            section = Section(heading.group(2)) if len(heading.group(1)) == 2 else None
            if section:
                page.sections.append(section)
            continue
        directive = _COLON.match(line.strip())
        if directive:
            kind, title = directive.group(2), directive.group(3).strip()
            if kind == "exercise":
                page.exercises.append(title)
            elif kind == "admonition":
                classes = _options(lines, i).get("class", "").split()
                page.worked += "worked-example" in classes
                page.takeaways += "takeaway" in classes
                if "quick-check" in classes:
                    page.checks += 1
                    if section:
                        section.checks += 1
            continue
        if ABOUT_THE_BUILD.search(line):
            page.about_the_build.append((n, line.strip()))
        if HAND_BREAK.search(line):
            page.hand_breaks.append(n)
    return page


def _options(lines, i: int) -> dict:
    """The ``:name: value`` options right under the directive on ``lines[i]``."""
    options = {}
    for _, line in lines[i + 1:]:
        m = re.match(r"^\s*:([\w-]+):\s*(.*)$", line)
        if not m:
            break
        options[m.group(1)] = m.group(2)
    return options


# ------------------------------------------------------------------------------ the table of contents
def _toc() -> dict:
    return yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))


def chapters() -> list[Path]:
    """The numbered chapters, in the book's order (the parts of _toc.yml with ``numbered``)."""
    out = []
    for part in _toc()["parts"]:
        if part.get("numbered"):
            out += [ROOT / f"{c['file']}.md" for c in part["chapters"]]
    return out


def pages() -> list[Path]:
    """Every page of _toc.yml, in order."""
    toc = _toc()
    out = [ROOT / f"{toc['root']}.md"]

    def walk(entries):
        for e in entries:
            out.append(ROOT / f"{e['file']}.md")
            walk(e.get("sections", []))

    for part in toc["parts"]:
        walk(part["chapters"])
    return out


# ------------------------------------------------------------------------------ built pages
class _Figures(HTMLParser):
    """The bytes of figures in one HTML page: inline ``<svg>`` (from its start tag to its end
    tag, nested ones counted once), and every ``<img>``'s data URI or local file."""

    def __init__(self, html_file: Path):
        super().__init__(convert_charrefs=False)
        self.file = Path(html_file)
        self.bytes = 0
        self.images: set[Path] = set()
        self._depth = 0
        self._start = None

    def _offset(self) -> int:
        line, col = self.getpos()
        return self._line_starts[line - 1] + col

    def feed_file(self):
        text = self.file.read_text(encoding="utf-8")
        self._line_starts = [0]
        for line in text.splitlines(keepends=True):
            self._line_starts.append(self._line_starts[-1] + len(line.encode("utf-8")))
        self.feed(text)
        self.close()
        return self

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            if self._depth == 0:
                self._start = self._offset()
            self._depth += 1
        elif tag == "img" and self._depth == 0:
            src = dict(attrs).get("src") or ""
            if src.startswith("data:"):
                self.bytes += len(src)
            elif src and not urlsplit(src).scheme:
                self.images.add((self.file.parent / unquote(urlsplit(src).path)).resolve())

    def handle_endtag(self, tag):
        if tag == "svg" and self._depth:
            self._depth -= 1
            if self._depth == 0:
                self.bytes += self._offset() + len("</svg>") - self._start

    def total(self) -> int:
        return self.bytes + sum(p.stat().st_size for p in self.images if p.is_file())


def figure_bytes(html_file: Path) -> int:
    """The bytes of figures a built page carries (inline SVG, data URIs, local images)."""
    return _Figures(html_file).feed_file().total()


def page_height(page, url: str) -> int:
    """The height in CSS pixels of the page at ``url`` on a phone screen (:data:`PHONE`), with
    its folded boxes folded, as a reader first sees it; ``page`` is a Playwright page."""
    page.set_viewport_size(PHONE)
    page.goto(url, wait_until="load")
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise"
                  " ? MathJax.startup.promise.then(() => true) : true")
    return int(page.evaluate("() => document.documentElement.scrollHeight"))
