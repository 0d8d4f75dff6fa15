"""The runnable notebooks paired with the book's chapters (``book/<chapter>.ipynb``).

Colab opens only ``.ipynb`` files, and the chapters are MyST markdown notebooks
(``book/<chapter>.md``, the one source). This script writes, for each chapter with a kernel, the
paired notebook: the chapter converted by jupytext, outputs empty, preceded by one set-up cell
that installs ``ioattn`` from the repository where it is missing (on Colab; elsewhere the cell
does nothing). The "Colab" and "Binder" launch buttons of a page open its paired notebook.

    python book/_ext/notebooks.py          # write the notebooks that differ
    python book/_ext/notebooks.py --check  # exit 1, naming them, if any differs

``make notebooks`` runs the first; the test suite runs :func:`stale`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"


def repository() -> str:
    """The repository URL of ``_config.yml``, the one place it is written."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"].rstrip("/")


def setup_cell() -> nbformat.NotebookNode:
    """The first cell of every paired notebook: install ``ioattn`` where it is missing."""
    source = (
        "# Set-up for Colab and other fresh environments: install ioattn (and myst-nb, whose\n"
        "# `glue` the chapter uses) when they are missing. Where they are installed, this does\n"
        "# nothing.\n"
        "import importlib.util, subprocess, sys\n"
        "\n"
        'if importlib.util.find_spec("ioattn") is None or '
        'importlib.util.find_spec("myst_nb") is None:\n'
        "    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\",\n"
        f"                    \"ioattn @ git+{repository()}\", \"myst-nb\"], check=True)"
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["colab-setup"]})


def chapters() -> list[Path]:
    """The pages of the book that are notebooks (their front matter names a kernel): the
    chapters and the assignment pages, not the assignments' master notebooks."""
    return sorted(p for p in BOOK.rglob("*.md")
                  if not {"masters", "_ext", "_static"} & set(p.relative_to(BOOK).parts)
                  and "kernelspec" in _front_matter(p))


def _front_matter(md: Path) -> dict:
    text = md.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}
    return yaml.safe_load(text[4:text.index("\n---", 4)]) or {}


def paired(md: Path) -> nbformat.NotebookNode:
    """The notebook paired with the chapter ``md``."""
    nb = jupytext.read(md, fmt="md:myst")
    nb.metadata.pop("jupytext", None)
    nb.cells.insert(0, setup_cell())
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.setdefault("language_info", {"name": "python"})
    nb.nbformat, nb.nbformat_minor = 4, 5
    for i, cell in enumerate(nb.cells):   # stable cell ids: no diff when nothing changed
        cell.id = f"cell-{i}"
    return nb


def _text(nb) -> str:
    return nbformat.writes(nb) + "\n"


def stale() -> list[Path]:
    """The paired notebooks that are missing or differ from their chapter."""
    out = []
    for md in chapters():
        ipynb = md.with_suffix(".ipynb")
        if not ipynb.is_file() or ipynb.read_text(encoding="utf-8") != _text(paired(md)):
            out.append(ipynb)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale notebooks")
    args = parser.parse_args(argv)
    todo = stale()
    if args.check:
        for path in todo:
            print(f"{path.relative_to(ROOT)} differs from its chapter: run `make notebooks`")
        return 1 if todo else 0
    for path in todo:
        path.write_text(_text(paired(path.with_suffix(".md"))), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    orphans = [p for p in BOOK.rglob("*.ipynb") if p.with_suffix(".md") not in chapters()
               and not {"masters", "_ext", "_static", ".ipynb_checkpoints"}
               & set(p.relative_to(BOOK).parts)]
    for path in orphans:
        path.unlink()
        print(f"removed {path.relative_to(ROOT)} (no chapter)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
