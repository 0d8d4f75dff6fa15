"""Grading end to end: honest notebooks, crashes, timeouts, records, folders, the commands."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ioattn.teach.assignments.matmul import Matmul
from ioattn.teach.grade import find_submissions, grade

from .helpers import notebook, solution

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("name", ["matmul", "flash", "backward", "decoding"])
def test_an_honest_notebook_gets_full_marks(tmp_path, name):
    path = notebook(tmp_path / f"{name}.ipynb", name, "ada", solution(name),
                    "print('done'); open('progress.log', 'a').write('ok')")
    report = grade(name, path, seed=3)
    assert report.error is None and not report.cell_errors, report.text()
    assert report.score == report.possible == 5, report.text()
    assert "nobody" in report.isolation or "own user" in report.isolation or "root" in \
        report.isolation


def test_cell_errors_are_reported_with_their_real_exception(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "matmul", "ada", "def broken(:\n    pass",
                    "1 / 0", solution("matmul"))
    report = grade("matmul", path, seed=3)
    assert report.score == 5
    assert report.cell_errors[0].startswith("cell 2: SyntaxError")
    assert "ZeroDivisionError" in report.cell_errors[1]
    assert "error in cell 2: SyntaxError" in report.text()


def test_a_missing_answer_says_so(tmp_path):
    report = grade("matmul", notebook(tmp_path / "a.ipynb", "matmul", "ada", "x = 1"), seed=3)
    assert report.score == 0
    assert "tiled_matmul is not defined" in report.questions[0].reasons[0]


def test_a_process_that_ends_fails_only_that_question(tmp_path):
    code = solution("matmul") + (
        "\nimport os\n_honest = tiled_matmul\n"
        "def tiled_matmul(mem, A, B, C):\n"
        "    if min(C.shape) < 39 or mem.M < 190:    # the hidden small sizes of question 1\n"
        "        os._exit(3)\n"
        "    _honest(mem, A, B, C)\n")
    report = grade("matmul", notebook(tmp_path / "a.ipynb", "matmul", "ada", code), seed=3)
    q1, q2 = report.questions
    assert q1.score == 0 and "exit code 3" in q1.reasons[0]
    assert q2.score == 3 and report.restarts == 1
    assert "started again 1 time(s)" in report.text()


@pytest.mark.parametrize("body, kind", [
    ("raise KeyboardInterrupt", "KeyboardInterrupt"),
    ("raise SystemExit(2)", "SystemExit: 2"),
    ("raise MemoryError('big')", "MemoryError: big"),
])
def test_what_a_call_raises_is_reported(tmp_path, body, kind):
    code = f"def tiled_matmul(mem, A, B, C):\n    {body}\n"
    report = grade("matmul", notebook(tmp_path / "a.ipynb", "matmul", "ada", code), seed=3)
    assert report.score == 0 and kind in report.questions[0].reasons[0]
    assert "your sizes" in report.questions[0].reasons[0]


def test_a_call_past_its_time_limit_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(Matmul, "time_limit", 3.0)
    code = "import time\ndef tiled_matmul(mem, A, B, C):\n    time.sleep(600)\n"
    report = grade("matmul", notebook(tmp_path / "a.ipynb", "matmul", "ada", code), seed=3)
    assert report.score == 0
    assert all("time limit" in q.reasons[0] for q in report.questions)


def test_cells_past_the_notebook_limit_mean_not_graded(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "matmul", "ada", "while True:\n    pass")
    report = grade("matmul", path, seed=3, notebook_time=3)
    assert report.error and "time limit" in report.error
    assert all(q.score is None for q in report.questions)
    assert "not graded" in report.text() and " 0/" not in report.text()


def test_the_memory_limit_holds(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "matmul", "ada", "x = bytearray(3 << 30)",
                    solution("matmul"))
    report = grade("matmul", path, seed=3, memory=1 << 30)
    assert "MemoryError" in report.cell_errors[0] and report.score == 5


def test_the_record_must_agree_with_the_instructor(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "matmul", "ada", solution("matmul"), course="cs1")
    assert "not 'alan'" in grade("matmul", path, student="alan").error
    assert "course 'cs1', not 'cs2'" in grade("matmul", path, course="cs2").error
    assert "assignment 'matmul', not 'flash'" in grade("flash", path).error
    bare = notebook(tmp_path / "b.ipynb", "matmul", "ada", "x = 1", record=False)
    assert "pass --student" in grade("matmul", bare).error


def test_a_folder_with_lms_names_and_duplicates(tmp_path):
    """The path names the student: what a learning-management system adds to a name is read
    through, and a student's second file is a second submission, not a reason to grade none."""
    notebook(tmp_path / "ada (1).ipynb", "matmul", "ada", "x = 1")
    notebook(tmp_path / "alan-matmul.ipynb", "matmul", "alan", "x = 1")
    notebook(tmp_path / "alan" / "matmul.ipynb", "matmul", "alan", "x = 2")
    notebook(tmp_path / "grace.ipynb", "matmul", "grace", "x = 1", record=False)
    notebook(tmp_path / "other.ipynb", "flash", "bob", "x = 1")
    notebook(tmp_path / "no id!.ipynb", "matmul", "bob", "x = 1")
    pairs, problems = find_submissions(tmp_path, "matmul")
    assert [who for who, _ in pairs] == ["ada", "alan", "alan", "grace"]
    assert sorted(p.name for who, p in pairs if who == "alan") == ["alan-matmul.ipynb",
                                                                  "matmul.ipynb"]
    assert any("assignment 'flash'" in p for p in problems)
    assert any("does not give a student id" in p for p in problems)


