"""Grade submitted notebooks: each in a process of its own, checked by the grader's process.

For each submission :func:`grade`

1. reads the notebook and the assignment, student and course its metadata records, and refuses
   one whose record disagrees with the instructor's (``--student``, ``--course``);
2. starts the notebook's code cells in a process of its own (:class:`~ioattn.teach.referee.
   Submission`), with time and memory limits, never given the grading seed or any data;
3. runs each question's check in this process: the checks ask the notebook's process for values
   and for runs of its tile programs, whose every request a machine here carries out on hidden
   data drawn from a fresh seed (``seed=`` repeats a grading);
4. reports each question's score and, for one that lost points, the reasons, with the errors the
   notebook's cells raised.

A question whose call ran out of time, or during which the notebook's process ended, gets 0
with the reason; the questions before it keep their scores and the ones after it start the
notebook again.
"""

from __future__ import annotations

import secrets
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .answers import Unsendable
from .assignments import Context, get
from .judge import GradingFailure, reason
from .referee import MEMORY, NOTEBOOK_TIME, Crashed, Submission, TimedOut, isolation, protect
from .report import QuestionScore, Report
from .variants import check_course, check_student_id

__all__ = ["CHECK_TAG", "find_submissions", "grade", "grade_many", "notebook_record"]

#: Cells with this tag are the student's own checks: the grader does not run them.
CHECK_TAG = "check"


def notebook_record(nb) -> dict:
    """What a notebook made by ``ioattn assign`` records: ``{"assignment", "student",
    "course"}`` (empty for a notebook without the record)."""
    meta = nb.metadata.get("ioattn", {})
    return {k: meta[k] for k in ("assignment", "student", "course")
            if isinstance(meta, dict) and isinstance(meta.get(k), str)}


def grade(assignment: str, submission, *, student: str | None = None, seed: int | None = None,
          course: str | None = None, notebook_time: float = NOTEBOOK_TIME,
          memory: int = MEMORY) -> Report:
    """Grade one submitted notebook of ``assignment``.

    Parameters
    ----------
    assignment : str
        The assignment's name.
    submission : path
        The student's ``.ipynb``.
    student : str, optional
        Whose variant to check it against (default: the student the notebook records). Given,
        it must agree with the record.
    seed : int, optional
        The grading seed (default: a fresh random one, reported).
    course : str, optional
        The course the variants were made for (default: the notebook's record). Given, it must
        agree with the record.
    notebook_time : float
        Seconds the notebook's cells may take to run (each call has its own limit too).
    memory : int
        Bytes of memory the notebook's process may use.

    Returns
    -------
    Report
        Per-question scores and reasons; ``report.error`` says why, if the notebook could not be
        graded at all (then no question has a score).
    """
    spec = get(assignment)
    path = Path(submission)
    seed = secrets.randbits(63) if seed is None else int(seed)
    report = Report(assignment, student or "?", str(path), seed, course or "",
                    [QuestionScore(q.name, q.title, q.points, None, q.manual)
                     for q in spec.questions])
    try:
        nb = _read(path)
        record = notebook_record(nb)
        who, course = _identify(record, assignment, student, course, path)
    except (OSError, ValueError) as exc:
        report.error = str(exc)
        return report
    report.student, report.course, report.declared = who, course, student is None
    report.isolation = isolation()
    protect()
    variant = spec.variant(who, course)
    cells = [(n, c.source) for n, c in enumerate(nb.cells, 1)
             if c.cell_type == "code" and CHECK_TAG not in c.get("metadata", {}).get("tags", [])]
    with Submission(cells, notebook_time=notebook_time, memory=memory) as sub:
        try:
            sub.start()
        except (Crashed, TimedOut) as exc:
            report.error = f"the notebook's cells did not finish: {exc}"
            return report
        report.isolation = isolation(sub.confined)
        report.cell_errors = [f"cell {e.get('cell')}: {e.get('error')}" for e in sub.cell_errors]
        for q in report.questions:
            if q.manual:
                continue
            rng = np.random.default_rng([seed, zlib.crc32(q.name.encode())])
            ctx = Context(variant, False, rng)
            q.score = 0
            try:
                q.summary = spec.check(q.name, sub, ctx)
                q.score = q.points
            except GradingFailure as f:
                q.reasons = [reason(k, d) for k, d in f.reasons]
                q.score = round(f.score * q.points, 6)
            except TimedOut as exc:
                q.reasons = [reason("time", str(exc))]
            except Crashed as exc:
                q.reasons = [reason("crash", str(exc))]
            except Unsendable as exc:
                q.reasons = [reason("wrong", str(exc))]
        report.restarts = max(0, sub.starts - 1)
        report.isolation = isolation(sub.confined)
    return report


