r"""A graded submission: per-question scores and reasons, as text, JSON or a CSV row.

Everything a report holds may come from a student (an exception's message, a file's name, a
student id), so every way out is made safe: :func:`printable` takes control characters (ANSI
escapes, carriage returns, bidirectional overrides) and lone surrogates out of every string the
text and the JSON show, and :func:`csv_cell` also defuses a cell a spreadsheet would run as a
formula (one that opens with ``= + - @``, a tab or a carriage return gets a leading ``'``, as
OWASP advises against CSV injection).

>>> printable("ok\x1b[2J\x1b]0;owned\x07 done")
'ok[2J]0;owned done'
>>> csv_cell('=HYPERLINK("http://example.org","open")')
'\'=HYPERLINK("http://example.org","open")'
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import asdict, dataclass, field, fields

from .judge import KINDS

__all__ = ["QuestionScore", "Report", "csv_cell", "csv_table", "kind_of", "printable"]

_HEADLINES = {headline: kind for kind, headline in KINDS.items()}
#: Control characters (C0 but newline, DEL, C1), bidirectional controls and lone surrogates.
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                     "\u2066-\u2069\ud800-\udfff]")
#: What a spreadsheet reads as the start of a formula.
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def printable(text) -> str:
    """``text`` as a string safe to print on a terminal: without control characters (but
    newlines), bidirectional controls and lone surrogates."""
    return _UNSAFE.sub("", str(text))


def csv_cell(value) -> str:
    """``value`` as a spreadsheet cell that is never a formula: :func:`printable` on one line,
    with a leading ``'`` when it would open like a formula."""
    text = str(value)
    if text.startswith(_FORMULA):
        text = "'" + text
    return printable(text.replace("\r", " ").replace("\n", " "))


def _clean(data):
    """Plain data with every string :func:`printable` (for ``--json``)."""
    if isinstance(data, str):
        return printable(data)
    if isinstance(data, dict):
        return {printable(k): _clean(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_clean(v) for v in data]
    return data


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
        The notebook graded: its path as handed in (the grade came from that file).
    seed : int or None
        The extra seed mixed into the hidden data (``--seed``), if any.
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
    key : str
        The fingerprint of the grading key the hidden data came from (not the key).
    notes : list of str
        What the instructor should know that is not a score: a record that names another
        student than the file's path, a student who handed in more than one file.
    flags : list of str
        What in the notebook's code can hide code or reach past its functions
        (:func:`ioattn.teach.flags.flags`), by cell and line: for the instructor to read, not a
        mark.
    """

    assignment: str
    student: str
    submission: str
    seed: int | None = None
    course: str = ""
    questions: list = field(default_factory=list)
    error: str | None = None
    declared: bool = False
    cell_errors: list = field(default_factory=list)
    isolation: str = ""
    restarts: int = 0
    key: str = ""
    notes: list = field(default_factory=list)
    flags: list = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict) -> Report:
        """The report that :meth:`to_dict` made ``data`` of."""
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in names and k != "questions"}
        qnames = {f.name for f in fields(QuestionScore)}
        questions = [QuestionScore(**{k: v for k, v in q.items() if k in qnames})
                     for q in data.get("questions", [])]
        return cls(**kept, questions=questions)

    @property
    def score(self) -> float:
        """Points earned on the auto-graded questions."""
        return sum(q.score or 0 for q in self.questions if not q.manual)

    @property
    def possible(self) -> float:
        """Points of the auto-graded questions."""
        return sum(q.points for q in self.questions if not q.manual)

    def to_dict(self) -> dict:
        """The report as plain data (what ``ioattn grade --json`` prints), every string
        :func:`printable`."""
        d = asdict(self)
        d["score"], d["possible"] = self.score, self.possible
        for q, qd in zip(self.questions, d["questions"]):
            qd["kinds"] = q.kinds
        return _clean(d)

    def text(self) -> str:
        """The report as lines of text (what ``ioattn grade`` prints), :func:`printable`."""
        return printable(self._text())

    def _text(self) -> str:
        who = f"{self.student} (the id the notebook records)" if self.declared else self.student
        course = f", course {self.course}" if self.course else ""
        how = [f"grading key {self.key}" if self.key else "",
               "" if self.seed is None else f"seed {self.seed}"]
        how = "; ".join(h for h in how if h)
        lines = [f"{self.assignment}: {who}{course}  (file {self.submission}"
                 f"{'; ' + how if how else ''})"]
        for note in self.notes:
            lines.append(f"  note: {note}")
        for flag in self.flags:
            lines.append(f"  flag: {flag}")
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
    """One row per report: student, each question's score, total, possible, the file graded,
    the grading key's fingerprint and the seed, an error, and the first reason of each question
    that lost points; every cell a :func:`csv_cell`."""
    reports = list(reports)
    names = [q.name for q in reports[0].questions] if reports else []
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["student", "assignment", *names, "total", "possible", "submission", "key",
                "seed", "error", "reasons"])
    for r in reports:
        by_name = {q.name: q for q in r.questions}
        scores = ["" if by_name[n].manual or by_name[n].score is None
                  else _num(by_name[n].score) for n in names]
        reasons = " | ".join(f"{q.name}: {q.reasons[0].splitlines()[0]}"
                             for q in r.questions if q.reasons)
        total = "" if r.error else _num(r.score)
        seed = "" if r.seed is None else r.seed
        w.writerow([csv_cell(c) for c in (r.student, r.assignment, *scores, total,
                                          _num(r.possible), r.submission, r.key, seed,
                                          r.error or "", reasons)])
    return out.getvalue()
