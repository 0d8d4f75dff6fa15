"""The student notebooks written by the build, and the buttons that lead to them.

Without the ``built`` fixture: the repository read from the environment, the theme's options it
sets, the code kept for students, the set-up cell, publishing to a branch, and the buttons of a
tiny Sphinx project. With it (marked ``book``): every generated notebook has no raw MyST, its
solutions folded, the glued values of its page, links that lead to the site, and no note about
the build. That every notebook runs, in a fresh venv where its set-up cell installs ioattn, is
tests/test_notebooks_install.py.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import nbformat
import pytest

from .conftest import ROOT


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"book/_ext/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


repository = _load("repository")
notebooks = _load("notebooks")

SHA = "0123456789abcdef0123456789abcdef01234567"
#: Raw MyST that must not reach a student notebook.
RAW_MYST = [
    re.compile(r"\{(prf:|cite|glue|ref\}|numref\}|eq\}|doc\}|term\}|download\}|numref|"
               r"solution|exercise|margin|figure|admonition|note\}|code-cell|math\})"),
    re.compile(r"^\s*(:::|```)\s*\{", re.M),
    re.compile(r"^\s*\([\w:.-]+\)=\s*$", re.M),
    re.compile(r"^\s*:(label|class|name|tags|width|align|nonumber)?:", re.M),
]


def _pages() -> list[str]:
    """The book's pages that are notebooks (their front matter names a kernel)."""
    out = []
    for md in sorted((ROOT / "book").rglob("*.md")):
        if {"_ext", "_static"} & set(md.relative_to(ROOT).parts):
            continue
        text = md.read_text(encoding="utf-8")
        if text.startswith("---\n") and "kernelspec:" in text[: text.find("\n---", 4)]:
            out.append(md.relative_to(ROOT).with_suffix("").as_posix())
    return out


# -------------------------------------------------------------------- the repository
def test_no_repository_means_no_buttons():
    assert repository.from_environment({}) is None
    given = {"repository_url": "https://github.com/executablebooks/jupyter-book",
             "repository_branch": "master", "use_repository_button": True,
             "use_issues_button": True,
             "launch_buttons": {"binderhub_url": "https://mybinder.org",
                                "colab_url": "https://colab.research.google.com"}}
    options = repository.theme_options(given, None)
    assert "repository_url" not in options and options["launch_buttons"] == {}
    assert options["use_repository_button"] is False and options["use_issues_button"] is False


def test_repository_is_the_one_the_build_runs_in():
    repo = repository.from_environment({"GITHUB_REPOSITORY": "Ann/fork", "GITHUB_SHA": SHA})
    assert repo.url == "https://github.com/Ann/fork"
    assert repo.requirement == f"ioattn @ git+https://github.com/Ann/fork.git@{SHA}"
    assert repo.site == "https://ann.github.io/fork/"
    options = repository.theme_options({"launch_buttons": {"colab_url": "c"}}, repo)
    assert options["repository_url"] == repo.url and options["repository_branch"] == "notebooks"
    assert options["launch_buttons"] == {"colab_url": "c", "thebe": False}
    # An explicit repository wins, and the commit of another one is not taken for its own.
    explicit = repository.from_environment({"IOATTN_REPOSITORY": "me/book",
                                            "GITHUB_REPOSITORY": "Ann/fork", "GITHUB_SHA": SHA,
                                            "IOATTN_SITE_URL": "https://book.example.org"})
    assert explicit.slug == "me/book" and explicit.sha is None
    assert explicit.site == "https://book.example.org/"
    assert repository.pages_url("me/me.github.io") == "https://me.github.io/"
    with pytest.raises(ValueError):
        repository.from_environment({"GITHUB_REPOSITORY": "not a repository"})


