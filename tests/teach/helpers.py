"""Shared by the teach tests: notebooks as ``ioattn assign`` makes them, with given code."""

from __future__ import annotations

from pathlib import Path

import nbformat

import ioattn.teach as teach

SOLUTIONS = Path(__file__).resolve().parent / "solutions"
CHEATS = Path(__file__).resolve().parent / "cheats"


def solution(name: str) -> str:
    """The honest tile program of assignment ``name`` (the grader's own tests' answer)."""
    return (SOLUTIONS / f"{name}.py").read_text()


def notebook(path: Path, assignment: str, student: str, *cells: str, course: str = "",
             record: bool = True) -> Path:
    """Write a notebook of ``student`` for ``assignment``: the variant cell, then ``cells``."""
    v = teach.variant(assignment, student, course)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(v.cell_source(), metadata={"tags": ["variant"]})]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    if record:
        nb.metadata["ioattn"] = {"assignment": assignment, "student": student, "course": course}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def cheat_cells(stem: str, **words: str) -> list[str]:
    """The notebook cells of ``cheats/<stem>.py`` (cells split at ``# %%`` lines; ``# %%
    solution``: the honest matmul answer), each ``__WORD__`` replaced by ``words[WORD]``."""
    cells, current = [], []
    for line in (CHEATS / f"{stem}.py").read_text().splitlines():
        if line.startswith("# %%"):
            cells.append("\n".join(current))
            current = []
            if line.strip() == "# %% solution":
                cells.append(solution("matmul"))
            continue
        current.append(line)
    cells.append("\n".join(current))
    for word, value in words.items():
        cells = [c.replace(f"__{word}__", str(value)) for c in cells]
    return [c for c in cells if c.strip()]
