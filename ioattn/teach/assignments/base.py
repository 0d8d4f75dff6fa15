"""What an assignment is to the grader: questions, a variant rule, and the checks.

Each assignment module defines one :class:`Assignment` subclass, registered by name. Its student
notebook (``ioattn/teach/notebooks/<name>.md``) holds the statement, the starter code and the
student's own checks, which call :func:`ioattn.teach.check`; ``ioattn grade`` runs the same
checks in the grader's process, on hidden data, through :mod:`ioattn.teach.referee`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..judge import GradingFailure, fail, judge_outputs
from ..variants import Variant, check_course, check_student_id, student_rng

__all__ = ["Assignment", "Context", "Question", "REGISTRY", "get", "register"]


@dataclass(frozen=True)
class Question:
    """One graded question: its name (``"q1"``), a title, its points, and whether a person
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
    answers : dict
        Question name -> the names, in the notebook, that its check takes.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    questions: ClassVar[tuple]
    answers: ClassVar[dict] = {}

    def parameters(self, rng: np.random.Generator) -> dict:
        """The public parameters of one variant, drawn from ``rng``."""
        raise NotImplementedError

    def check(self, question: str, answers, ctx: Context) -> str:
        """Check the answers to ``question`` (an :class:`~ioattn.teach.answers.Answers`); return
        a one-line summary or raise :class:`~ioattn.teach.judge.GradingFailure` (whose
        ``score`` is the fraction of the points still earned)."""
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
    """An assignment asking for one tile program (:mod:`ioattn.tiles`), graded on correctness
    (``q1``) and on an I/O budget (``q2``).

    Subclasses set :attr:`function` (the name the notebook defines) and implement
    :meth:`parameters`, :meth:`budget`, :meth:`problem` (the inputs, the output shapes and the
    expected outputs of one instance) and :meth:`hidden` (sizes the student never saw). When
    grading, both questions also run the program on hidden data of the student's own sizes and
    on hidden sizes.
    """

    function: ClassVar[str]
    #: Seconds one run of the program may take when grading.
    time_limit: ClassVar[float] = 120.0

    def budget(self, p: dict) -> int:
        raise NotImplementedError

    def problem(self, p: dict, rng) -> tuple[dict, dict, dict]:
        """``(inputs, output shapes, expected outputs)`` for parameters ``p``: the example data
        of ``p["SEED"]`` when ``rng`` is ``None``, else data drawn from ``rng``."""
        raise NotImplementedError

    def hidden(self, p: dict, rng, question: str) -> dict:
        """Parameters of a hidden instance for the student of ``p``: for ``q1`` (correctness)
        sizes of no special shape, for ``q2`` (the budget) another instance of the student's
        kind."""
        raise NotImplementedError

    def describe(self, p: dict) -> str:
        """The instance in words, for messages."""
        return ", ".join(f"{k} = {v}" for k, v in p.items() if k != "SEED")

    def check(self, question, answers, ctx: Context) -> str:
        p = ctx.params
        runs = [(p, None if ctx.public else ctx.rng, "your sizes")]
        if not ctx.public:
            runs.append((self.hidden(p, ctx.rng, question), ctx.rng, "hidden sizes"))
        notes = []
        for params, rng, label in runs:
            inputs, outputs, expected = self.problem(params, rng)
            where = f"{label}{'' if rng is None else ', hidden data'}: {self.describe(params)}"
            run = answers.run(self.function, params["M"], inputs, outputs,
                              args=self.extra_args(params), time_limit=self.time_limit)
            io = self.judge(run, expected, where, params)
            if question == "q1":
                notes.append(f"right on {label}")
                continue
            cap = self.budget(params)
            if io.total > cap:
                fail("budget", f"{self.function} moved {io.total:,} entries ({where}); the "
                     f"budget is {cap:,}{self.budget_hint(params)}")
            notes.append(f"{io.total:,} entries on {label} (budget {cap:,})")
        return f"{self.function}: " + "; ".join(notes)

    def judge(self, run, expected: dict, where: str, p: dict):
        """:func:`~ioattn.teach.judge.judge_outputs`, saying what to fix: with several outputs,
        every wrong one and which are right; and each reason followed by :meth:`hint`."""
        try:
            if run.error is not None or len(expected) == 1:
                return judge_outputs(run, expected, where=where)
            right, wrong = [], []
            for name, want in expected.items():
                try:
                    judge_outputs(run, {name: want}, where=where)
                    right.append(name)
                except GradingFailure as failure:
                    wrong += failure.reasons
            if wrong:
                if right:
                    verb = "is" if len(right) == 1 else "are"
                    wrong[-1] = (wrong[-1][0], f"{wrong[-1][1]}; {' and '.join(right)} {verb} "
                                 "right")
                raise GradingFailure(wrong)
            return run.machine.memory.io
        except GradingFailure as failure:
            raise GradingFailure([(kind, detail + self.hint(p, kind, detail))
                                  for kind, detail in failure.reasons], failure.score) from None

    def hint(self, p: dict, kind: str, detail: str) -> str:
        """Text appended to a reason a run failed (``kind`` ``"error"``, ``"time"`` or
        ``"wrong"``): what the variant asks that the program may have missed (none by
        default)."""
        return ""

    def budget_hint(self, p: dict) -> str:
        """Text appended to an over-budget message: what the budget assumes (none by
        default)."""
        return ""

    def extra_args(self, p: dict) -> tuple:
        """Plain arguments passed after the arrays (none by default)."""
        return ()


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
