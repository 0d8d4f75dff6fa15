"""The runnable notebooks paired with the chapters (for Colab and Binder) agree with them."""

from __future__ import annotations

import importlib.util

import jupytext
import nbformat

from .conftest import ROOT

_spec = importlib.util.spec_from_file_location("notebooks", ROOT / "book/_ext/notebooks.py")
notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(notebooks)


def test_every_chapter_has_its_notebook_up_to_date():
    chapters = notebooks.chapters()
    assert len(chapters) >= 9, chapters
    assert not [p for p in chapters if "masters" in p.parts], "master notebooks are not pages"
    assert notebooks.stale() == [], "run `make notebooks`"


def test_each_pair_has_the_same_cells():
    """Checked independently of the generator: after the set-up cell, the notebook's cells are
    the chapter's, in order, with the same sources and tags, and no outputs."""
    for md in notebooks.chapters():
        chapter = jupytext.read(md, fmt="md:myst")
        nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
        nbformat.validate(nb)
        first, cells = nb.cells[0], nb.cells[1:]
        assert first.cell_type == "code" and "pip" in first.source and "ioattn @ git+" in \
            first.source, md
        assert [(c.cell_type, c.source) for c in cells] == \
            [(c.cell_type, c.source) for c in chapter.cells], md
        assert [c.metadata.get("tags") for c in cells] == \
            [c.metadata.get("tags") for c in chapter.cells], md
        assert all(not c.get("outputs") for c in cells if c.cell_type == "code"), md
        assert nb.metadata.kernelspec.name == "python3", md


def test_setup_cell_installs_from_the_configured_repository():
    cell = notebooks.setup_cell()
    assert notebooks.repository() in cell.source
    compile(cell.source, "setup", "exec")    # plain Python: runs anywhere, Colab included