def _read(path: Path):
    import nbformat

    if not path.is_file():
        raise FileNotFoundError(f"no submission at {path}")
    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:                 # noqa: BLE001 (any unreadable file)
        raise ValueError(f"{path} is not a notebook ({type(exc).__name__}: {exc})") from None


def _identify(record: dict, assignment: str, student, course, path: Path) -> tuple[str, str]:
    """The student and course to grade as, checked against the notebook's record."""
    if record.get("assignment", assignment) != assignment:
        raise ValueError(f"{path} is the notebook of assignment {record['assignment']!r}, not "
                         f"{assignment!r}")
    if student is None:
        if "student" not in record:
            raise ValueError(f"{path} does not record whose it is: pass --student")
        student = record["student"]
    student = check_student_id(student)
    if "student" in record and record["student"] != student:
        raise ValueError(f"{path} was made for student {record['student']!r}, not {student!r}: "
                         "check the file name or --student")
    if course is None:
        course = record.get("course", "")
    course = check_course(course)
    if "course" in record and record["course"] != course:
        raise ValueError(f"{path} was made for course {record['course']!r}, not {course!r}: "
                         "check --course")
    return student, course


def find_submissions(folder, assignment: str) -> tuple[list, list]:
    """``(pairs, problems)``: ``(student, path)`` for every submission in ``folder``, and a line
    for each file that could not be matched to one student.

    A submission is ``<student>.ipynb`` in ``folder`` or ``<student>/<assignment>.ipynb`` one
    level down (as ``ioattn assign`` lays them out). Names a learning-management system gives
    (``ada (1).ipynb``, ``ada_late.ipynb``, ``ada-matmul.ipynb``) are matched by the student
    the notebook records. A student with two submissions is a problem, not a silent choice.
    """
    import nbformat

    folder = Path(folder)
    candidates = sorted(set(folder.glob("*.ipynb")) | set(folder.glob(f"*/{assignment}.ipynb"))
                        | set(folder.glob("*/*.ipynb")))
    found: dict[str, list] = {}
    problems = []
    for p in candidates:
        try:
            record = notebook_record(nbformat.read(p, as_version=4))
        except Exception as exc:             # noqa: BLE001
            problems.append(f"{p}: not a notebook ({type(exc).__name__})")
            continue
        who = record.get("student")
        if record.get("assignment", assignment) != assignment:
            problems.append(f"{p}: the notebook of assignment {record['assignment']!r}")
            continue
        if who is None:
            name = p.parent.name if p.parent != folder else p.stem
            try:
                who = check_student_id(name)
            except ValueError:
                problems.append(f"{p}: records no student, and its name is not a student id")
                continue
        found.setdefault(who, []).append(p)
    pairs = []
    for who, paths in sorted(found.items()):
        if len(paths) > 1:
            problems.append(f"{who}: {len(paths)} submissions ({', '.join(map(str, paths))}); "
                            "keep one and grade again")
            continue
        pairs.append((who, paths[0]))
    return pairs, problems


def grade_many(assignment: str, submissions, *, jobs: int = 1, seed: int | None = None,
               course: str | None = None, notebook_time: float = NOTEBOOK_TIME,
               memory: int = MEMORY) -> list[Report]:
    """Grade ``(student, path)`` pairs, ``jobs`` at a time; the reports in the same order."""

    def one(pair):
        student, path = pair
        return grade(assignment, path, student=student, seed=seed, course=course,
                     notebook_time=notebook_time, memory=memory)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, list(submissions)))
