"""Sphinx extension: the student notebooks of the book, written from the build itself.

At the end of an HTML build, this writes into the site, under ``notebooks/``:

- ``notebooks/<page>.ipynb`` for every page that is a notebook (the chapters and the assignment
  pages): the page as a notebook a person would write. Its Markdown is made from the page's
  resolved doctree (Sphinx's own resolution of references, so a ``{prf:ref}`` reads "Theorem
  3.2" and a citation "[SY24]", as on the site, each linked to its place on the site), with the
  glued values as the site shows them, theorems and exercises as headed paragraphs and every
  solution folded in ``<details>``. Its code is the page's code, read from the notebook MyST-NB
  executed during the build (nothing is executed twice), without outputs: without the ``glue``
  calls, and without the hidden cells that only check the page (a hidden cell stays when a
  later cell uses a name it defines). The first code cell installs ioattn where it is missing.
- ``notebooks/practice/<assignment>.ipynb``: each assignment's student notebook, made by
  ``ioattn assign`` for the student id ``practice`` (no solutions, keys or hidden tests: those are
  not in the package's notebooks), linked from the assignment pages with the
  ``{practice-notebook}`` role.
- ``notebooks/ioattn-<version>-py3-none-any.whl``, the package the site was built from;
  ``notebooks/requirements.txt`` (for Binder) and a ``README.md``.

The folder is what the Pages workflow publishes on the branch the launch buttons open (see
``book/_ext/repository.py``); the download button of each page offers its notebook.

How a notebook installs ioattn (its first code cell, :func:`setup_source`; the practice
notebooks have the same): where ioattn is missing, from the wheel ``ioattn-<version>.whl`` when
it is beside the notebook (or up to two folders above it, as in the site's ``notebooks/``
folder), else from the repository at the commit the site was built from (``pip install "ioattn
@ git+https://github.com/<owner>/<name>.git@<sha>"``; with the ``teach`` extra for a notebook
that makes or grades assignments). A commit never changes, so a notebook opened from the branch
or downloaded months ago still installs the package its text was written for; Colab and Binder
have git. pip's output is captured: when it fails, or when neither source is known (a local
build), the cell's only output is one sentence, pip's last error line and what to do, and the
notebook stops there.

Links lead to the site: to ``IOATTN_SITE_URL``, the book's ``html_baseurl`` or GitHub Pages'
address of the repository (:func:`site_url`); in a local build, where none is known, relative
to the notebook's place in the site's ``notebooks/`` folder.
"""

from __future__ import annotations

import ast
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import nbformat
from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
#: The site's folder with the notebooks.
FOLDER = "notebooks"
#: The tag of the set-up cell.
SETUP_TAG = "setup"
#: Cells hidden from the page: dropped when they only check it (a cell whose input only is
#: hidden, ``remove-input``, stays: its output is on the page).
HIDDEN = {"remove-cell"}
#: Where ``glue`` is imported from.
_GLUE_MODULES = {"myst_nb", "myst_nb.glue", "myst_nb.ext.glue"}


# ------------------------------------------------------------------------------ the set-up cell
#: The extras of ioattn a notebook's code may need: the modules that show each is installed,
#: and the code that needs it (making or grading assignments' notebooks needs the teach extra;
#: checking an answer with ``ioattn.teach.check`` does not).
EXTRAS = {"teach": ("jupytext", "nbformat", "copydetect")}
_EXTRA_USES = {"teach": re.compile(
    r"\bimport (nbformat|jupytext|copydetect)\b|\bfrom (nbformat|jupytext|copydetect)\b|"
    r"\bioattn\.teach\.(build|grade|referee|runner|sandbox|similarity)\b|"
    r"\bioattn (assign|grade|similar)\b|[\"']-m[\"'],\s*[\"']ioattn[\"']")}


def extras_of(sources) -> list[str]:
    """The extras of ioattn that code cells ``sources`` need (``teach`` for the assignments)."""
    text = "\n".join(_without_comments(s) for s in sources)
    return [name for name, uses in _EXTRA_USES.items() if uses.search(text)]


