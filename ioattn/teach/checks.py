"""The entry point of every test in the assignments' notebooks: :func:`check`."""

from __future__ import annotations

import secrets
import zlib

import numpy as np

from . import session
from .assignments import Context, get
from .judge import GradingFailure
from .variants import student_seed

__all__ = ["check"]


def check(assignment: str, question: str, /, *, student: str | None = None, course: str = "",
          **answers) -> str:
    """Check a notebook's answers to one question; return a summary or raise.

    Parameters
    ----------
    assignment, question : str
        E.g. ``"matmul"``, ``"q1"``.
    student : str, optional
        Given: the public check a student runs on their own notebook, with the example data of
        ``student``'s variant. Omitted: the hidden check, for the student of the grading session
        that ``ioattn grade`` started (outside a session: a preview for the student
        ``"example"`` with fresh hidden data).
    course : str
        The course name the variants were made with (public checks only; the session has it).
    **answers
        The notebook's answers by name, e.g. ``tiled_matmul=tiled_matmul`` (``None`` for a
        name the notebook does not define).

    Returns
    -------
    str
        What was checked, in a line.

    Raises
    ------
    GradingFailure
        An ``AssertionError`` whose message gives every reason the answer fails.
    """
    spec = get(assignment)
    q = spec.question(question)
    if q.manual:
        raise ValueError(f"{assignment} {question} is graded by a person, not by check()")
    s = session.current()
    if student is not None:
        variant = spec.variant(student, course)
        ctx = Context(variant, True, np.random.default_rng(student_seed(assignment, student,
                                                                        course)))
    else:
        if s is None:
            who, seed, course = "example", secrets.randbits(63), course
        elif s.assignment != assignment:
            raise GradingFailure([("error", f"this notebook is graded as {s.assignment!r}, but "
                                   f"its tests are for {assignment!r}")])
        else:
            who, seed, course = s.student, s.seed, s.course
        ctx = Context(spec.variant(who, course), False,
                      np.random.default_rng([seed, zlib.crc32(question.encode())]))
    if s is not None and s.blocked:
        raise GradingFailure([("blocked", b) for b in s.blocked])
    with session.privileged():
        return spec.check(question, answers, ctx)
