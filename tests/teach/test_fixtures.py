"""Every cheating fixture fails for the reason it states; the reference solutions pass.

The fixtures (``fixtures/<assignment>/*.py``) are notebook cells written the way a student might
cheat (or, for a few, fail honestly); each docstring names the kind of failure it must get
(``expect:``) and, if not all of them, the questions it applies to (``questions:``; the others
must pass). They run here as a graded notebook's cells would, inside a grading session, and the
hidden checks are called directly; ``test_grade.py`` runs a few through ``ioattn grade`` too.
"""

from __future__ import annotations

import pytest

import ioattn.teach as teach
from ioattn.teach import session
from ioattn.teach.judge import GradingFailure

from .helpers import fixture_meta, fixtures, reference_namespace, run_fixture

FIXTURES = fixtures()


def test_there_is_a_fixture_for_every_way_to_cheat():
    kinds = {fixture_meta(path)[0] for _, path in FIXTURES}
    assert {"uncounted", "counters", "cache", "outside", "hard-coded", "library",
            "blocked"} <= kinds
    assert {a for a, _ in FIXTURES} == set(teach.assignments())


@pytest.mark.parametrize("assignment, path", FIXTURES,
                         ids=[f"{a}-{p.stem}" for a, p in FIXTURES])
def test_fixture_fails_for_its_stated_reason(assignment, path):
    expect, questions = fixture_meta(path)
    results = run_fixture(assignment, path, "ada", seed=11)
    for name, result in results.items():
        if questions is None or name in questions:
            assert isinstance(result, GradingFailure), f"{name} passed: {result}"
            kind, detail = result.reasons[0]
            assert kind == expect, f"{name} failed as {kind!r}, not {expect!r}: {detail}"
            assert str(result).startswith(teach.KINDS[expect] + ": ")
        else:
            assert isinstance(result, str), f"{name} should pass: {result}"


@pytest.mark.parametrize("assignment", teach.assignments())
def test_reference_solution_passes_every_check(assignment):
    student = "example" if assignment == "pebbling" else "grace"
    ns = reference_namespace(assignment, student)
    spec = teach.get(assignment)
    for q in (q for q in spec.questions if not q.manual):
        answers = {n: ns[n] for n in spec.answers[q.name]}
        assert teach.check(assignment, q.name, student=student, **answers)   # public
        with session.scoped(assignment, student, seed=3):
            assert teach.check(assignment, q.name, **answers)                 # hidden


@pytest.mark.parametrize("assignment, function", [
    ("matmul", "tiled_matmul"), ("flash", "flash_attention"), ("backward", "flash_backward"),
    ("crossover", "crossover")])
def test_a_reference_function_passes_another_students_variant(assignment, function):
    """A function is graded on the student's own sizes and on hidden ones: the reference's
    works for everyone's."""
    ns = reference_namespace(assignment, "grace")
    spec = teach.get(assignment)
    with session.scoped(assignment, "alan", seed=5):
        for q in spec.questions:
            if spec.answers.get(q.name) == (function,):
                assert teach.check(assignment, q.name, **{function: ns[function]})


def test_a_reference_fails_another_students_pebbling():
    """Pebbling answers are data for one graph: the example's do not fit Ada's."""
    ns = reference_namespace("pebbling", "example")
    with session.scoped("pebbling", "ada", seed=5), pytest.raises(GradingFailure) as err:
        teach.check("pebbling", "q1", MOVES=ns["MOVES"])
    assert err.value.reasons[0][0] == "wrong"
