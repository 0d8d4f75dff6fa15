"""Student notebooks: one per assignment, and each student's copy with their variant.

Each assignment's student notebook is made from a MyST notebook (jupytext): by default the one
shipped with ioattn, ``ioattn/teach/notebooks/<name>.md``, which holds the statement, the starter
code and the student's own checks and no solution; or the instructor's own, from a private
folder (``--masters DIR``), in which everything between a line ``# BEGIN SOLUTION`` and a line
``# END SOLUTION`` is cut (the markers otter-grader uses) and replaced by ``...``. Answer keys
so stay in the instructor's folder: neither the package nor its repository holds one.

:func:`personalize` writes a student's copy: the cell tagged ``variant`` gets their parameters,
and the notebook's metadata records the assignment, the student and the course, which
``ioattn grade`` checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .assignments import get
from .variants import Variant

__all__ = ["Built", "build", "notebook_source", "personalize", "strip_solutions"]

#: The tag of the cell that holds the variant's parameters.
VARIANT_TAG = "variant"
_SOLUTION = re.compile(r"^([ \t]*)# BEGIN SOLUTION[^\n]*\n.*?^[ \t]*# END SOLUTION[^\n]*(\n|$)",
                       re.M | re.S)


def _need(module: str):
    """Import ``module`` (a dependency of the ``teach`` extra), or say how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise RuntimeError(f"making and grading assignments needs {module.split('.')[0]}: "
                           "pip install 'ioattn[teach]'") from None


def notebook_source(name: str, masters=None) -> Path:
    """The MyST notebook assignment ``name`` is made from: ``masters/<name>.md``, or the one
    shipped with ioattn."""
    get(name)                                        # a clear error for an unknown name
    folder = Path(masters) if masters is not None else Path(__file__).parent / "notebooks"
    path = folder / f"{name}.md"
    if not path.is_file():
        raise FileNotFoundError(f"assignment {name!r} has no notebook at {path}")
    return path


def strip_solutions(source: str) -> str:
    """``source`` with every ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` block replaced by an
    indented ``...``.

    >>> print(strip_solutions("def f():\\n    # BEGIN SOLUTION\\n    return 1\\n    # END SOLUTION\\n"))
    def f():
        ...
    <BLANKLINE>
    """
    if "# BEGIN SOLUTION" in _SOLUTION.sub("", source):
        raise ValueError("a # BEGIN SOLUTION line without its # END SOLUTION")
    return _SOLUTION.sub(lambda m: f"{m.group(1)}...\n", source)


@dataclass(frozen=True)
class Built:
    """The student notebook of one assignment: ``name``, its ``folder`` and the notebook."""

    name: str
    folder: Path
    student: Path


def build(name: str, out, *, masters=None) -> Built:
    """Write the student notebook of assignment ``name`` to ``out/<name>/<name>.ipynb``."""
    jupytext = _need("jupytext")
    nbformat = _need("nbformat")
    source = notebook_source(name, masters)
    nb = jupytext.read(source)
    nb.metadata.pop("jupytext", None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source)
    variant_cells = [c for c in nb.cells if VARIANT_TAG in c.get("metadata", {}).get("tags", [])]
    if len(variant_cells) != 1:
        raise ValueError(f"{source} should have one cell tagged {VARIANT_TAG!r}, not "
                         f"{len(variant_cells)}")
    folder = Path(out).resolve() / name
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.ipynb"
    nbformat.write(nb, target)
    return Built(name, folder, target)


def personalize(built: Built, variant: Variant, folder) -> Path:
    """Write ``variant``'s copy of the student notebook to ``folder/<student>/<name>.ipynb``,
    its parameters in the cell tagged ``variant`` and its record in the metadata."""
    import nbformat

    nb = nbformat.read(built.student, as_version=4)
    cell = next(c for c in nb.cells if VARIANT_TAG in c.get("metadata", {}).get("tags", []))
    cell.source = variant.cell_source()
    nb.metadata["ioattn"] = {"assignment": variant.assignment, "student": variant.student,
                             "course": variant.course}
    target = Path(folder) / variant.student / f"{built.name}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target