def _without_comments(source: str) -> str:
    """``source`` without its comments (a cell that does not tokenize stays as it is)."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    lines = source.splitlines()
    for t in tokens:
        if t.type == tokenize.COMMENT:
            (row, col), (_, end) = t.start, t.end
            lines[row - 1] = lines[row - 1][:col] + lines[row - 1][end:]
    return "\n".join(lines)


def dependencies() -> list[str]:
    """The names of ioattn's dependencies, from pyproject.toml (for the set-up cell's advice)."""
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ImportError:                                     # Python 3.10
        return []
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return [Requirement(r).name for r in tomllib.loads(text)["project"]["dependencies"]]


def with_extras(requirement: str, extras) -> str:
    """``ioattn @ URL`` (or a wheel's path) as ``ioattn[extras] @ URL`` (``PATH[extras]``)."""
    if not extras:
        return requirement
    tag = "[" + ",".join(extras) + "]"
    name, at, url = requirement.partition(" @ ")
    return f"{name}{tag} @ {url}" if at else f"{requirement}{tag}"


_SETUP = """\
{comment}
def _setup_ioattn():
    import importlib, importlib.util, pathlib, re, subprocess, sys

    class SetupError(Exception):
        def _render_traceback_(self):          # Jupyter and Colab show the message alone
            return [f"{{type(self).__name__}}: {{self}}"]

    needs = {needs!r}
    if all(importlib.util.find_spec(m) for m in needs):
        return
    wheel = "{wheel}"
    the_wheel = f"the wheel {{wheel}} from the notebooks/ folder of the book's site"
    here = pathlib.Path.cwd()
    wheels = sorted(w for folder in (here, *here.parents[:2])
                    for w in folder.glob("ioattn-*.whl"))
    if wheels:
        source = str(wheels[-1]){extras_suffix}
        advice = ("Its dependencies come from the package index: connect to the network, "
                  "or install them with pip ({deps}), and run this cell again")
{otherwise}
    print(f"Installing ioattn from {{source}} ...", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-color",
                          source], capture_output=True, text=True)
    if pip.returncode != 0:
        text = re.sub(r"\\x1b\\[[0-9;]*[A-Za-z]", "", pip.stderr + pip.stdout)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines or ["no output"]
        raise SetupError(f"pip could not install ioattn ({{errors[-1]}}). {{advice}}.")
    importlib.invalidate_caches()
    if not all(importlib.util.find_spec(m) for m in needs):
        raise SetupError("ioattn is installed, but this kernel does not see it yet: restart "
                         "the kernel and run the notebook again.")
    print("ioattn is installed.")


_setup_ioattn()
"""


_FROM_REPOSITORY = """\
    else:
        source = {requirement!r}
        advice = f"No network? Put {{the_wheel}} beside this notebook and run this cell again\""""
_NO_SOURCE = """\
    else:
        raise SetupError(f"ioattn is not installed: put {{the_wheel}} beside this notebook and "
                         "run this cell again.")"""


def setup_source(requirement: str | None, wheel: str = "ioattn-<version>.whl",
                 extras=()) -> str:
    """The set-up cell: where ioattn (with ``extras``) is missing, install it from a wheel
    ``ioattn-*.whl`` beside the notebook (or up to two folders above it: the site's
    ``notebooks/`` folder), else from ``requirement`` (the repository at the site's commit; None:
    none known), and say in one sentence what to do when neither works. pip runs with its output
    captured: a failure shows pip's last error line and what to do, as the cell's only output
    (an exception IPython shows without a traceback), and stops the notebook. A no-op where
    ioattn is installed."""
    import textwrap

    needs = ["ioattn", *(m for e in extras for m in EXTRAS[e])]
    comment = textwrap.fill(
        "Set-up: install ioattn, the package this notebook uses, where it is missing (on Colab, "
        f"or on a fresh machine): from the wheel {wheel} when it is beside this notebook, else "
        + ("from the book's repository at the commit this notebook was made from"
           if requirement else "say what to do")
        + ". Where ioattn is installed, this cell does nothing.",
        width=95, initial_indent="# ", subsequent_indent="# ")
    otherwise = (_FROM_REPOSITORY.format(requirement=with_extras(requirement, extras))
                 if requirement else _NO_SOURCE.format())
    return _SETUP.format(
        comment=comment, wheel=wheel, needs=needs, otherwise=otherwise,
        extras_suffix=f' + "[{",".join(extras)}]"' if extras else "",
        deps=" ".join(dependencies()) or "numpy and the others").rstrip("\n")


# ------------------------------------------------------------------------------ the code cells
def _is_glue_call(stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "glue")


def _glue_only(stmt) -> bool:
    """A ``glue`` call, or a loop, ``if`` or ``with`` that only makes ``glue`` calls."""
    if _is_glue_call(stmt):
        return True
    if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
        body = [*stmt.body, *getattr(stmt, "orelse", [])]
        return all(_glue_only(s) for s in body)
    return False


def _without(source: str, drop) -> str:
    """``source`` without its statements for which ``drop(stmt)`` is true at the top level, and
    without its ``glue`` calls at any depth (a loop or ``if`` that only glues goes whole), by
    lines, so the comments and layout of the rest stay as written. Imports of ``glue`` lose
    that name."""
    try:
        tree = ast.parse(source)
    except SyntaxError:           # IPython magics: leave the cell as it is
        return source
    lines = source.splitlines()
    cut: set = set()
    replace: dict = {}

    def span(stmt):
        return range(stmt.lineno - 1, stmt.end_lineno)

    def prune(body):
        """Cut the glue-only statements of a nested ``body``; ``pass`` if none is left."""
        kept = [st for st in body if not _glue_only(st)]
        for st in body:
            if _glue_only(st):
                cut.update(span(st))
            else:
                for field in ("body", "orelse", "finalbody"):
                    inner = getattr(st, field, None)
                    if inner:
                        prune(inner)
                for handler in getattr(st, "handlers", []):
                    prune(handler.body)
        if body and not kept:
            first = body[0]
            indent = lines[first.lineno - 1][: first.col_offset]
            replace[first.lineno - 1] = indent + "pass"

    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module in _GLUE_MODULES:
            kept = [a for a in stmt.names if a.name != "glue"]
            cut.update(span(stmt))
            if kept:
                names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
                replace[stmt.lineno - 1] = f"from {stmt.module} import {names}"
        elif _glue_only(stmt) or drop(stmt):
            cut.update(span(stmt))
        else:
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if inner and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef)):
                    prune(inner)
            for handler in getattr(stmt, "handlers", []):
                prune(handler.body)
    out = [replace.get(i, line) for i, line in enumerate(lines)
           if i not in cut or i in replace]
    text = "\n".join(out).strip("\n")
    # Blank runs left by the cuts, and comments left alone at the end of the cell, go too.
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    kept_lines = text.splitlines()
    while kept_lines and kept_lines[-1].lstrip().startswith("#"):
        kept_lines.pop()
    return "\n".join(kept_lines).strip("\n")


