"""Student notebooks and autograders, generated from the master notebooks with otter-grader.

Each assignment has one master notebook, ``book/assignments/masters/<name>.md`` (MyST markdown in
otter-grader's assignment format: the statement, the starter code, the reference solution between
``# BEGIN SOLUTION`` and ``# END SOLUTION``, public and hidden tests). :func:`build` converts it
with jupytext and runs Otter Assign, which writes

- the student notebook, solutions and hidden tests removed, public tests in its metadata;
- the autograder, a zip of every test, that ``ioattn grade`` hands to Otter Run.

Both are build outputs (under ``_build/assignments`` unless told otherwise), remade whenever the
master, ioattn or otter-grader changes. :func:`personalize` writes a student's copy with their
variant's parameters.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from .assignments import get
from .variants import Variant

__all__ = ["Built", "DEFAULT_OUT", "build", "master_path", "masters_dir", "personalize"]

#: Where :func:`build` writes, relative to the working directory, unless told otherwise.
DEFAULT_OUT = Path("_build") / "assignments"
#: The tag of the master's cell that holds the variant's parameters.
VARIANT_TAG = "variant"


def masters_dir(given=None) -> Path:
    """The folder of master notebooks: ``given``, or ``book/assignments/masters`` in the ioattn
    source tree this package is imported from."""
    if given is not None:
        path = Path(given)
    else:
        path = Path(__file__).resolve().parents[2] / "book" / "assignments" / "masters"
    if not path.is_dir():
        raise FileNotFoundError(
            f"no master notebooks at {path}: they live in the ioattn repository "
            "(book/assignments/masters); pass its path with --masters")
    return path


def master_path(name: str, masters=None) -> Path:
    """The master notebook of assignment ``name``."""
    get(name)                                        # a clear error for an unknown name
    path = masters_dir(masters) / f"{name}.md"
    if not path.is_file():
        raise FileNotFoundError(f"assignment {name!r} has no master notebook at {path}")
    return path


@dataclass(frozen=True)
class Built:
    """What :func:`build` made for one assignment.

    Attributes
    ----------
    name : str
    folder : Path
        Everything for this assignment.
    student : Path
        The student notebook (no solutions, no hidden tests).
    autograder : Path
        The autograder zip for ``ioattn grade`` (Otter Run).
    """

    name: str
    folder: Path
    student: Path
    autograder: Path


def _fingerprint(master: Path) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    try:
        otter = version("otter-grader")
    except PackageNotFoundError:
        raise RuntimeError("making and grading assignments needs otter-grader: "
                           "pip install 'ioattn[teach]'") from None
    h = hashlib.sha256(master.read_bytes())
    h.update(f"ioattn {__version__} otter {otter}".encode())
    for source in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(source.read_bytes())
    return h.hexdigest()


def build(name: str, out=None, *, masters=None, force: bool = False) -> Built:
    """Generate the student notebook and the autograder of assignment ``name``.

    Parameters
    ----------
    name : str
        An assignment (``ioattn.teach.assignments()``).
    out : path, optional
        Output folder (default :data:`DEFAULT_OUT`); the assignment's files go in ``out/name``.
    masters : path, optional
        Folder of master notebooks (default: the repository's).
    force : bool
        Rebuild even if the outputs are up to date.

    Returns
    -------
    Built
    """
    master = master_path(name, masters)
    folder = Path(out if out is not None else DEFAULT_OUT) / name
    built = Built(name, folder, folder / "student" / f"{name}.ipynb", folder / "autograder.zip")
    stamp = folder / "fingerprint"
    fingerprint = _fingerprint(master)
    if (not force and stamp.is_file() and stamp.read_text() == fingerprint
            and built.student.is_file() and built.autograder.is_file()):
        return built
    for old in ("master", "dist", "student"):         # never students/: handed-out copies
        shutil.rmtree(folder / old, ignore_errors=True)
    built.autograder.unlink(missing_ok=True)
    (folder / "master").mkdir(parents=True)
    source = folder / "master" / f"{name}.ipynb"
    _to_notebook(master, source)
    dist = folder / "dist"
    _otter_assign(source, dist)
    zips = sorted((dist / "autograder").glob("*.zip"))
    if len(zips) != 1:
        raise RuntimeError(f"otter assign wrote {len(zips)} autograder zips for {name!r}")
    built.student.parent.mkdir(parents=True)
    shutil.copyfile(dist / "student" / f"{name}.ipynb", built.student)
    shutil.copyfile(zips[0], built.autograder)
    stamp.write_text(fingerprint)
    return built


def _need(module: str):
    """Import ``module`` (a dependency of the ``teach`` extra), or say how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise RuntimeError(f"making and grading assignments needs {module.split('.')[0]}: "
                           "pip install 'ioattn[teach]'") from None


def _to_notebook(master: Path, target: Path) -> None:
    jupytext = _need("jupytext")

    nb = jupytext.read(master)
    nb.metadata.pop("jupytext", None)
    jupytext.write(nb, target, fmt="ipynb")


def _otter_assign(source: Path, dist: Path) -> None:
    """Run Otter Assign quietly (no PDFs; the tests are run by ioattn's own test suite)."""
    assign = _need("otter.assign").main

    quiet = logging.getLogger("otter")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            assign(str(source), str(dist), no_pdfs=True, no_run_tests=True)
    finally:
        quiet.setLevel(level)


def personalize(built: Built, variant: Variant, folder) -> Path:
    """Write ``variant``'s copy of the student notebook to ``folder/<student>/<name>.ipynb``.

    The cell tagged ``variant`` gets the variant's parameters as Python literals; everything
    else, the otter metadata included, is the student notebook as built. (Otter's checks find
    the notebook by its name, so the file keeps the assignment's name and each student gets a
    folder.)
    """
    import nbformat

    nb = nbformat.read(built.student, as_version=4)
    cells = [c for c in nb.cells if VARIANT_TAG in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise RuntimeError(f"the {built.name} notebook should have one cell tagged "
                           f"{VARIANT_TAG!r}, not {len(cells)}")
    cells[0].source = variant.cell_source()
    nb.metadata["ioattn"] = {"assignment": variant.assignment, "student": variant.student,
                             "course": variant.course}
    target = Path(folder) / variant.student / f"{built.name}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target


def declared_student(notebook) -> str | None:
    """The student id a notebook's metadata or variant cell declares (for a student grading
    their own work; an instructor passes the id explicitly)."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    meta = nb.metadata.get("ioattn", {})
    if isinstance(meta, dict) and isinstance(meta.get("student"), str):
        return meta["student"]
    for cell in nb.cells:
        if VARIANT_TAG in cell.get("metadata", {}).get("tags", []):
            for line in cell.source.splitlines():
                if line.startswith("STUDENT = "):
                    with contextlib.suppress(ValueError, SyntaxError):
                        value = ast.literal_eval(line.split("=", 1)[1].strip())
                        return value if isinstance(value, str) else None
    return None
