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

from ..judge import fail
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


class BudgetAssignment(Assignment):
    """An assignment asking for one function that runs through the memory model, graded on
    correctness (``q1``) and on an I/O budget (``q2``).

    Subclasses set :attr:`function` (the name the notebook defines) and implement :meth:`grid`
    (the ``(N, d, M)`` a variant is drawn from), :meth:`budget`, :meth:`_run` (one graded run:
    returns the recounted ``IOCount`` or fails) and :meth:`_awkward` (hidden sizes of no special
    shape). The hidden tests also run the function on fresh inputs and on sizes the student
    never saw.
    """

    function: ClassVar[str]

    def grid(self) -> tuple:
        raise NotImplementedError

    def budget(self, N: int, d: int, M: int) -> int:
        raise NotImplementedError

    def _run(self, fn, p: dict, ctx: Context, main: bool):
        raise NotImplementedError

    @staticmethod
    def _awkward(rng) -> dict:
        raise NotImplementedError

    def parameters(self, rng):
        grid = self.grid()
        N, d, M = grid[int(rng.integers(len(grid)))]
        return {"N": N, "d": d, "M": M, "SEED": int(rng.integers(2 ** 31))}

    def check(self, question, answers, ctx: Context) -> str:
        fn = answers[self.function]
        p = ctx.params
        if question == "q1":
            self._run(fn, p, ctx, main=True)
            if not ctx.public:
                self._run(fn, self._awkward(ctx.rng), ctx, main=False)
            return f"{self.function} is correct" + ("" if ctx.public else " (hidden inputs too)")
        notes = [self._within(fn, p, ctx, main=True)]
        if not ctx.public:
            notes.append(self._within(fn, self.parameters(ctx.rng), ctx, main=False))
        return "; ".join(notes)

    def _within(self, fn, p, ctx, main) -> str:
        io = self._run(fn, p, ctx, main)
        N, d, M = p["N"], p["d"], p["M"]
        cap = self.budget(N, d, M)
        if io.total > cap:
            fail("budget", f"{self.function} moved {io.total:,} entries for N = {N}, d = {d}, "
                 f"M = {M}; the budget is {cap:,}")
        return f"{io.total:,} entries for N = {N}, d = {d}, M = {M} (budget {cap:,})"


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
