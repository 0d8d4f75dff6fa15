"""End to end: ``ioattn assign`` and ``ioattn grade`` on real notebooks, through otter-grader.

One build of every assignment (otter assign) into a temporary folder; then, per assignment, one
``ioattn grade FOLDER --json --jobs 2`` over the reference solution (the otter autograder
notebook, solutions in), the unsolved student version, and a few cheating notebooks made from
the student version with a fixture in its answer cells.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil

import nbformat
import pytest

import ioattn.teach as teach
from ioattn.cli import main
from ioattn.teach.build import build, personalize

from .helpers import FIXTURES, fixture_meta

#: Cheating notebooks graded end to end: (assignment, fixture, student id).
CHEATS = [("matmul", "peek_data", "peek"), ("matmul", "stash_locals", "stash"),
          ("crossover", "hardcoded", "hard"), ("pebbling", "min_io", "machine")]


def _cheat(student_nb, fixture, target):
    nb = nbformat.read(student_nb, as_version=4)
    answers = [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    answers[0].source = fixture.read_text()
    for cell in answers[1:]:
        cell.source = "pass"
    nbformat.write(nb, target)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """assignment -> (the JSON reports by student, the CSV rows), graded once."""
    out = tmp_path_factory.mktemp("assignments")
    results: dict = {}
    for name in teach.assignments():
        built = build(name, out)
        folder = out / "submissions" / name
        folder.mkdir(parents=True)
        shutil.copyfile(built.folder / "dist" / "autograder" / f"{name}.ipynb",
                        folder / "example.ipynb")
        shutil.copyfile(built.student, folder / "ada.ipynb")
        if name == "pebbling":    # the example's answers, handed in by another student
            shutil.copyfile(folder / "example.ipynb", folder / "grace.ipynb")
        for assignment, fixture, student in CHEATS:
            if assignment == name:     # the student's own notebook, with the fixture answering
                mine = personalize(built, teach.variant(name, student), folder)
                _cheat(mine, FIXTURES / name / f"{fixture}.py", mine)
    def result(name):
        if name not in results:
            sheet = out / f"{name}.csv"
            argv = ["grade", name, str(out / "submissions" / name), "--json", "--jobs", "2",
                    "--out", str(out), "--seed", "17", "--csv", str(sheet)]
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                status = main(argv)
            reports = {r["student"]: r for r in json.loads(printed.getvalue())}
            results[name] = status, reports, sheet
        return results[name]

    return out, result


@pytest.mark.parametrize("name", teach.assignments())
def test_grade_a_folder(name, graded):
    status, reports, sheet = graded[1](name)
    assert status == 0
    spec = teach.get(name)
    reference, unsolved = reports["example"], reports["ada"]
    # the reference solution scores full marks on every auto-graded question
    assert reference["score"] == reference["possible"] == spec.points > 0, reference
    assert [q["name"] for q in reference["questions"]] == [q.name for q in spec.questions]
    assert all(q["reasons"] == [] for q in reference["questions"])
    # the unsolved student version scores below full, and says why
    assert unsolved["score"] < unsolved["possible"]
    assert all(q["reasons"] for q in unsolved["questions"] if not q["manual"])
    # every cheating notebook fails, for the fixture's reason, on every question
    for assignment, fixture, student in CHEATS:
        if assignment == name:
            expect, questions = fixture_meta(FIXTURES / name / f"{fixture}.py")
            for q in reports[student]["questions"]:
                if not q["manual"] and (questions is None or q["name"] in questions):
                    assert q["score"] == 0 and q["kinds"][0] == expect, (fixture, q)
    # the score sheet has a row per notebook, with the same totals
    rows = {r["student"]: r for r in csv.DictReader(sheet.open())}
    assert set(rows) == set(reports)
    assert float(rows["example"]["total"]) == reference["score"]


def test_each_submission_is_checked_against_its_own_variant(graded):
    """Grace handed in the example's pebbling answers: right for the example's graph, wrong for
    hers (the grader takes her id from the file name, never from the notebook)."""
    _, reports, _ = graded[1]("pebbling")
    assert reports["example"]["score"] == reports["example"]["possible"]
    grace = reports["grace"]
    assert grace["score"] == 0 and grace["questions"][0]["kinds"] == ["wrong"]


def test_text_report_of_one_notebook(graded, capsys):
    """Without --student the id is the one the notebook declares, and the report says so."""
    out, _ = graded
    nb = out / "submissions" / "matmul" / "peek" / "matmul.ipynb"
    assert main(["grade", "matmul", str(nb), "--out", str(out), "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "matmul: peek (the id the notebook declares)" in text and "grading seed 1" in text
    assert "q1  " in text and "0/2" in text and "0/3" in text and "total 0/5" in text
    assert "Used slow memory without a counted read or write: tiled_matmul read A._data" in text


def test_a_notebook_of_another_assignment_is_not_graded(graded, capsys):
    out, _ = graded
    nb = out / "submissions" / "flash" / "ada.ipynb"
    assert main(["grade", "matmul", str(nb), "--student", "ada", "--out", str(out),
                 "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "assignment 'flash', not 'matmul'" in report["error"] and report["score"] == 0


def test_assign_writes_each_students_parameters(graded, capsys):
    out, _ = graded
    assert main(["assign", "flash", "--student", "ada", "--student", "alan", "--out", str(out),
                 "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert [s["student"] for s in made["students"]] == ["ada", "alan"]
    for row in made["students"]:
        nb = nbformat.read(row["notebook"], as_version=4)
        (cell,) = [c for c in nb.cells if "variant" in c.metadata.get("tags", [])]
        namespace = {}
        exec(cell.source, namespace)                                  # noqa: S102
        want = teach.variant("flash", row["student"]).params
        assert {k: namespace[k] for k in want} == want == row["params"]
        assert namespace["STUDENT"] == row["student"]
        assert not any("BEGIN SOLUTION" in c.source or "B_r = max" in c.source
                       for c in nb.cells)                            # solutions removed