def _only_comments(source: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in source.splitlines())


def _names(source: str, imports: bool = True):
    """(names a cell binds, names it reads); with ``imports=False``, only the bound names,
    those bound by imports left out."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return (set(), set()) if imports else set()
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and imports:
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return (bound, read) if imports else bound


def _imported(source: str) -> set:
    """The names a cell's top-level imports bind."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {(a.asname or a.name).split(".")[0] for stmt in tree.body
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) for a in stmt.names}


def _imports_of(source: str, names: set) -> str:
    """The top-level import statements of ``source`` that bind one of ``names``."""
    tree, lines = ast.parse(source), source.splitlines()
    return "\n".join("\n".join(lines[stmt.lineno - 1:stmt.end_lineno]) for stmt in tree.body
                     if isinstance(stmt, (ast.Import, ast.ImportFrom)) and
                     {(a.asname or a.name).split(".")[0] for a in stmt.names} & names)


def student_code(cells: list[tuple[str, list]]) -> list[str | None]:
    """For code cells ``(source, tags)`` in order, the source each has in the student's
    notebook, or None where it is dropped.

    Every cell loses its ``glue`` calls (the values are in the text). A hidden cell
    (``remove-cell``) also loses its ``assert`` statements, and is dropped when nothing is left
    or when no later cell reads a name it binds; so is a cell that was only glue.
    """
    out: list[str | None] = []
    for source, tags in cells:
        hidden = bool(HIDDEN & set(tags))
        text = _without(source, lambda s, h=hidden: _is_glue_call(s)
                        or (h and isinstance(s, ast.Assert)))
        out.append(None if _only_comments(text) else text)
    needed: set = set()
    for i in range(len(cells) - 1, -1, -1):
        if out[i] is None:
            continue
        if HIDDEN & set(cells[i][1]):
            bound, imported = _names(out[i], imports=False), _imported(out[i])
            if not bound & needed:
                # Nothing it computes is used: at most its imports of names used later stay.
                out[i] = _imports_of(out[i], needed) if imported & needed else None
                if out[i] is None:
                    continue
        needed |= _names(out[i])[1]
    return out


# ------------------------------------------------------------------------------ the Markdown
def _escape(text: str) -> str:
    for char in "\\`*$<":
        text = text.replace(char, "\\" + char if char != "<" else "&lt;")
    return text


def _code_span(text: str) -> str:
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _details(summary: str, body: str) -> str:
    """A folded box, as the site folds it: ``<details>`` with its title as the summary."""
    return f"<details>\n<summary>{summary}</summary>\n\n{body}\n\n</details>"


def _headed(head: str, body: str) -> str:
    """``head`` run into the first paragraph of ``body``, or on a line of its own when the body
    starts with a list, a formula, a table or a quote."""
    first = body.lstrip()
    if not first:
        return head
    if first.startswith(("- ", "$$", "|", ">", "```", "<", "#")) or \
            (first[:1].isdigit() and ". " in first.split("\n", 1)[0][:5]):
        return f"{head}\n\n{body}"
    return f"{head} {body}"


def _content(node) -> bool:
    """A section that is the body of a theorem, an exercise or a solution, not of the page."""
    return isinstance(node, nodes.section) and any(
        name.endswith("-content") for name in [*node.get("ids", []), *node.get("classes", [])])


