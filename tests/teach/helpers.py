"""Shared by the teach tests: the masters' code, the cheating fixtures, and running checks."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import jupytext

import ioattn.teach as teach
from ioattn.teach import session
from ioattn.teach.judge import GradingFailure

ROOT = Path(__file__).resolve().parents[2]
MASTERS = ROOT / "book" / "assignments" / "masters"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def master_cells(name: str) -> list[str]:
    """The code cells of an assignment's master notebook, in order."""
    nb = jupytext.read(MASTERS / f"{name}.md")
    return [c.source for c in nb.cells if c.cell_type == "code"]


def run_cells(cells, namespace: dict) -> dict:
    """Run notebook cells like a kernel that ignores errors (as otter's grading run does)."""
    for source in cells:
        with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, "<cell>", "exec"), namespace)   # noqa: S102
    return namespace


def reference_namespace(name: str, student: str) -> dict:
    """The master notebook run for ``student`` (its variant cell replaced, its tests left out)."""
    cells = []
    for source in master_cells(name):
        if "BEGIN TEST CONFIG" in source or source.lstrip().startswith("def test_"):
            continue
        if "variant(" in source and "STUDENT = " in source:
            source = teach.variant(name, student).cell_source()
        cells.append(source)
    return run_cells(cells, {"__name__": "submission"})


def fixtures() -> list[tuple[str, Path]]:
    """``(assignment, path)`` of every cheating (or failing) fixture."""
    return [(p.parent.name, p) for p in sorted(FIXTURES.glob("*/*.py"))]


def fixture_meta(path: Path) -> tuple[str, list[str] | None]:
    """The kind a fixture must fail with, and the questions it applies to (None: all)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    meta = dict(line.split(":", 1) for line in doc.splitlines() if ":" in line
                and line.split(":", 1)[0] in ("expect", "questions"))
    questions = meta.get("questions")
    return meta["expect"].strip(), questions.split() if questions else None


def run_fixture(assignment: str, path: Path, student: str, seed: int) -> dict:
    """The fixture run as a notebook cell, inside a grading session; question -> result (the
    summary, or the GradingFailure)."""
    spec = teach.get(assignment)
    results = {}
    with session.scoped(assignment, student, seed=seed):
        v = teach.variant(assignment, student)
        ns = run_cells([path.read_text()], {"__name__": "submission", "STUDENT": student,
                                             **v.params})
        for q in spec.questions:
            if q.manual:
                continue
            answers = {n: ns.get(n) for n in spec.answers[q.name]}
            try:
                results[q.name] = teach.check(assignment, q.name, **answers)
            except GradingFailure as failure:
                results[q.name] = failure
    return results