def test_the_instructor_commands_with_relative_paths(tmp_path):
    """``ioattn assign`` then ``ioattn grade`` as the guide gives them, from a class folder."""
    run = [sys.executable, "-m", "ioattn"]
    done = subprocess.run([*run, "assign", "matmul", "--student", "ada", "--student", "alan",
                           "--course", "cs1", "--out", "handout"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    handed = tmp_path / "handout" / "matmul" / "students"
    assert sorted(p.name for p in handed.iterdir()) == ["ada", "alan"]
    import nbformat

    nb = nbformat.read(handed / "ada" / "matmul.ipynb", as_version=4)
    assert nb.metadata["ioattn"] == {"assignment": "matmul", "student": "ada", "course": "cs1"}
    assert not any("BEGIN SOLUTION" in c.source for c in nb.cells)
    for c in nb.cells:                             # ada answers; alan hands in the starter
        if c.cell_type == "code" and "def tiled_matmul" in c.source:
            c.source = solution("matmul")
    subs = tmp_path / "submissions"
    subs.mkdir()
    nbformat.write(nb, subs / "ada (2).ipynb")
    (subs / "alan.ipynb").write_bytes((handed / "alan" / "matmul.ipynb").read_bytes())
    done = subprocess.run([*run, "grade", "matmul", "submissions", "--course", "cs1", "--json",
                           "--csv", "scores.csv", "--key", "grading.key"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    scores = {r["student"]: r["score"] for r in data["reports"]}
    assert scores == {"ada": 5, "alan": 0}
    assert (tmp_path / "scores.csv").read_text().splitlines()[1].startswith("ada,matmul,2,3,5")


def test_the_notebook_cannot_read_the_graders_files(tmp_path):
    """Run as root, the grader runs the notebook as nobody: a file only root may read stays
    closed to it (skipped, and reported as skipped, when the tests do not run as root)."""
    import os

    if os.geteuid() != 0:
        pytest.skip("the notebook runs as the grader's own user unless the grader is root")
    secret = tmp_path / "secret.txt"
    secret.write_text("42")
    secret.chmod(0o600)
    code = (f"try:\n    LEAK = open({str(secret)!r}).read()\nexcept OSError as e:\n"
            f"    LEAK = type(e).__name__\nimport os\nUID = os.getuid()\n")
    from ioattn.teach.referee import Submission

    with Submission([(1, code)]) as sub:
        sub.start()
        from ioattn.teach.jail import UID_BASE, UID_SPAN

        leak, uid = sub.value("LEAK"), sub.value("UID")
        assert leak in ("PermissionError", "FileNotFoundError")   # no such file in namespaces
        assert UID_BASE <= uid < UID_BASE + UID_SPAN