class Converter:
    """One page's resolved doctree and executed notebook -> the student notebook's cells.

    Parameters
    ----------
    app : sphinx.application.Sphinx
    docname : str
    executed : nbformat.NotebookNode
        The notebook MyST-NB executed for the page (its cells indexed as the doctree's
        ``cell_index``).
    site : str or None
        The site's URL (links are absolute), or None (links relative to the notebook's place in
        the built site).
    """

    def __init__(self, app, docname, executed, site):
        self.app, self.docname, self.executed, self.site = app, docname, executed, site
        self.env = app.env
        self.numbers = app.env.toc_fignumbers.get(docname, {})
        self.secnumbers = app.env.toc_secnumbers.get(docname, {})
        self.page_uri = app.builder.get_target_uri(docname)
        self.cells: list = []
        self.buffer: list[str] = []
        code = [(i, c) for i, c in enumerate(executed.cells) if c.cell_type == "code"]
        kept = student_code([(c.source, c.metadata.get("tags", [])) for _, c in code])
        self.code = {i: (c, k) for (i, c), k in zip(code, kept)}
        self.last_index = -1
        self.title = ""

    # -------------------------------------------------------------------- links
    def url(self, refuri: str) -> str:
        """``refuri`` (relative to the page's HTML) as a link from the notebook."""
        if urlsplit(refuri).scheme or refuri.startswith("mailto:"):
            return refuri
        target = urljoin("http://site/" + self.page_uri, refuri)[len("http://site/"):]
        if self.site:
            return self.site + target
        here = posixpath.dirname(f"{FOLDER}/{self.docname}.ipynb")
        path, _, frag = target.partition("#")
        rel = posixpath.relpath(path or self.page_uri, here)
        return rel + (f"#{frag}" if frag else "")

    def number(self, node, figtype) -> str:
        ids = node.get("ids") or [""]
        return ".".join(map(str, self.numbers.get(figtype, {}).get(ids[0], ())))

    # -------------------------------------------------------------------- cells
    def flush(self):
        text = "\n\n".join(b.strip("\n") for b in self.buffer if b.strip()).strip()
        if text:
            self.cells.append(nbformat.v4.new_markdown_cell(text))
        self.buffer = []

    def code_cell(self, index):
        for i in range(self.last_index + 1, index + 1):   # hidden cells the page skipped
            if i in self.code and self.code[i][1] is not None:
                self.flush()
                cell, source = self.code[i]
                tags = [t for t in cell.metadata.get("tags", [])
                        if t not in ("remove-cell", "remove-input", "remove-output")]
                meta = {"tags": tags} if tags else {}
                self.cells.append(nbformat.v4.new_code_cell(source, metadata=meta))
        self.last_index = max(self.last_index, index)

    def run(self, doctree) -> list:
        self.block(doctree, 0)
        self.code_cell(len(self.executed.cells) - 1)
        self.flush()
        return self.cells

    # -------------------------------------------------------------------- blocks
    def blocks(self, node, level) -> str:
        """The children of ``node`` as Markdown (a code cell inside flushes the text)."""
        out = []
        for child in node.children:
            text = self.block(child, level)
            if text:
                out.append(text)
        return "\n\n".join(out)

    def block(self, node, level):  # noqa: C901 - one branch per kind of node
        """``node`` as Markdown; sections and code cells go to the cells directly."""
        if _content(node):
            return self.blocks(node, level)
        if isinstance(node, (nodes.document, nodes.section)):
            if isinstance(node, nodes.section):
                self.flush()
            for child in node.children:
                if isinstance(child, nodes.title) and isinstance(node, nodes.section):
                    self.buffer.append(self.heading(node, child, level))
                    if level == 1:           # the title is a cell of its own
                        self.flush()
                else:
                    self.emit(child, level)
            return ""
        if isinstance(node, nodes.container) and node.get("nb_element") == "cell_code":
            self.code_cell(node["cell_index"])
            return ""
        if isinstance(node, (nodes.target, nodes.comment, nodes.substitution_definition,
                             nodes.system_message, addnodes.index)) or \
                type(node).__name__ in ("index", "only", "toctree", "pending_xref_condition"):
            return ""
        if isinstance(node, nodes.compound) and "toctree-wrapper" in node.get("classes", []):
            return ""                 # the site's navigation: a notebook has its own
        if isinstance(node, nodes.paragraph):
            return self.inline(node)
        if isinstance(node, (nodes.bullet_list, nodes.enumerated_list)):
            return self.listing(node, level)
        if isinstance(node, nodes.definition_list):
            items = []
            for item in node.children:
                term = " ".join(self.inline(t) for t in item.children
                                if isinstance(t, nodes.term))
                body = "".join(self.blocks(d, level) for d in item.children
                               if isinstance(d, nodes.definition))
                items.append(f"**{term}**: {body}")
            return "\n\n".join(items)
        if isinstance(node, nodes.math_block):
            latex = node.astext().strip()
            number = self.number(node, "displaymath") if node.get("ids") else ""
            if number:
                latex += f" \\tag{{{number}}}"
            return f"$$\n{latex}\n$$"
        if isinstance(node, nodes.literal_block):
            language = node.get("language", "")
            language = "" if language in ("default", "none") else language
            return f"```{language}\n{node.astext()}\n```"
        if isinstance(node, nodes.table):
            return self.table(node)
        if isinstance(node, (nodes.figure,)):
            return self.figure(node, level)
        if isinstance(node, nodes.image):
            return f"![{_escape(node.get('alt', ''))}]({self.url(self._image_uri(node))})"
        if isinstance(node, nodes.raw):
            return node.astext() if node.get("format") == "html" else ""
        if isinstance(node, nodes.block_quote):
            return self.quote(self.blocks(node, level))
        if isinstance(node, nodes.transition):
            return "---"
        if not isinstance(node, nodes.Element):
            return _escape(node.astext())
        kind = type(node).__name__
        if "countertype" in node.attributes or kind in ("proof_node", "unenumerable_node"):
            return self.proof(node, level)
        if kind == "exercise_enumerable_node" or kind == "exercise_unenumerable_node":
            return self.exercise(node, level)
        if kind == "solution_node":
            return _details("Solution", self.blocks_without_title(node, level))
        if kind == "dropdown_main":            # sphinx-design's {dropdown}: folded here too
            title = next((c for c in node.children if type(c).__name__ == "dropdown_title"), None)
            head = self.summary(title) if title is not None else "Details"
            return _details(head, "\n\n".join(t for c in node.children if c is not title
                                               for t in [self.block(c, level)] if t))
        if isinstance(node, nodes.Admonition) and "dropdown" in node["classes"]:
            title = next((c for c in node.children if isinstance(c, nodes.title)), None)
            head = self.summary(title) if title is not None else "Details"
            return _details(head, self.blocks_without_title(node, level))
        if isinstance(node, nodes.Admonition):
            title = next((c for c in node.children if isinstance(c, nodes.title)), None)
            head = self.inline(title) if title else node.tagname.replace("_", " ").title()
            body = self.blocks_without_title(node, level)
            return self.quote(_headed(f"**{head}.**", body))
        if isinstance(node, nodes.rubric):
            return f"**{self.inline(node)}**"
        if isinstance(node, (nodes.caption, nodes.legend)):
            if isinstance(node, nodes.caption):
                return self.inline(node)
            return self.blocks(node, level)
        if isinstance(node, (nodes.footnote, nodes.citation)):
            label = node.children[0].astext() if node.children else ""
            body = "\n\n".join(t for c in node.children if not isinstance(c, nodes.label)
                               for t in [self.block(c, level)] if t)
            return f"[{label}] {body}"
        if isinstance(node, nodes.TextElement):
            return self.inline(node)
        return self.blocks(node, level)   # containers, compound, line blocks, ...

    def emit(self, child, level):
        """A child of a section (at depth ``level``): to the text, or to the cells."""
        if isinstance(child, nodes.section) and not _content(child):
            self.block(child, level + 1)
        elif isinstance(child, nodes.container) and child.get("nb_element") == "cell_code":
            self.code_cell(child["cell_index"])
            self.captions(child)
        elif self._holds_cell(child):
            for grandchild in child.children:
                self.emit(grandchild, level)
        else:
            text = self.block(child, level)
            if text:
                self.buffer.append(text)

    def captions(self, cell):
        """The captions of the figures a code cell draws, as the site numbers them, under it
        (the figure is the cell's output)."""
        for figure in cell.findall(nodes.figure):
            caption = next((c for c in figure.children if isinstance(c, nodes.caption)), None)
            if caption is not None:
                number = self.number(figure, "figure")
                label = f"Figure {number}: " if number else ""
                self.buffer.append(f"*{label}{self.inline(caption).strip()}*")

    @staticmethod
    def _holds_cell(node) -> bool:
        return any(isinstance(n, nodes.container) and n.get("nb_element") == "cell_code"
                   for n in node.findall(nodes.container))

    def heading(self, section, title, level) -> str:
        anchor = "#" + section["ids"][0] if section.get("ids") else ""
        number = self.secnumbers.get(anchor) or (self.secnumbers.get("") if level == 1 else None)
        prefix = ".".join(map(str, number)) + ". " if number else ""
        text = prefix + self.inline(title)
        if level == 1 and not self.title:
            self.title = text
        return "#" * min(level, 6) + " " + text

    def blocks_without_title(self, node, level) -> str:
        return "\n\n".join(t for c in node.children
                           if not isinstance(c, nodes.title) and "title" not in type(c).__name__
                           for t in [self.block(c, level)] if t)

    def quote(self, text: str) -> str:
        return "\n".join("> " + line if line else ">" for line in text.splitlines())

    def listing(self, node, level) -> str:
        ordered = isinstance(node, nodes.enumerated_list)
        start = node.get("start", 1)
        out = []
        for i, item in enumerate(node.children):
            marker = f"{start + i}. " if ordered else "- "
            body = self.blocks(item, level)
            pad = " " * len(marker)
            lines = body.splitlines() or [""]
            out.append(marker + lines[0] + "".join(
                "\n" + (pad + line if line else "") for line in lines[1:]))
        loose = any(len([c for c in item.children if not isinstance(c, nodes.target)]) > 1
                    for item in node.children)
        return ("\n\n" if loose else "\n").join(out)

    def table(self, node) -> str:
        rows = [[self.inline_block(e).replace("|", "\\|").replace("\n", " ") for e in row]
                for row in node.findall(nodes.row)]
        if not rows:
            return ""
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        head, body = rows[0], rows[1:]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        title = next((c for c in node.children if isinstance(c, nodes.title)), None)
        caption = ""
        if title is not None:
            number = self.number(node, "table")
            caption = f"*Table {number}: {self.inline(title)}*\n\n" if number else \
                f"*{self.inline(title)}*\n\n"
        return caption + "\n".join(lines)

    def inline_block(self, entry) -> str:
        return " ".join(self.block(c, 1) for c in entry.children)

    def _image_uri(self, node) -> str:
        """An image's place in the built site, relative to the page."""
        uri = node.get("uri", "")
        if urlsplit(uri).scheme:
            return uri
        images = getattr(self.app.builder, "images", {})
        name = images.get(uri)
        if name:
            return posixpath.relpath(f"_images/{name}", posixpath.dirname(self.page_uri))
        return uri

    def figure(self, node, level) -> str:
        parts = []
        for child in node.children:
            if isinstance(child, nodes.image):
                parts.append(self.block(child, level))
            elif isinstance(child, nodes.caption):
                number = self.number(node, "figure")
                label = f"Figure {number}: " if number else ""
                parts.append(f"*{label}{self.inline(child)}*")
            elif isinstance(child, nodes.legend):
                parts.append(self.blocks(child, level))
            else:
                # A glued or inline figure: its output is drawn by a code cell of this notebook.
                parts.append(self.block(child, level))
        return "\n\n".join(p for p in parts if p)

    def proof(self, node, level) -> str:
        kind = type(node).__name__
        title = next((c for c in node.children if isinstance(c, nodes.title)), None)
        name = self.inline(title).strip() if title is not None else ""
        if kind == "proof_node":
            inner = node.children[0] if len(node.children) == 1 and \
                isinstance(node.children[0], nodes.Admonition) else node
            body = self.blocks_without_title(inner, level)
            if body.startswith("Proof."):
                body = body[len("Proof."):].lstrip()
            last = body.rstrip().splitlines()[-1] if body.strip() else ""
            plain = last and not last.startswith(("$$", "- ", ">", "|", "```", "<")) and \
                not last.lstrip()[:1].isdigit() and not last.startswith(" ")
            return f"*Proof.* {body}" + (" ∎" if plain else "\n\n∎")
        body = self.blocks_without_title(node, level)
        realtype = node.get("realtype") or node.get("type") or kind.replace("_node", "")
        number = self.number(node, node.get("countertype", "")) if "countertype" in node else ""
        # The theme shows the title in parentheses after "Theorem 3.2"; the title node carries
        # "Theorem %s (name)" forms in some versions: keep only the name.
        for word in (realtype.title(), realtype):
            if name.startswith(word):
                name = name[len(word):].strip()
        name = name.replace(" %s", "").strip()
        if name.startswith("(") and name.endswith(")"):
            name = name[1:-1].strip()
        head = f"**{realtype.title()}{' ' + number if number else ''}"
        head += f" ({name}).**" if name else ".**"
        return _headed(head, body)

    def summary(self, title) -> str:
        """The text of a fold's title, without the marker the site draws beside it."""
        parts = [self.inline(c) if isinstance(c, nodes.Element) else _escape(c.astext())
                 for c in title.children
                 if not (isinstance(c, nodes.Element)
                         and "sd-summary-state-marker" in c.get("classes", []))
                 and not isinstance(c, nodes.raw)]
        return "".join(parts).strip()

    def exercise(self, node, level) -> str:
        number = self.number(node, "exercise")
        title = next((c for c in node.children if "title" in type(c).__name__), None)
        name = ""
        if title is not None:
            name = self.inline(title).strip()
            if name.lower().startswith("exercise"):
                name = name[len("exercise"):].strip()
            name = name.strip()
            if number and name.startswith(number):
                name = name[len(number):].strip()
            if name.startswith("(") and name.endswith(")"):
                name = name[1:-1].strip()
        head = f"**Exercise{' ' + number if number else ''}"
        head += f" ({name}).**" if name else ".**"
        return _headed(head, self.blocks_without_title(node, level))

    # -------------------------------------------------------------------- inline
    def inline(self, node) -> str:
        return "".join(self.span(c) for c in node.children)

    def span(self, node) -> str:  # noqa: C901
        if isinstance(node, nodes.Text):
            return _escape(str(node))
        if isinstance(node, nodes.math):
            return f"${node.astext().strip()}$"
        if isinstance(node, nodes.literal):
            return _code_span(node.astext())
        if isinstance(node, nodes.emphasis):
            inner = self.inline(node)
            return f"*{inner}*" if inner.strip() else inner
        if isinstance(node, nodes.strong):
            inner = self.inline(node)
            return f"**{inner}**" if inner.strip() else inner
        if isinstance(node, nodes.reference):
            text = self.inline(node)
            uri = node.get("refuri")
            if uri is None and node.get("refid"):
                uri = "#" + node["refid"]
            if not uri:
                return text
            return f"[{text}]({self.url(uri)})"
        if isinstance(node, (nodes.target, addnodes.index, nodes.substitution_definition,
                             nodes.comment, nodes.system_message)):
            return ""
        if isinstance(node, nodes.footnote_reference):
            return f"[{node.astext()}]"
        if isinstance(node, nodes.subscript):
            return f"<sub>{self.inline(node)}</sub>"
        if isinstance(node, nodes.superscript):
            return f"<sup>{self.inline(node)}</sup>"
        if isinstance(node, nodes.raw):
            return node.astext() if node.get("format") == "html" else ""
        if isinstance(node, nodes.image):
            return f"![{_escape(node.get('alt', ''))}]({self.url(self._image_uri(node))})"
        if isinstance(node, nodes.Element) and not isinstance(node, nodes.TextElement) and \
                any(isinstance(c, nodes.Body) for c in node.children):
            return self.blocks(node, 1)
        if isinstance(node, nodes.Element):
            return self.inline(node)
        return _escape(node.astext())


