"""The book's teaching conventions in its sources (book/_ext/teaching.py; the built pages' weight
and height are in test_browser_teaching.py): a worked example in every chapter, a check of
understanding in every main section, a difficulty on every exercise, no sentence about the build
and no display broken by hand."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from .conftest import ROOT


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"book/_ext/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


teaching = _module("teaching")
CHAPTERS = teaching.chapters()
PAGES = teaching.pages()


def _page(tmp_path, text: str):
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return teaching.read_page(path)


# ------------------------------------------------------------------------------ the reader
def test_the_reader_finds_each_device_and_skips_code(tmp_path):
    page = _page(tmp_path, """# Title

## Scores

::::{admonition} Worked example: four scores
:class: worked-example
Work.
::::

```{code-cell} ipython3
## not a section
print("the build fails")  # code is not prose
```

::::{admonition} Check your understanding
:class: quick-check
Why?

:::{dropdown} Answer
Because.
:::
::::

## Costs

$$ a &\\quad b $$

:::{admonition} Takeaway
:class: takeaway
Less is more.
:::

## Exercises

:::{exercise} ★★ Decoding
:label: ex-1
:::

:::{exercise}
:label: ex-2
Unrated: the build fails otherwise.
:::
""")
    assert (page.worked, page.checks, page.takeaways) == (1, 1, 1)
    assert [s.title for s in page.sections] == ["Scores", "Costs", "Exercises"]
    assert page.unchecked == ["Costs"]            # Exercises needs none
    assert page.exercises == ["★★ Decoding", ""]
    assert page.rated == 1
    assert [n for n, _ in page.about_the_build] == [41]
    assert len(page.hand_breaks) == 1


@pytest.mark.parametrize("title, rated", [("★ Sizes", True), ("★★★ Open", True), ("★★", True),
                                          ("★★★★ Too many", False), ("Sizes ★", False),
                                          ("", False), ("*Decoding.*", False)])
def test_a_difficulty_is_one_to_three_stars_first(title, rated):
    assert bool(teaching.DIFFICULTY.match(title)) is rated


def test_directives_in_backticks_are_prose_and_code_blocks_are_not(tmp_path):
    page = _page(tmp_path, "## A\n\n```{math}\na &\\quad b\n```\n\n```python\nx &\\quad y\n```\n")
    assert len(page.hand_breaks) == 1


def test_figure_bytes_counts_inline_svg_images_and_data_uris(tmp_path):
    (tmp_path / "img.png").write_bytes(b"x" * 1000)
    svg = '<svg width="1"><svg><rect/></svg><path d="M0 0"/></svg>'
    html = tmp_path / "page.html"
    html.write_text(f'<html><body><p>a</p>\n{svg}<img src="img.png"><img src="img.png">'
                    f'<img src="data:image/png;base64,AAAA"></body></html>', encoding="utf-8")
    assert teaching.figure_bytes(html) == len(svg) + 1000 + len("data:image/png;base64,AAAA")


# ------------------------------------------------------------------------------ the book
def test_the_book_has_chapters():
    assert len(CHAPTERS) >= 12 and all(p.is_file() for p in PAGES)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_works_an_example(path):
    assert teaching.read_page(path).worked >= 1, f"{path.name}: no worked example"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_main_section_checks_understanding(path):
    unchecked = teaching.read_page(path).unchecked
    assert not unchecked, f"{path.name}: main sections with no check of understanding: {unchecked}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_exercise_has_a_difficulty(path):
    page = teaching.read_page(path)
    unrated = [t for t in page.exercises if not teaching.DIFFICULTY.match(t)]
    assert not unrated, f"{path.name}: exercises without a difficulty: {unrated}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_text_speaks_to_the_student(path):
    page = teaching.read_page(path)
    assert not page.about_the_build, \
        f"{path.name}: sentences about the build: {page.about_the_build}"
    assert not page.hand_breaks, f"{path.name}: displays broken by hand at lines {page.hand_breaks}"
