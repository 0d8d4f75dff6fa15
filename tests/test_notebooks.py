"""The student notebooks written by the build, and the buttons that lead to them.

Without the ``built`` fixture: the repository read from the environment, the theme's options it
sets, the code kept for students, the set-up cell, publishing to a branch, and the buttons of a
tiny Sphinx project. With it (marked ``book``): every generated notebook has no raw MyST, its
solutions folded, the glued values of its page, links that lead to the site, and it runs from a
clean kernel.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
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


def test_tiny_book_student_notebook(tmp_path):
    """A page with every construct the generator resolves, built by Sphinx: the student
    notebook has its numbers, links and glued values, and no raw MyST."""
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'book/_ext')!r})\n"
                                 + _TINY_BOOK_CONF)
    (src / "refs.bib").write_text(_TINY_BIB)
    (src / "index.md").write_text("# Tiny\n\n```{toctree}\n:numbered:\nbook/page\n```\n")
    (src / "book/page.md").write_text(_TINY_CHAPTER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "IOATTN_"))}
    env |= {"GITHUB_REPOSITORY": "ann/fork", "GITHUB_SHA": SHA}
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                           str(src), str(tmp_path / "html")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nb = nbformat.read(tmp_path / "html/notebooks/book/page.ipynb", as_version=4)
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
    page = html.unescape((tmp_path / "html/book/page.html").read_text(encoding="utf-8"))
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert "../notebooks/book/page.ipynb" in hrefs, "no download of the student notebook"
    assert code[1] == "sizes = [3, 4]" and code[2] == "print(sizes)"


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


def test_setup_cell_installs_the_built_commit_or_says_how():
    requirement = f"ioattn @ git+https://github.com/ann/fork.git@{SHA}"
    online = notebooks.setup_source(requirement)
    local = notebooks.setup_source(None)
    assert requirement in online and "git+" not in local and "ModuleNotFoundError" in local
    for source in (online, local):
        compile(source, "setup", "exec")
        # Where ioattn is installed (as here), the cell does nothing.
        scope: dict = {}
        exec(compile(source, "setup", "exec"), scope)   # noqa: S102 - the cell itself
        assert "wheels" not in scope


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
        assert "importlib.util.find_spec(\"ioattn\")" in code[0], page
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
        assert text.count("<details>") == text.count("</details>") == solutions, page
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
    assert requirements[0] == (repo.requirement if repo else wheel.name)


def _execute(path: Path) -> float:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


@pytest.mark.book
def test_every_student_notebook_runs_from_a_clean_kernel(built, tmp_path):
    """Each notebook is copied out of the site (so no wheel is beside it: ioattn, installed
    here, makes the set-up cell a no-op) and run by nbclient in a fresh kernel, two at a
    time."""
    paths = []
    for page in _pages():
        copy = tmp_path / f"{page.replace('/', '__')}.ipynb"
        copy.write_bytes((built / notebooks.FOLDER / f"{page}.ipynb").read_bytes())
        paths.append(copy)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        times = dict(zip(paths, pool.map(_execute, paths)))
    total = time.perf_counter() - start
    slowest = sorted(times.items(), key=lambda kv: -kv[1])[:3]
    print(f"\nexecuted {len(paths)} student notebooks in {total:.0f} s (2 workers); slowest: "
          + ", ".join(f"{p.stem} {t:.0f} s" for p, t in slowest))
