"""Part IV's two pages, book/parallel.md (the algorithms) and book/parallel_bounds.md (the bounds
and practice): every label of the chapter they were split from is defined exactly once in one of
them, each page imports what its code uses, and both follow the book's teaching conventions."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = {name: ROOT / "book" / f"{name}.md" for name in ("parallel", "parallel_bounds")}

#: Every label of chapter 12 before it was split in two; other chapters may refer to any of them.
LABELS = {
    "ch-parallel", "def-parallel-model",
    "alg-parallel-ring", "alg-parallel-ring-backward", "alg-parallel-striped", "alg-parallel-a2a",
    "alg-parallel-grid", "asm-parallel-a", "asm-parallel-av",
    "thm-parallel-ring", "thm-parallel-striped", "thm-parallel-a2a", "thm-parallel-grid",
    "thm-parallel-mi", "thm-parallel-mi-v", "thm-parallel-md",
    "lem-parallel-merge", "lem-parallel-rows", "lem-parallel-rows-v",
    "eq-parallel-ring", "eq-parallel-ring-backward", "eq-parallel-critical", "eq-parallel-a2a",
    "eq-parallel-grid", "eq-parallel-grid-equal", "eq-parallel-merge", "eq-parallel-mi",
    "eq-parallel-mi-v", "eq-parallel-md",
    "fig-parallel-rings", "fig-parallel-a2a", "fig-parallel-grid", "fig-parallel-ratios",
    "fig-parallel-crossover",
    "ex-parallel-shares", "ex-parallel-causal-ring", "ex-parallel-grid-memory",
    "ex-parallel-merge-order", "ex-parallel-crossover", "ex-parallel-not-attained",
}


def _text(name):
    return PAGES[name].read_text(encoding="utf-8")


def _labels(text):
    """The labels a MyST page defines: targets, directive labels, figure names, equations."""
    return (re.findall(r"^\((\S+)\)=$", text, re.M) + re.findall(r"^:label: (\S+)$", text, re.M)
            + re.findall(r"^\s+name: (fig-\S+)$", text, re.M)
            + re.findall(r"^\$\$ \((eq-\S+)\)$", text, re.M))


def _cells(text):
    """The source of every code cell, without its options."""
    out = []
    for body in re.findall(r"^```\{code-cell\} ipython3\n(.*?)^```$", text, re.M | re.S):
        lines = body.split("\n")
        if lines[0] == "---":
            lines = lines[lines.index("---", 1) + 1:]
        out.append("\n".join(x for x in lines if not x.startswith(":tags:")))
    return out


def test_every_label_is_defined_once_in_one_of_the_two_pages():
    found = _labels(_text("parallel")) + _labels(_text("parallel_bounds"))
    twice = sorted({x for x in found if found.count(x) > 1})
    assert not twice, f"labels defined twice: {twice}"
    missing = sorted(LABELS - set(found))
    assert not missing, f"labels of chapter 12 that neither page defines: {missing}"
    assert "ch-parallel-bounds" in _labels(_text("parallel_bounds"))


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_page_defines_every_name_its_code_uses(name):
    """Each page runs on its own as a notebook: every name its cells load is assigned or
    imported in one of its own cells (or is a builtin)."""
    import builtins

    trees = [ast.parse(c) for c in _cells(_text(name))]
    bound = set(dir(builtins))
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound.add(node.name)
                bound |= {a.arg for a in node.args.args} if isinstance(node, ast.FunctionDef) \
                    else set()
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
    used = {node.id for tree in trees for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    assert not used - bound, f"{name}.md uses names it never defines: {sorted(used - bound)}"
    assert "from ioattn import parallel" in _cells(_text(name))[0]


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_page_follows_the_teaching_conventions(name):
    text = _text(name)
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S)
    assert ":class: worked-example" in prose, f"{name}.md has no worked example"
    assert ":class: takeaway" in prose, f"{name}.md has no takeaway box"
    # one quick check in every main section but the summary and the exercises
    sections = re.split(r"^## ", prose, flags=re.M)[1:]
    for section in sections:
        title = section.split("\n", 1)[0]
        if title in ("Summary", "Exercises"):
            continue
        assert ":class: quick-check" in section, f"{name}.md: no quick check in '{title}'"
    titles = re.findall(r"^:::\{exercise\}(.*)$", prose, re.M)
    assert titles, f"{name}.md has no exercises"
    for title in titles:
        assert re.match(r" ★{1,3} \S", title), f"{name}.md: exercise without stars: {title!r}"
    # no display broken by hand for phones
    assert "&\\quad" not in text
    # the cells that only check the page are removed from it
    for body in re.findall(r"^```\{code-cell\} ipython3\n(.*?)^```$", text, re.M | re.S):
        if re.search(r"^\s*assert ", body, re.M):
            assert "remove-cell" in body.split("\n\n", 1)[0], \
                f"{name}.md: a cell with asserts is shown: {body[:80]!r}"