_TINY_CONF = """
extensions = ["myst_nb", "repository"]
html_theme = "sphinx_book_theme"
html_theme_options = {"launch_buttons": {"binderhub_url": "https://mybinder.org",
                                         "colab_url": "https://colab.research.google.com"},
                      "repository_url": "https://github.com/executablebooks/jupyter-book",
                      "use_repository_button": True, "use_issues_button": True}
nb_execution_mode = "off"
"""
_TINY_PAGE = """---
jupytext: {text_representation: {extension: .md, format_name: myst}}
kernelspec: {name: python3, display_name: Python 3, language: python}
---
# A page

```{code-cell} ipython3
1 + 1
```
"""


def _tiny_build(tmp_path, environ) -> str:
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'book/_ext')!r})\n"
                                 + _TINY_CONF)
    (src / "index.md").write_text("# Tiny\n\n```{toctree}\nbook/page\n```\n")
    (src / "book/page.md").write_text(_TINY_PAGE)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "IOATTN_"))} | environ
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                           str(src), str(tmp_path / "html")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return html.unescape((tmp_path / "html/book/page.html").read_text(encoding="utf-8"))


def test_tiny_project_local_build_has_no_repository_buttons(tmp_path):
    page = _tiny_build(tmp_path, {})
    for gone in ("colab.research.google.com", "mybinder.org", "github.com", "/issues/new"):
        assert gone not in page, gone


def test_tiny_project_built_in_a_repository_launches_it(tmp_path):
    page = _tiny_build(tmp_path, {"GITHUB_REPOSITORY": "ann/fork", "GITHUB_SHA": SHA})
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert "https://colab.research.google.com/github/ann/fork/blob/notebooks/book/page.ipynb" \
        in hrefs, hrefs
    assert "https://mybinder.org/v2/gh/ann/fork/notebooks?urlpath=tree/book/page.ipynb" \
        in hrefs, hrefs
    assert "https://github.com/ann/fork" in hrefs
    assert any(h.startswith("https://github.com/ann/fork/issues/new") for h in hrefs)
    assert "executablebooks" not in page


_TINY_BOOK_CONF = """
extensions = ["myst_nb", "sphinx_proof", "sphinx_exercise", "sphinxcontrib.bibtex",
              "repository", "notebooks"]
html_theme = "sphinx_book_theme"
project = "Tiny"
numfig = True
math_numfig = True
bibtex_bibfiles = ["refs.bib"]
bibtex_reference_style = "label"
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
nb_execution_mode = "force"
"""
_TINY_BIB = """@article{sy24, author = {Saha, B. and Ye, C.},
  title = {The I/O complexity of attention}, journal = {ICML}, year = {2024}}
"""
_TINY_CHAPTER = """---
jupytext: {text_representation: {extension: .md, format_name: myst}}
kernelspec: {name: python3, display_name: Python 3, language: python}
---
(ch-tiny)=
# Tiny chapter

```{code-cell} ipython3
:tags: [remove-cell]

from myst_nb import glue

sizes = [3, 4]
assert sum(sizes) == 7
glue("total", sum(sizes), display=False)
glue("ratio", 2 / 3, display=False)
```

(sec-tiny-first)=
## First section

The total is {glue:text}`total` and the ratio {glue:text}`ratio:.3f`, as {cite}`sy24` show.

:::{prf:theorem} Small things
:label: thm-tiny

For all $M$,

$$
Q \\ge N
$$ (eq-tiny)
:::

:::{prf:proof}
Obvious from {eq}`eq-tiny`.
:::

By {prf:ref}`thm-tiny` and {ref}`sec-tiny-first`, the sizes are:

```{code-cell} ipython3
print(sizes)
```

:::{exercise}
:label: ex-tiny

Prove {prf:ref}`thm-tiny` again.
:::

:::{solution} ex-tiny
:class: dropdown

It is the same proof.
:::

```{bibliography}
```
"""


def _tiny_book(tmp_path, environ, conf="") -> Path:
    """The tiny book built by Sphinx in the environment ``environ`` (without the build's own
    ``GITHUB_*`` and ``IOATTN_*`` variables), ``conf`` added to its configuration; its HTML."""
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'book/_ext')!r})\n"
                                 + _TINY_BOOK_CONF + conf)
    (src / "refs.bib").write_text(_TINY_BIB)
    (src / "index.md").write_text("# Tiny\n\n```{toctree}\n:numbered:\nbook/page\n```\n")
    (src / "book/page.md").write_text(_TINY_CHAPTER)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "IOATTN_"))} | environ
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                           str(src), str(tmp_path / "html")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp_path / "html"


