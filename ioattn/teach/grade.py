"""Grade submitted notebooks locally: otter-grader's Otter Run, no Docker, one process each.

For each submission :func:`grade`

1. builds the assignment's autograder from its master notebook (:func:`ioattn.teach.build`), or
   reuses it;
2. puts one cell before the submission's own, which starts the grading session
   (:mod:`ioattn.teach.session`): the student's id, taken from the instructor and never from the
   notebook, and a fresh random seed for the hidden data (``seed=`` repeats a grading);
3. runs Otter Run on it in a separate process (:mod:`ioattn.teach.worker`), with a time limit;
4. turns otter's results into a :class:`~ioattn.teach.report.Report`: each question's score and,
   for each one that lost points, the reasons the hidden tests gave.

The submission runs with the grader's own rights, in its own process: see
:mod:`ioattn.teach.memory` for what that does and does not protect.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .assignments import get
from .build import build, declared_student
from .report import QuestionScore, Report
from .variants import check_student_id

__all__ = ["find_submissions", "grade", "grade_many", "SESSION_TAG"]

#: Tag of the cell the grader puts first; a submission's own cells with this tag are dropped.
SESSION_TAG = "ioattn-grader"
#: Seconds a submission may run in all, by default.
TIMEOUT = 900


def grade(assignment: str, submission, *, student: str | None = None, seed: int | None = None,
          course: str = "", out=None, masters=None, timeout: float = TIMEOUT,
          built=None) -> Report:
    """Grade one submitted notebook of ``assignment``.

    Parameters
    ----------
    assignment : str
        The assignment's name.
    submission : path
        The student's ``.ipynb``.
    student : str, optional
        Whose variant to check it against. Instructors always give it; without it, the id the
        notebook declares is used (a student checking their own work).
    seed : int, optional
        The grading seed (default: a fresh random one, reported).
    course : str
        The course name the variants were made with.
    out, masters : path, optional
        Where the autograder is built, and from which masters (see :func:`build`).
    timeout : float
        Seconds the whole notebook may run.
    built : Built, optional
        An autograder built already (for many submissions).

    Returns
    -------
    Report
        Per-question scores and reasons; ``report.error`` says why, if the notebook could not be
        graded at all.
    """
    spec = get(assignment)
    built = built or build(assignment, out, masters=masters)
    path = Path(submission)
    seed = secrets.randbits(63) if seed is None else int(seed)
    report = Report(assignment, student or "?", str(path), seed, course,
                    [QuestionScore(q.name, q.title, q.points, None if q.manual else 0, q.manual)
                     for q in spec.questions])
    try:
        nb = _read(path, assignment)
        report.declared = student is None
        report.student = student = check_student_id(student or _declared(path))
    except (OSError, ValueError) as exc:
        report.error = str(exc)
        return report
    with tempfile.TemporaryDirectory(prefix="ioattn-grade-") as tmp:
        prepared = Path(tmp) / f"{assignment}.ipynb"
        _prepare(nb, prepared, assignment, student, seed, course)
        results = Path(tmp) / "results.json"
        try:
            done = subprocess.run([sys.executable, "-m", "ioattn.teach.worker", str(prepared),
                                   str(built.autograder), str(results)], capture_output=True,
                                  text=True, timeout=timeout, cwd=tmp, check=False)
        except subprocess.TimeoutExpired:
            report.error = f"the notebook ran past the time limit of {timeout:g} s"
            return report
        if not results.is_file():
            report.error = f"the grader crashed: {done.stderr.strip()[-2000:]}"
            return report
        data = json.loads(results.read_text())
    _fill(report, data)
    return report


def _read(path: Path, assignment: str):
    import nbformat

    if not path.is_file():
        raise FileNotFoundError(f"no submission at {path}")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:                 # noqa: BLE001 (any unreadable file)
        raise ValueError(f"{path} is not a notebook ({type(exc).__name__}: {exc})") from None
    declared = nb.metadata.get("otter", {}).get("assignment_name")
    if declared != assignment:
        raise ValueError(f"{path} is the notebook of assignment {declared!r}, not {assignment!r}")
    return nb


def _declared(path: Path) -> str:
    who = declared_student(path)
    if who is None:
        raise ValueError(f"{path} does not say whose it is: pass --student")
    return who


def _prepare(nb, target: Path, assignment: str, student: str, seed: int, course: str) -> None:
    import nbformat

    nb.cells = [c for c in nb.cells if SESSION_TAG not in c.get("metadata", {}).get("tags", [])]
    source = ("import ioattn.teach.session\n"
              f"ioattn.teach.session.start({assignment!r}, {student!r}, seed={seed}, "
              f"course={course!r})")
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [SESSION_TAG]})
    nb.cells.insert(0, cell)
    for c in nb.cells:                      # otter refuses notebooks whose cells lack ids
        c.setdefault("id", secrets.token_hex(4))
    nbformat.write(nb, target)


def _fill(report: Report, data: dict) -> None:
    if data.get("error") and not data.get("questions"):
        report.error = data["error"]
        return
    for q in report.questions:
        result = data["questions"].get(q.name)
        if q.manual:
            continue
        if result is None:
            q.reasons.append("Did not run: the question's tests did not run")
            continue
        q.score = result["score"]
        for case in result["cases"]:
            if case["hidden"] and not case["passed"]:
                q.reasons += _reasons(case["message"])


def _reasons(message: str) -> list[str]:
    """The reasons in one of otter's failure messages (after the line of test code)."""
    lines = message.splitlines()
    body = "\n".join(lines[3:]) if len(lines) > 3 and lines[1].startswith("Error at") else message
    if body.startswith("GradingFailure: "):
        return body[len("GradingFailure: "):].splitlines()
    return [f"Did not run: {body.strip()}"]


def find_submissions(folder, assignment: str) -> list[tuple[str, Path]]:
    """``(student, path)`` for every submission in ``folder``: ``<student>.ipynb`` files in it,
    and ``<student>/<assignment>.ipynb`` one level down (as ``ioattn assign`` lays them out)."""
    folder = Path(folder)
    found = {p.stem: p for p in sorted(folder.glob("*.ipynb"))}
    for p in sorted(folder.glob(f"*/{assignment}.ipynb")):
        found.setdefault(p.parent.name, p)
    return sorted(found.items())


def grade_many(assignment: str, submissions, *, jobs: int = 1, seed: int | None = None,
               course: str = "", out=None, masters=None, timeout: float = TIMEOUT) -> list[Report]:
    """Grade ``(student, path)`` pairs, ``jobs`` at a time; the reports in the same order."""
    built = build(assignment, out, masters=masters)

    def one(pair):
        student, path = pair
        return grade(assignment, path, student=student, seed=seed, course=course, built=built,
                     timeout=timeout)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, list(submissions)))
