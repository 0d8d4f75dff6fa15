"""Classroom assignments that grade themselves: variants per student, a grader out of reach.

- :func:`check`: the check a student runs on their own example data, in their notebook.
- :func:`variant`: a student's parameters for an assignment (``ioattn assign``).
- :mod:`ioattn.teach.grade`: grade submitted notebooks (``ioattn grade``), each in a grading
  worker process of its own. Each notebook runs in a process of its own
  (:mod:`ioattn.teach.runner`); its tile programs (:mod:`ioattn.tiles`) run against machines in
  the grader's process (:mod:`ioattn.teach.referee`), which holds the hidden data, drawn from the
  instructor's secret grading key (:func:`ioattn.teach.variants.hidden_rng`), and decides every
  score.
- :mod:`ioattn.teach.build`: the student notebooks (``ioattn assign``).
- :mod:`ioattn.teach.similarity`: pairs of near-identical answers across a class.

>>> v = variant("matmul", "ada")
>>> sorted(v.params) == ["FORM", "M", "SEED", "k", "m", "n"]
True
"""

from .assignments import ORDER, REGISTRY, get
from .checks import check
from .judge import GradingFailure
from .report import Report
from .variants import Variant, check_student_id


def variant(assignment: str, student: str, course: str = "") -> Variant:
    """The parameters of ``student`` for ``assignment`` (the same every time)."""
    return get(assignment).variant(student, course)


def assignments() -> list[str]:
    """The assignments' names, in the book's order."""
    return [name for name in ORDER if name in REGISTRY]


__all__ = ["GradingFailure", "Report", "Variant", "assignments", "check", "check_student_id",
           "get", "variant"]