# ------------------------------------------------------------------------------ writing
def notebook_pages(app) -> list[str]:
    """The pages that are notebooks (their front matter names a kernel), in the book's order."""
    return [d for d in app.env.all_docs if "kernelspec" in app.env.metadata.get(d, {})]


def student_notebook(app, docname: str, site: str | None, requirement: str | None,
                     wheel: str = "ioattn-<version>.whl"):
    """The student notebook of page ``docname``."""
    executed_path = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    executed = nbformat.read(executed_path, as_version=4)
    doctree = app.env.get_and_resolve_doctree(docname, app.builder)
    conv = Converter(app, docname, executed, site)
    cells = conv.run(doctree)
    page = (site + app.builder.get_target_uri(docname)) if site else None
    book = app.config.html_title or app.config.project
    where = f"[{_escape(book)}]({page})" if page else f"*{_escape(book)}*"
    intro = (f"This notebook is a page of {where}, with its code ready to run: run the cells "
             "in order. The first one installs `ioattn` where it is missing.")
    at = 1 if cells and cells[0].cell_type == "markdown" and cells[0].source.startswith("#") else 0
    extras = extras_of(c.source for c in cells if c.cell_type == "code")
    setup = nbformat.v4.new_code_cell(setup_source(requirement, wheel, extras),
                                      metadata={"tags": [SETUP_TAG]})
    cells[at:at] = [nbformat.v4.new_markdown_cell(intro), setup]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata.kernelspec = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata.language_info = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    nbformat.validate(nb)
    return nb