def _links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_tiny_book_student_notebook(tmp_path):
    """A page with every construct the generator resolves, built by Sphinx: the student
    notebook has its numbers, links and glued values, and no raw MyST."""
    out = _tiny_book(tmp_path, {"GITHUB_REPOSITORY": "ann/fork", "GITHUB_SHA": SHA})
    nb = nbformat.read(out / "notebooks/book/page.ipynb", as_version=4)
    text = _markdown(nb)
    print(text)
    for pattern in RAW_MYST:
        assert not pattern.search(text), pattern.search(text).group(0)
    site = "https://ann.github.io/fork/"
    assert text.startswith("# 1. Tiny chapter")
    assert "## 1.1. First section" in text
    assert "The total is 7 and the ratio 0.667" in text
    assert f"[Theorem 1.1]({site}book/page.html#thm-tiny)" in text
    assert "**Theorem 1.1 (Small things).** For all $M$," in text
    assert "\\tag{1.1}" in text and "*Proof.* Obvious from" in text
    assert f"({site}book/page.html#equation-eq-tiny)" in text
    assert f"({site}book/page.html#sec-tiny-first)" in text
    assert "[SY24]" in text.replace("\\", "") and f"({site}book/page.html#id" in text
    assert "**Exercise 1.1.** Prove" in text
    assert "<details>\n<summary>Solution</summary>\n\nIt is the same proof.\n\n</details>" \
        in text
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert len(code) == 3 and SHA in code[0]
    page = html.unescape((out / "book/page.html").read_text(encoding="utf-8"))
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert "../notebooks/book/page.ipynb" in hrefs, "no download of the student notebook"
    assert code[1] == "sizes = [3, 4]" and code[2] == "print(sizes)"
    links = [t for t in _links(text) if not t.startswith("https://ann.github.io/fork/")]
    assert links == [], f"links outside the site: {links}"
    # The practice notebooks have the same set-up cell, first of their code cells.
    for practice in sorted((out / "notebooks/practice").glob("*.ipynb")):
        first = next(c for c in nbformat.read(practice, as_version=4).cells
                     if c.cell_type == "code")
        assert first.metadata["tags"] == ["setup"], practice.name
        assert first.source == notebooks.setup_source(
            f"ioattn @ git+https://github.com/ann/fork.git@{SHA}",
            next((out / "notebooks").glob("ioattn-*.whl")).name), practice.name
    requirements = (out / "notebooks/requirements.txt").read_text().splitlines()
    assert requirements[0] == f"ioattn[teach] @ git+https://github.com/ann/fork.git@{SHA}"


def test_tiny_book_links_without_a_repository(tmp_path):
    """A local build (no repository): every link of the notebook is relative and leads, from
    the notebook's place in the site's notebooks/ folder, to a page of the site and an anchor
    on it; the set-up cell names no repository."""
    out = _tiny_book(tmp_path / "local", {})
    nb = nbformat.read(out / "notebooks/book/page.ipynb", as_version=4)
    links = _links(_markdown(nb))
    assert len(links) >= 5 and "git+" not in nb.cells[2].source
    for target in links:
        assert not urllib.parse.urlsplit(target).scheme, target
        path, _, anchor = os.path.normpath(os.path.join("notebooks/book", target)).partition("#")
        assert (out / path).is_file(), target
        assert not anchor or f'id="{anchor}"' in (out / path).read_text(encoding="utf-8"), \
            target
    assert "../../book/page.html#thm-tiny" in links


