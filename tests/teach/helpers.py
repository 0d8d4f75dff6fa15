"""Shared by the teach tests: notebooks as ``ioattn assign`` makes them, with given code."""

from __future__ import annotations

import secrets
import subprocess
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


def named(marker: str) -> list[int]:
    """The running processes whose name is ``marker`` (not the ended ones, zombies that the
    machine's first process has not reaped yet), in any namespace."""
    done = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True,
                          check=True)
    rows = [line.split(None, 2) for line in done.stdout.splitlines()]
    return [int(r[0]) for r in rows if len(r) == 3 and r[2] == marker
            and not r[1].startswith(("Z", "X"))]


def sleeper() -> tuple[str, str]:
    """A notebook cell that names its process with a fresh marker and sleeps for ten minutes,
    and the marker (for :func:`named`)."""
    marker = "nb" + secrets.token_hex(6)
    cell = ("import ctypes, time\n"
            f"ctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)   # PR_SET_NAME\n"
            "time.sleep(600)")
    return cell, marker

