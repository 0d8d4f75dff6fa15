"""The check a student runs in their notebook: :func:`check`, on their own example data.

It runs the same code as the grader, in the student's own process, with their variant's example
data (which is in their notebook anyway). The grade comes from ``ioattn grade``, which runs the
notebook in a process of its own against hidden data (:mod:`ioattn.teach.referee`).
"""

from __future__ import annotations

import numpy as np

from .answers import LocalAnswers
from .assignments import Context, get
from .variants import student_seed

__all__ = ["check"]


def check(assignment: str, question: str, /, *, student: str, course: str = "",
          **answers) -> str:
    """Check a notebook's answers to one question on the student's own example data.

    Parameters
    ----------
    assignment, question : str
        E.g. ``"matmul"``, ``"q1"``.
    student : str
        Whose variant (the notebook's ``STUDENT``).
    course : str
        The course the variants were made for (the notebook's ``COURSE``).
    **answers
        The notebook's answers by name, e.g. ``tiled_matmul=tiled_matmul``.

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
    variant = spec.variant(student, course)
    ctx = Context(variant, True, np.random.default_rng(student_seed(assignment, student, course)))
    return spec.check(question, LocalAnswers(answers), ctx)