def test_the_site_address_comes_from_the_environment_the_config_or_the_repository(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.delenv("IOATTN_SITE_URL", raising=False)
    repo = repository.from_environment({"GITHUB_REPOSITORY": "Ann/fork"})
    none, configured = SimpleNamespace(html_baseurl=""), \
        SimpleNamespace(html_baseurl="https://book.example.org/ioattn")
    assert notebooks.site_url(none, None) is None
    assert notebooks.site_url(none, repo) == "https://ann.github.io/fork/"
    assert notebooks.site_url(configured, repo) == "https://book.example.org/ioattn/"
    monkeypatch.setenv("IOATTN_SITE_URL", "https://elsewhere.example.org")
    assert notebooks.site_url(configured, None) == "https://elsewhere.example.org/"


# -------------------------------------------------------------------- the generator's parts
def test_students_keep_the_code_they_need():
    cells = [
        ("from myst_nb import glue\nimport numpy as np\nsizes = [1, 2]", ["remove-cell"]),
        ("assert sizes == [1, 2]\nglue('n', len(sizes), display=False)", ["remove-cell"]),
        ("unused = 3  # only for the page\nassert unused", ["remove-cell"]),
        ("total = np.sum(sizes)\nassert total == 3\nglue('total', total, display=False)", []),
        ("# Checks the page\nglue('x', 1, display=False)", ["remove-input"]),
        ("for s in sizes:\n    glue(f'size_{s}', s, display=False)\nfor s in sizes:\n"
         "    print(s)\n    glue('last', s)", ["hide-input"]),
    ]
    assert notebooks.student_code(cells) == [
        "import numpy as np\nsizes = [1, 2]", None, None,
        "total = np.sum(sizes)\nassert total == 3", None, "for s in sizes:\n    print(s)"]


WHEEL = "ioattn-0.1.0-py3-none-any.whl"


class _Pip:
    """A stand-in for ``subprocess.run`` of pip: records the command, answers ``returncode``
    with ``stderr``; after a success, ioattn is found."""

    def __init__(self, returncode=0, stderr=""):
        self.returncode, self.stderr, self.commands, self.installed = returncode, stderr, [], False

    def __call__(self, cmd, **kwargs):
        assert kwargs.get("capture_output") and kwargs.get("text"), "pip's output not captured"
        self.commands.append(cmd)
        self.installed = self.returncode == 0
        return subprocess.CompletedProcess(cmd, self.returncode, "", self.stderr)


def _run_setup(monkeypatch, source, pip, missing=("ioattn",)):
    """Run set-up cell ``source`` as if ``missing`` were not installed, pip being ``pip``; the
    exception it raised, or None."""
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name, *args):
        if name in missing and not pip.installed:
            return None
        return real(name, *args) if name not in missing else object()

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(subprocess, "run", pip)
    try:
        exec(compile(source, "setup", "exec"), {})       # noqa: S102 - the cell itself
    except Exception as exc:                             # noqa: BLE001 - returned to the test
        return exc
    return None


def test_setup_cell_is_a_no_op_where_ioattn_is_installed(monkeypatch):
    requirement = f"ioattn @ git+https://github.com/ann/fork.git@{SHA}"
    for source in (notebooks.setup_source(requirement, WHEEL),
                   notebooks.setup_source(None, WHEEL, ["teach"])):
        pip = _Pip()
        monkeypatch.setattr(subprocess, "run", pip)
        exec(compile(source, "setup", "exec"), {})       # noqa: S102 - the cell itself
        assert pip.commands == []
    # The names it uses stay inside its function.
    scope: dict = {}
    exec(compile(source, "setup", "exec"), scope)        # noqa: S102
    assert {k for k in scope if not k.startswith("__")} == {"_setup_ioattn"}


