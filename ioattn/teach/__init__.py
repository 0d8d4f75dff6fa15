"""Classroom assignments that grade themselves: variants per student, and a grader that recounts.

- :func:`check`: what the tests in an assignment's notebook call.
- :func:`variant`: a student's parameters for an assignment (``ioattn assign``).
- :mod:`ioattn.teach.grade`: grade submitted notebooks (``ioattn grade``);
  :mod:`ioattn.teach.build`: make the student notebook and the autograder from the master
  notebook with otter-grader, and each student's copy (``ioattn assign``).
- :class:`Referee` and :class:`GradedMemory`: the memory model as the grader runs it, with counts
  and values the submission cannot reach.

>>> v = variant("matmul", "ada")
>>> sorted(v.params) == ["M", "SEED", "k", "m", "n"]
True
"""

from .assignments import ORDER, REGISTRY, get
from .checks import check
from .judge import GradingFailure
from .memory import KINDS, GradedMemory, Referee
from .report import Report
from .variants import Variant, check_student_id


def variant(assignment: str, student: str, course: str = "") -> Variant:
    """The parameters of ``student`` for ``assignment`` (the same every time)."""
    return get(assignment).variant(student, course)


def assignments() -> list[str]:
    """The assignments' names, in the book's order."""
    return [name for name in ORDER if name in REGISTRY]


__all__ = ["GradedMemory", "GradingFailure", "KINDS", "Referee", "Report", "Variant", "assignments",
           "check", "check_student_id", "get", "variant"]
