"""What an assignment is to the grader: questions, a variant rule, and the checks.

Each assignment module defines one :class:`Assignment` subclass, registered by name. The master
notebook in ``book/assignments/masters/<name>.md`` holds the statement, the starter code, the
reference solution and the tests; its tests call :func:`ioattn.teach.check`, which finds the
assignment here and runs the question's check against the student's variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..variants import Variant, check_course, check_student_id, student_rng

__all__ = ["Assignment", "Context", "Question", "REGISTRY", "get", "register"]


@dataclass(frozen=True)
class Question:
    """One graded question: its otter name (``"q1"``), a title, its points, and whether a person
    grades it (``manual``)."""

    name: str
    title: str
    points: int
    manual: bool = False


@dataclass(frozen=True)
class Context:
    """Where a check runs.

    Attributes
    ----------
    variant : Variant
        The student's parameters.
    public : bool
        ``True`` for the checks students run themselves (the notebook's example data, no
        hidden instances); ``False`` when grading.
    rng : numpy.random.Generator
        Draws the hidden data and the hidden instances (from the grading seed).
    """

    variant: Variant
    public: bool
    rng: np.random.Generator

    @property
    def params(self) -> dict:
        return self.variant.params


class Assignment:
    """Base class: set the class attributes and implement :meth:`parameters` and :meth:`check`.

    Attributes
    ----------
    name, title : str
        The short name (``ioattn grade NAME``) and the title of the statement page.
    questions : tuple of Question
        In order.
    switched_off : dict
        ``"module.function"`` -> advice, for functions the submission may not call while graded.
    answers : dict
        Question name -> the names, in the notebook, that its check takes.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    questions: ClassVar[tuple]
    switched_off: ClassVar[dict] = {}
    answers: ClassVar[dict] = {}

    def parameters(self, rng: np.random.Generator) -> dict:
        """The public parameters of one variant, drawn from ``rng``."""
        raise NotImplementedError

    def check(self, question: str, answers: dict, ctx: Context) -> str:
        """Check ``answers`` for ``question``; return a one-line summary or raise
        :class:`~ioattn.teach.judge.GradingFailure`."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def variant(self, student: str, course: str = "") -> Variant:
        """The variant of ``student`` (the same for the same id and course, every time)."""
        student, course = check_student_id(student), check_course(course)
        params = self.parameters(student_rng(self.name, student, course))
        return Variant(self.name, student, course, params)

    def question(self, name: str) -> Question:
        """The question called ``name``; a clear error listing the questions otherwise."""
        for q in self.questions:
            if q.name == name:
                return q
        known = ", ".join(q.name for q in self.questions)
        raise ValueError(f"assignment {self.name!r} has no question {name!r}; its questions: "
                         f"{known}")

    @property
    def points(self) -> int:
        """Points of the auto-graded questions."""
        return sum(q.points for q in self.questions if not q.manual)


REGISTRY: dict[str, Assignment] = {}


def register(cls: type[Assignment]) -> type[Assignment]:
    """Class decorator: add one instance of ``cls`` to :data:`REGISTRY`."""
    REGISTRY[cls.name] = cls()
    return cls


def get(name: str) -> Assignment:
    """The assignment called ``name``; a clear error listing the known ones otherwise."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        known = ", ".join(REGISTRY)
        raise ValueError(f"unknown assignment {name!r}; the assignments are: {known}") from None