def test_setup_cell_prefers_the_wheel_then_the_commit(monkeypatch, tmp_path, capsys):
    requirement = f"ioattn @ git+https://github.com/ann/fork.git@{SHA}"
    source = notebooks.setup_source(requirement, WHEEL, ["teach"])
    assert "ioattn[teach] @ git+https://github.com/ann/fork.git@" + SHA in source
    site = tmp_path / "notebooks"
    (site / "book/assignments").mkdir(parents=True)
    monkeypatch.chdir(site / "book/assignments")
    pip = _Pip()
    assert _run_setup(monkeypatch, source, pip, missing=("ioattn", "jupytext")) is None
    assert pip.commands[0][-1] == "ioattn[teach] @ git+https://github.com/ann/fork.git@" + SHA
    assert pip.commands[0][1:4] == ["-m", "pip", "install"]
    (site / WHEEL).write_bytes(b"")                       # the site's wheel, two folders up
    pip = _Pip()
    assert _run_setup(monkeypatch, source, pip) is None
    assert pip.commands[0][-1] == f"{site / WHEEL}[teach]"
    assert "ioattn is installed." in capsys.readouterr().out


def test_setup_cell_failures_say_what_to_do_in_a_sentence(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    requirement = f"ioattn @ git+https://github.com/ann/fork.git@{SHA}"
    # No wheel, no repository: say where the wheel is, without running pip.
    pip = _Pip()
    exc = _run_setup(monkeypatch, notebooks.setup_source(None, WHEEL), pip)
    assert pip.commands == [] and type(exc).__name__ == "SetupError"
    assert str(exc) == (f"ioattn is not installed: put the wheel {WHEEL} from the notebooks/ "
                        "folder of the book's site beside this notebook and run this cell again.")
    # IPython shows the message alone (no traceback).
    assert exc._render_traceback_() == [f"SetupError: {exc}"]
    # The repository cannot be reached: pip's last error line, and where the wheel is.
    pip = _Pip(1, "Collecting ioattn@ git+https://github.com/ann/fork.git\n"
                  "  Cloning https://github.com/ann/fork.git\n"
                  "  fatal: unable to access 'https://github.com/ann/fork.git/': Could not "
                  "resolve host: github.com\n"
                  "  error: subprocess-exited-with-error\n"
                  "ERROR: Failed to build 'git+https://github.com/ann/fork.git' when git clone\n")
    exc = _run_setup(monkeypatch, notebooks.setup_source(requirement, WHEEL), pip)
    assert str(exc) == ("pip could not install ioattn (ERROR: Failed to build "
                        "'git+https://github.com/ann/fork.git' when git clone). No network? Put "
                        f"the wheel {WHEEL} from the notebooks/ folder of the book's site beside "
                        "this notebook and run this cell again.")
    # A wheel but no package index: its dependencies are missing.
    (tmp_path / WHEEL).write_bytes(b"")
    pip = _Pip(1, "Processing ./ioattn-0.1.0-py3-none-any.whl\n"
                  "ERROR: Could not find a version that satisfies the requirement numpy>=1.24 "
                  "(from ioattn) (from versions: none)\n"
                  "\x1b[31mERROR: No matching distribution found for numpy>=1.24\x1b[0m\n"
                  "\x1b[0m\n")                              # colours, if pip keeps them
    exc = _run_setup(monkeypatch, notebooks.setup_source(requirement, WHEEL), pip)
    assert str(exc) == ("pip could not install ioattn (ERROR: No matching distribution found for "
                        "numpy>=1.24). Its dependencies come from the package index: connect to "
                        "the network, or install them with pip (numpy matplotlib networkx tqdm "
                        "numba), and run this cell again.")
    # pip itself is missing (a venv made without it).
    pip = _Pip(1, "/venv/bin/python: No module named pip\n")
    exc = _run_setup(monkeypatch, notebooks.setup_source(requirement, WHEEL), pip)
    assert str(exc).startswith("pip could not install ioattn (/venv/bin/python: No module "
                               "named pip).")


def test_extras_follow_the_code():
    assert notebooks.extras_of(["from ioattn.teach import check", "# ioattn assign x"]) == []
    assert notebooks.extras_of(["from ioattn.teach.build import build"]) == ["teach"]
    assert notebooks.extras_of(['subprocess.run([sys.executable, "-m", "ioattn", "grade"])']) \
        == ["teach"]
    assert notebooks.with_extras("ioattn @ git+https://x/y.git@1", ["teach"]) == \
        "ioattn[teach] @ git+https://x/y.git@1"
    assert notebooks.with_extras(WHEEL, ["teach"]) == WHEEL + "[teach]"
    assert notebooks.with_extras(WHEEL, []) == WHEEL


def test_publish_makes_the_folder_a_branch(tmp_path):
    repo, folder = tmp_path / "repo", tmp_path / "site/notebooks"
    (folder / "book").mkdir(parents=True)
    (folder / "README.md").write_text("notebooks\n")
    (folder / "book/page.ipynb").write_text("{}\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tracked.txt").write_text("main\n")
    sha = notebooks.publish(folder, "notebooks", repo=repo)
    files = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", sha],
                           capture_output=True, text=True, check=True).stdout.split()
    assert files == ["README.md", "book/page.ipynb"]
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "notebooks"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert head == sha
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    assert status.strip() == "?? tracked.txt", "the working tree was touched"