def _can_build_here() -> bool:
    """Whether this environment holds every build requirement of pyproject.toml, in a version
    it accepts (``setuptools>=77``, for the licence as an SPDX expression)."""
    try:
        import tomllib
        from importlib.metadata import PackageNotFoundError, version

        from packaging.requirements import Requirement
    except ImportError:                   # Python 3.10 has no tomllib: let pip decide
        return False
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for line in tomllib.loads(text)["build-system"]["requires"]:
        need = Requirement(line)
        try:
            if not need.specifier.contains(version(need.name), prereleases=True):
                return False
        except PackageNotFoundError:
            return False
    return True


def build_wheel(folder: Path) -> Path:
    """``pip wheel --no-deps`` of the package's sources (copied, so the working tree stays
    clean) into ``folder``; the wheel."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("ioattn-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(ROOT / name, src / name)
        shutil.copytree(ROOT / "ioattn", src / "ioattn",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # Offline with the environment's setuptools when it is one pyproject.toml's
        # build-system accepts; else pip fetches the build backend pyproject.toml names.
        isolation = ["--no-build-isolation"] if _can_build_here() else []
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q",
               "-w", str(folder), str(src)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    (wheel,) = folder.glob("ioattn-*.whl")
    return wheel


def practice_notebooks(folder: Path, requirement: str | None = None,
                       wheel: str = "ioattn-<version>.whl") -> list[Path]:
    """Each assignment's student notebook for the student id ``practice``, with the set-up
    cell of the student notebooks as its first code cell (the grader, where ioattn is
    installed, finds it a no-op)."""
    from ioattn.teach import assignments, variant
    from ioattn.teach.build import build, personalize

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in assignments():
            built = build(name, tmp)
            path = personalize(built, variant(name, "practice"), tmp)
            nb = nbformat.read(path, as_version=4)
            code = [c.source for c in nb.cells if c.cell_type == "code"]
            setup = nbformat.v4.new_code_cell(
                setup_source(requirement, wheel, extras_of(code)),
                metadata={"tags": [SETUP_TAG]})
            first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"),
                         len(nb.cells))
            nb.cells.insert(first, setup)
            for i, cell in enumerate(nb.cells):
                cell.id = f"cell-{i}"
            nbformat.validate(nb)
            target = folder / "practice" / f"{name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            out.append(target)
    return out


README = """# The student notebooks of *{project}*

