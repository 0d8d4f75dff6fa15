"""check(), the grading session, reports, and the command line's errors."""

from __future__ import annotations

import json

import pytest

import ioattn
import ioattn.pebble
import ioattn.teach as teach
from ioattn.cli import main
from ioattn.teach import session
from ioattn.teach.judge import GradingFailure
from ioattn.teach.report import QuestionScore, Report, csv_table, kind_of


def test_check_names_what_is_wrong_with_its_arguments():
    with pytest.raises(ValueError, match="unknown assignment 'matmull'"):
        teach.check("matmull", "q1")
    with pytest.raises(ValueError, match="no question 'q9'; its questions: q1, q2"):
        teach.check("matmul", "q9")
    with pytest.raises(ValueError, match="graded by a person"):
        teach.check("crossover", "q3")


def test_a_missing_answer_is_named():
    with pytest.raises(GradingFailure, match="tiled_matmul is not defined"):
        teach.check("matmul", "q1", student="ada", tiled_matmul=None)
    with pytest.raises(GradingFailure, match="should be a function"):
        teach.check("matmul", "q1", student="ada", tiled_matmul=3)


def test_a_session_checks_its_own_assignment_only():
    with session.scoped("flash", "ada", seed=1), pytest.raises(GradingFailure,
                                                                match="graded as 'flash'"):
        teach.check("matmul", "q1", tiled_matmul=lambda *a: None)


def test_switched_off_functions_raise_for_the_submission_and_work_for_the_grader():
    graph = ioattn.pebble.matmul_graph(1, 2, 1)
    with session.scoped("pebbling", "ada", seed=1) as s:
        with pytest.raises(session.SwitchedOff, match="min_io is switched off"):
            ioattn.pebble.min_io(graph, 3)
        assert s.blocked and "min_io" in s.blocked[0]
        with session.privileged():
            assert ioattn.pebble.min_io(graph, 3).io > 0
        with pytest.raises(GradingFailure, match="switched off"):
            teach.check("pebbling", "q1", MOVES=[])
    assert ioattn.pebble.min_io(graph, 3).io > 0             # restored after the session
    assert ioattn.pebble.search.min_io.__module__ == "ioattn.pebble.search"


def test_a_second_session_is_refused():
    with session.scoped("matmul", "ada", seed=1), pytest.raises(RuntimeError):
        with session.scoped("matmul", "bob", seed=1):
            pass


def test_public_checks_do_not_reveal_the_optimum():
    moves = [("read", "a")]
    with pytest.raises(GradingFailure, match="not a legal game|not complete"):
        teach.check("pebbling", "q1", student="ada", MOVES=moves)


def test_report_formats():
    r = Report("matmul", "ada", "ada.ipynb", 7, questions=[
        QuestionScore("q1", "correct", 2, 2.0),
        QuestionScore("q2", "budget", 3, 0.0, reasons=[teach.KINDS["budget"] + ": moved 9"]),
        QuestionScore("q3", "essay", 2, None, manual=True)])
    assert (r.score, r.possible) == (2.0, 5)
    text = r.text()
    assert "q1  correct  2/2" in text and "q3  essay    graded by hand" in text
    assert "total 2/5 (+2 graded by hand)" in text
    d = json.loads(json.dumps(r.to_dict()))
    assert d["questions"][1]["kinds"] == ["budget"] and d["score"] == 2.0
    rows = csv_table([r]).splitlines()
    assert rows[0].startswith("student,assignment,q1,q2,q3,total,possible")
    assert rows[1].startswith("ada,matmul,2,0,,2,5,7")
    assert kind_of("Something else: x") == "error"


@pytest.mark.parametrize("argv, message", [
    (["grade", "matmull", "x.ipynb"], "unknown assignment 'matmull'"),
    (["grade", "matmul", "x.ipynb", "--student", "a b"], "invalid student id"),
    (["grade", "matmul", "x.ipynb", "--seed", "-1"], "seed must be between"),
    (["grade", "matmul", "x.ipynb", "--jobs", "0"], "expected a positive integer"),
    (["assign", "pebble"], "unknown assignment 'pebble'"),
])
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_missing_files_exit_2_with_a_message(tmp_path, capsys):
    assert main(["grade", "matmul", str(tmp_path / "none.ipynb")]) == 2
    assert "no submission at" in capsys.readouterr().err
    assert main(["grade", "matmul", str(tmp_path), "--student", "ada"]) == 2
    assert "a folder's notebooks are named after their students" in capsys.readouterr().err
    assert main(["grade", "matmul", str(tmp_path)]) == 2
    assert "no notebooks in" in capsys.readouterr().err
    roster = tmp_path / "roster.txt"
    roster.write_text("ada\n# a comment\nnot valid\n")
    assert main(["assign", "matmul", "--roster", str(roster), "--out", str(tmp_path)]) == 2
    assert "roster.txt, line 3: invalid student id 'not valid'" in capsys.readouterr().err
    assert main(["assign", "matmul", "--masters", str(tmp_path / "nowhere")]) == 2
    assert "no master notebooks at" in capsys.readouterr().err


def test_help_lists_the_new_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "assign" in out and "grade" in out and "sweep" in out


def test_a_count_below_the_lower_bound_means_the_output_came_from_outside_the_model():
    """The last line of defence: whatever hid the values, no algorithm in the model moves fewer
    entries than the lower bound."""
    import numpy as np

    from ioattn.teach.harness import call
    from ioattn.teach.judge import judge_run
    from ioattn.teach.memory import Referee

    ref = Referee(10, owner="f")
    A, C = ref.load("A", np.ones((2, 2))), ref.output("C", (2, 2))

    def copy(mem, A, C):
        t = mem.read(A)
        mem.write(C, t)
        mem.free(t)

    done = call(copy, (ref.memory, A, C), name="copy", referee=ref)
    assert judge_run(done, ref, [(C, {"expected": np.ones((2, 2))})], lower=8).total == 8
    with pytest.raises(GradingFailure) as err:
        judge_run(done, ref, [(C, {"expected": np.ones((2, 2))})], lower=9)
    assert err.value.reasons[0][0] == "outside" and "fewer than the 9" in str(err.value)