# -------------------------------------------------------------------- the built notebooks
def _notebook(built: Path, page: str):
    path = built / notebooks.FOLDER / f"{page}.ipynb"
    assert path.is_file(), f"{page} has no student notebook at {path}"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


def _markdown(nb) -> str:
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.book
def test_every_notebook_page_has_a_student_notebook_without_raw_myst(built):
    pages = _pages()
    assert len(pages) >= 14 and "book/flash" in pages and "book/assignments/guide" in pages
    for page in pages:
        nb = _notebook(built, page)
        text = _markdown(nb)
        for pattern in RAW_MYST:
            hit = pattern.search(text)
            assert not hit, f"{page}: raw MyST {hit.group(0)!r} in\n" \
                f"{text[max(0, hit.start() - 200):hit.end() + 200]}"
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        assert code[0] == nb.cells[[c.cell_type for c in nb.cells].index("code")].source
        setup = nb.cells[[c.cell_type for c in nb.cells].index("code")]
        assert setup.metadata.get("tags") == [notebooks.SETUP_TAG], page
        assert "def _setup_ioattn():" in code[0] and "pip" in code[0], page
        for source in code:
            assert "glue(" not in source and "myst_nb" not in source, (page, source)
        assert nb.cells[0].source.startswith("# "), f"{page}: no title first"
        for cell in nb.cells:
            assert not cell.get("outputs"), f"{page}: a cell with outputs"


@pytest.mark.book
def test_theorems_exercises_and_solutions_read_as_on_the_site(built):
    for page in _pages():
        source = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        text = _markdown(_notebook(built, page))
        site = html.unescape((built / f"{page}.html").read_text(encoding="utf-8"))
        solutions = len(re.findall(r"^:::+\{solution\}", source, re.M))
        assert text.count("<summary>Solution</summary>") == solutions, page
        assert text.count("<details>") == text.count("</details>") >= solutions, page
        # the answers of the checks of understanding stay folded, as on the site
        answers = len(re.findall(r"^:::+\{dropdown\} Answer\s*$", source, re.M))
        assert text.count("<summary>Answer</summary>") == answers, page
        assert "sd-octicon" not in text, page
        exercises = len(re.findall(r"^:::+\{exercise\}", source, re.M))
        assert len(re.findall(r"^\*\*Exercise [\d.]+[ .]", text, re.M)) == exercises, page
        # Each numbered statement heads a paragraph, with the number the site gives it.
        for kind in ("theorem", "lemma", "definition", "corollary", "proposition", "algorithm"):
            shown = re.findall(rf'<span class="caption-number">{kind.title()}\s*([\d.]*)\s*'
                               "</span>", site)
            here = re.findall(rf"^\*\*{kind.title()}(?: ([\d.]+))?[ .]", text, re.M)
            assert sorted(here) == sorted(shown), (page, kind, here, shown)
            count = len(re.findall(rf"^:::+\{{prf:{kind}\}}", source, re.M))
            assert len(here) == count, (page, kind)
        proofs = len(re.findall(r"^:::+\{prf:proof\}", source, re.M))
        assert text.count("*Proof.*") == proofs, page
        # Every numbered figure of the page is captioned under the cell that draws it.
        figures = re.findall(r'<span class="caption-number">Fig\. ([\d.]+) </span>', site)
        assert sorted(re.findall(r"^\*Figure ([\d.]+):", text, re.M)) == sorted(figures), page