Generated by the book's build{commit}: each page of the book as a notebook
(`book/`), and each classroom assignment's practice notebook (`practice/`). The launch buttons
of the book's pages open these notebooks on Colab and Binder.
"""


def site_url(config, repo) -> str | None:
    """The published site's address, ending with ``/``, that the notebooks' links lead to:
    ``IOATTN_SITE_URL``, else the book's ``html_baseurl`` (``html: baseurl:`` in
    ``_config.yml``), else GitHub Pages' address of the repository the build runs in; None
    when none is known (a local build: the links are then relative to the notebook's place in
    the site's ``notebooks/`` folder)."""
    import os

    given = (os.environ.get("IOATTN_SITE_URL") or getattr(config, "html_baseurl", "") or "")
    if given.strip():
        return given.strip().rstrip("/") + "/"
    return repo.site if repo else None


def write_notebooks(app, exception):
    """``build-finished``: write the notebooks folder of the site (see the module)."""
    if exception is not None or app.builder.format != "html":
        return
    from repository import from_environment

    start = time.perf_counter()
    repo = from_environment()
    folder = Path(app.outdir) / FOLDER
    if folder.exists():
        shutil.rmtree(folder)
    wheel = build_wheel(folder)
    site = site_url(app.config, repo)
    requirement = repo.requirement if repo else None
    pages = sorted(notebook_pages(app))
    for docname in pages:
        nb = student_notebook(app, docname, site, requirement, wheel.name)
        target = folder / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
    practice_notebooks(folder, requirement, wheel.name)
    # Binder: what every notebook needs (the assignments' pages and notebooks, the teach extra).
    binder = with_extras(requirement if requirement else wheel.name, ["teach"])
    (folder / "requirements.txt").write_text(f"{binder}\nipywidgets>=8\n", encoding="utf-8")
    commit = f" from {repo.url}/commit/{repo.sha}" if repo and repo.sha else ""
    (folder / "README.md").write_text(README.format(project=app.config.html_title, commit=commit),
                                      encoding="utf-8")
    logger.info(f"student notebooks: {len(pages)} pages, the practice notebooks and {wheel.name} "
                f"in {FOLDER}/ ({time.perf_counter() - start:.1f} s)")


def _download_button(app, pagename, templatename, context, doctree):
    """The page's download menu offers its student notebook."""
    if "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons":
            continue
        buttons = [b for b in group["buttons"] if b.get("label") != "download-notebook-button"]
        buttons.insert(0, {
            "type": "link",
            "url": context["pathto"](f"{FOLDER}/{pagename}.ipynb", 1),
            "text": ".ipynb",
            "icon": "fas fa-code",
            "tooltip": "Download this page as a notebook",
            "label": "download-notebook-button",
        })
        group["buttons"] = buttons


def practice_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{practice-notebook}`matmul``` : a link to assignment ``matmul``'s practice notebook."""
    env = inliner.document.settings.env
    assignment = text.strip()
    from ioattn.teach import assignments

    if assignment not in assignments():
        msg = inliner.reporter.error(f"no assignment {assignment!r}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    here = posixpath.dirname(env.app.builder.get_target_uri(env.docname))
    uri = posixpath.relpath(f"{FOLDER}/practice/{assignment}.ipynb", here)
    node = nodes.reference(rawtext, "", refuri=uri, classes=["practice-notebook"])
    node += nodes.literal(text=f"{assignment}.ipynb")
    return [node], []


def setup(app):
    app.add_role("practice-notebook", practice_role)
    app.connect("html-page-context", _download_button, priority=520)
    app.connect("build-finished", write_notebooks)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}


# ------------------------------------------------------------------------------ publishing
def publish(folder, branch: str, repo=ROOT, message: str | None = None) -> str:
    """Commit the contents of ``folder`` (the site's notebooks) as the whole tree of branch
    ``branch`` of the git repository ``repo``: a commit of its own, without a parent, made
    with a temporary index, so the working tree and the current branch are not touched. The
    commit's SHA."""
    import os

    folder = Path(folder).resolve()
    if not (folder / "README.md").is_file():
        raise FileNotFoundError(f"{folder} holds no notebooks: build the book first")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_WORK_TREE": str(folder)}
        env.setdefault("GIT_AUTHOR_NAME", "ioattn book")
        env.setdefault("GIT_AUTHOR_EMAIL", "book@ioattn.invalid")
        env.setdefault("GIT_COMMITTER_NAME", env["GIT_AUTHOR_NAME"])
        env.setdefault("GIT_COMMITTER_EMAIL", env["GIT_AUTHOR_EMAIL"])

        def git(*args):
            return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                                  capture_output=True, text=True).stdout.strip()

        git("add", "--all", "--force", ".")
        tree = git("write-tree")
        sha = git("commit-tree", tree, "-m", message or "The book's student notebooks")
        git("update-ref", f"refs/heads/{branch}", sha)
    return sha


def main(argv=None) -> int:
    """``python book/_ext/notebooks.py publish [FOLDER] [--branch B] [--push REMOTE]``."""
    import argparse
    import os

    parser = argparse.ArgumentParser(description=publish.__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("publish", help="commit the site's notebooks folder to a branch")
    p.add_argument("folder", nargs="?", default=str(ROOT / "_build/html" / FOLDER))
    p.add_argument("--branch", default=os.environ.get("IOATTN_NOTEBOOKS_BRANCH", "notebooks"))
    p.add_argument("--push", metavar="REMOTE", help="then force-push the branch to REMOTE")
    args = parser.parse_args(argv)
    sha = publish(args.folder, args.branch)
    print(f"{args.branch} is {sha}")
    if args.push:
        subprocess.run(["git", "-C", str(ROOT), "push", "--force", args.push,
                        f"refs/heads/{args.branch}:refs/heads/{args.branch}"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
