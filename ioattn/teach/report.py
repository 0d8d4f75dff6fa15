"""A graded submission: per-question scores and reasons, as text, JSON or a CSV row."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, field

from .judge import KINDS

__all__ = ["QuestionScore", "Report", "csv_table", "kind_of"]

_HEADLINES = {headline: kind for kind, headline in KINDS.items()}


def kind_of(reason: str) -> str:
    """The kind of a reason line (``"cache"``, ``"budget"``, ...), from its headline; ``"error"``
    for a line that has none."""
    headline = reason.split(":", 1)[0]
    return _HEADLINES.get(headline, "error")


@dataclass
class QuestionScore:
    """One question's result: ``score`` out of ``points`` (``None`` for a question graded by
    hand), and the reasons it lost points, one line each."""

    name: str
    title: str
    points: float
    score: float | None
    manual: bool = False
    reasons: list = field(default_factory=list)
    summary: str = ""

    @property
    def kinds(self) -> list[str]:
        """The kind of each reason."""
        return [kind_of(r) for r in self.reasons]


@dataclass
class Report:
    """The grade of one submission.

    Attributes
    ----------
    assignment, student, course : str
    submission : str
        The notebook graded.
    seed : int
        The grading seed (hidden data and hidden instances); ``--seed`` repeats a grading.
    questions : list of QuestionScore
    error : str or None
        Why the submission could not be graded at all (then no question has a score).
    declared : bool
        Whether the student id came from the notebook's record (no ``--student``).
    cell_errors : list of str
        The errors the notebook's cells raised when the grader ran them.
    isolation : str
        How the notebook's process was kept from the grader.
    restarts : int
        How many times the notebook was started again after a crash or a timeout.
    """

    assignment: str
    student: str
    submission: str
    seed: int
    course: str = ""
    questions: list = field(default_factory=list)
    error: str | None = None
    declared: bool = False
    cell_errors: list = field(default_factory=list)
    isolation: str = ""
    restarts: int = 0

    @property
    def score(self) -> float:
        """Points earned on the auto-graded questions."""
        return sum(q.score or 0 for q in self.questions if not q.manual)

    @property
    def possible(self) -> float:
        """Points of the auto-graded questions."""
        return sum(q.points for q in self.questions if not q.manual)

    def to_dict(self) -> dict:
        """The report as plain data (what ``ioattn grade --json`` prints)."""
        d = asdict(self)
        d["score"], d["possible"] = self.score, self.possible
        for q, qd in zip(self.questions, d["questions"]):
            qd["kinds"] = q.kinds
        return d

    def text(self) -> str:
        """The report as lines of text (what ``ioattn grade`` prints)."""
        who = f"{self.student} (the id the notebook records)" if self.declared else self.student
        course = f", course {self.course}" if self.course else ""
        lines = [f"{self.assignment}: {who}{course}  ({self.submission}; grading seed "
                 f"{self.seed})"]
        if self.error:
            lines.append(f"  not graded: {self.error}")
        for e in self.cell_errors:
            lines.append(f"  error in {e}")
        if self.restarts:
            lines.append(f"  the notebook was started again {self.restarts} time(s) after a crash "
                         "or a timeout")
        width = max((len(q.title) for q in self.questions), default=0)
        for q in self.questions:
            if q.manual:
                got = "graded by hand"
            elif q.score is None:
                got = "not graded"
            else:
                got = f"{_num(q.score)}/{_num(q.points)}"
            lines.append(f"  {q.name:<4}{q.title:<{width}}  {got}")
            for r in q.reasons:
                lines += ["        " + line for line in r.splitlines()]
        manual = sum(q.points for q in self.questions if q.manual)
        extra = f" (+{_num(manual)} graded by hand)" if manual else ""
        if self.isolation:
            lines.append(f"  ran in {self.isolation}")
        if self.error:
            lines.append("  total: not graded")
        else:
            lines.append(f"  total {_num(self.score)}/{_num(self.possible)}{extra}")
        return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:g}"


def csv_table(reports) -> str:
    """One row per report: student, each question's score, total, possible, and the first
    reason of each question that lost points."""
    reports = list(reports)
    names = [q.name for q in reports[0].questions] if reports else []
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["student", "assignment", *names, "total", "possible", "seed", "error",
                "reasons"])
    for r in reports:
        by_name = {q.name: q for q in r.questions}
        scores = ["" if by_name[n].manual or by_name[n].score is None
                  else _num(by_name[n].score) for n in names]
        reasons = " | ".join(f"{q.name}: {q.reasons[0].splitlines()[0]}"
                             for q in r.questions if q.reasons)
        total = "" if r.error else _num(r.score)
        w.writerow([r.student, r.assignment, *scores, total, _num(r.possible), r.seed,
                    r.error or "", reasons])
    return out.getvalue()