@pytest.mark.book
def test_glued_values_and_references_are_filled_in(built):
    checked = 0
    for page in _pages():
        text = _markdown(_notebook(built, page))
        plain = html.unescape(text.replace("\\", ""))
        site = (built / f"{page}.html").read_text(encoding="utf-8")
        for value in re.findall(r'<span class="pasted-text">([^<]*)</span>', site):
            assert html.unescape(value).replace("\\", "") in plain, (page, value)
            checked += 1
        for citation in re.findall(r"\{cite(?::p|:t)?\}`([^`]+)`", (ROOT / f"{page}.md")
                                   .read_text(encoding="utf-8")):
            assert "bibliography.html#" in text, (page, citation)
    assert checked > 200, checked


@pytest.mark.book
def test_links_lead_to_the_built_site(built):
    """In a build with no site address the links are relative to the notebook's place in the
    site; every one names a page that exists, and an anchor on it."""
    repo = repository.from_environment()
    for page in _pages():
        text = _markdown(_notebook(built, page))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if repo is not None:
                if target.startswith(repo.site):
                    path = target[len(repo.site):]
                else:
                    assert target.startswith(("https://", "http://")), (page, target)
                    continue
            elif urllib.parse.urlsplit(target).scheme:
                continue
            else:
                path = os.path.normpath(os.path.join(
                    os.path.dirname(f"{notebooks.FOLDER}/{page}"), target))
            file, _, anchor = path.partition("#")
            where = built / urllib.parse.unquote(file)
            assert where.is_file(), (page, target)
            if anchor and where.suffix == ".html":
                assert f'id="{anchor}"' in where.read_text(encoding="utf-8"), (page, target)


@pytest.mark.book
def test_practice_notebooks_hold_no_answers(built):
    from ioattn.teach import assignments

    keys = {p.stem: p.read_text(encoding="utf-8")
            for p in (ROOT / "ioattn/teach/keys").glob("*.py") if p.stem != "__init__"}
    for name in assignments():
        path = built / notebooks.FOLDER / "practice" / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata["ioattn"] == {"assignment": name, "course": "",
                                         "student": "practice"}
        text = json.dumps([c.source for c in nb.cells])
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, name
        for key in keys.values():
            for fn in re.findall(r"^def (\w+)\(", key, re.M):
                assert f"def {fn}(" not in text, (name, fn)
        page = (built / f"book/assignments/{name}.html").read_text(encoding="utf-8")
        assert f'href="../../notebooks/practice/{name}.ipynb"' in page, \
            f"the {name} assignment page does not link its practice notebook"


@pytest.mark.book
def test_site_holds_the_wheel_and_binder_requirements(built):
    folder = built / notebooks.FOLDER
    (wheel,) = folder.glob("ioattn-*-py3-none-any.whl")
    requirements = (folder / "requirements.txt").read_text(encoding="utf-8").splitlines()
    repo = repository.from_environment()
    assert requirements[0] == notebooks.with_extras(repo.requirement if repo else wheel.name,
                                                    ["teach"])


#: What the student's text must not say: notes about the site's rendering or the build.
BUILD_TALK = re.compile(r"click to show|the build fails|would not build|PASS or FAIL",
                        re.IGNORECASE)


@pytest.mark.book
def test_notebooks_do_not_talk_about_the_site_or_the_build(built):
    """The notebooks' code is shown (no "click to show it") and their text speaks to the
    student, not about the build."""
    found = []
    for page in _pages():
        for hit in BUILD_TALK.finditer(_markdown(_notebook(built, page))):
            found.append(f"{page}: {hit.group(0)!r}")
    assert not found, found
