"""Grade submitted notebooks: each in a process of its own, checked by the grader's process.

For each submission :func:`grade`

1. reads the notebook and the assignment, student and course its metadata records, and refuses
   one whose record disagrees with the instructor's (``--student``, ``--course``);
2. starts the notebook's code cells in a process of its own (:class:`~ioattn.teach.referee.
   Submission`), with time and memory limits, never given the grading key or any data;
3. runs each question's check in this process: the checks ask the notebook's process for values
   and for runs of its tile programs, whose every request a machine here carries out on hidden
   data of the student's own, drawn from the instructor's secret grading key
   (:func:`~ioattn.teach.variants.hidden_rng`);
4. reports each question's score and, for one that lost points, the reasons, with the errors the
   notebook's cells raised.

A call that runs out of time, or during which the notebook's process ends, fails its question
with the reason; the questions before it keep their scores, and the notebook is started again
for the next question, at most :data:`MAX_RESTARTS` times, and only while its cells have time
left: the time its cells may take (``notebook_time``, ``--timeout``) is for all its starts
together. After that, the questions left get 0 with a reason that says so. So one notebook
costs at most ``notebook_time`` for its cells plus its calls' limits, however it fails.
Whatever else goes wrong while one notebook is graded is that notebook's failure, in its
report.

:func:`grade_many` grades a class: each submission in a worker process of its own (started
afresh, never forked from this one), ``jobs`` at a time, each under a wall-clock deadline
derived from the limits (:func:`deadline`); a worker that ends or runs past it yields that
submission's failure report, and the others' reports come all the same. A grading's temporary
folders live in one folder of its own (:func:`run_folder`), removed when it ends, however it
ends; one left by a run that was killed outright is removed by the next run.

A folder of submissions is read by :func:`find_submissions`: each file is a submission of the
student its path names, whatever its metadata records.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import shutil
import signal
import tempfile
import time
from multiprocessing.connection import wait
from pathlib import Path

from .answers import Unsendable
from .assignments import Context, get
from .flags import flags
from .judge import GradingFailure, reason
from .referee import MEMORY, NOTEBOOK_TIME, Crashed, Submission, TimedOut, isolation, protect
from .report import QuestionScore, Report
from .variants import check_course, check_student_id, grading_key, hidden_rng, key_fingerprint

__all__ = ["CHECK_TAG", "MAX_RESTARTS", "deadline", "find_submissions", "grade", "grade_many",
           "notebook_record", "run_folder", "student_of"]

#: Cells with this tag are the student's own checks: the grader does not run them.
CHECK_TAG = "check"
#: How many times a notebook is started again, at most, after its process ended or ran past its
#: time (so it is started at most ``1 + MAX_RESTARTS`` times in all).
MAX_RESTARTS = 2
#: Seconds a worker has, beyond its notebook's limits, to start, grade and report.
WORKER_SLACK = 120.0
#: Calls of the notebook's code one question's check makes at most, for :func:`deadline`.
CALLS_PER_QUESTION = 12
#: The largest notebook file read (bytes): a larger one is not a submission.
MAX_NOTEBOOK_BYTES = 64 << 20
#: The prefix of a grading's own temporary folder.
RUN_PREFIX = "ioattn-grade-"


def notebook_record(nb) -> dict:
    """What a notebook made by ``ioattn assign`` records: ``{"assignment", "student",
    "course"}`` (empty for a notebook without the record)."""
    meta = nb.metadata.get("ioattn", {})
    return {k: meta[k] for k in ("assignment", "student", "course")
            if isinstance(meta, dict) and isinstance(meta.get(k), str)}


class GaveUp(Crashed):
    """The notebook's process ended (or ran past its time) too often to be started again."""


class _Bounded(Submission):
    """A :class:`Submission` started at most ``1 + restarts`` times, whose cells have
    ``notebook_time`` seconds in all, over every start."""

    def __init__(self, cells, *, restarts: int, **limits):
        super().__init__(cells, **limits)
        self.restarts = int(restarts)
        self.budget = self.notebook_time
        self.used = 0.0

    def start(self) -> None:
        if self.starts > self.restarts:
            self.close()
            raise GaveUp(f"not started again: it ended or ran past its time in each of its "
                         f"{self.starts} start(s), and the grader starts a notebook at most "
                         f"{1 + self.restarts} time(s)")
        left = self.budget - self.used
        if self.starts and left < 1.0:
            self.close()
            raise GaveUp(f"not started again: its cells have used their {self.budget:g} s "
                         "(--timeout), which all its starts share")
        self.notebook_time = left
        begun = time.monotonic()
        try:
            super().start()
        finally:
            self.used += time.monotonic() - begun


def grade(assignment: str, submission, *, student: str | None = None, seed: int | None = None,
          course: str | None = None, key: bytes | None = None,
          notebook_time: float = NOTEBOOK_TIME, memory: int = MEMORY,
          restarts: int = MAX_RESTARTS, strict: bool = True) -> Report:
    """Grade one submitted notebook of ``assignment``.

    Parameters
    ----------
    assignment : str
        The assignment's name.
    submission : path
        The student's ``.ipynb``.
    student : str, optional
        Whose variant to check it against (default: the student the notebook records).
    seed : int, optional
        Mixed into every student's hidden data (the same key and seed repeat a grading; without
        a seed, the key alone does).
    course : str, optional
        The course the variants were made for (default: the notebook's record). Given, it must
        agree with the record.
    key : bytes, optional
        The grading key (default: :func:`~ioattn.teach.variants.grading_key`, made on first
        use).
    notebook_time : float
        Seconds the notebook's cells may take to run (each call has its own limit too).
    memory : int
        Bytes of memory the notebook's process may use.
    restarts : int
        How many times the notebook may be started again after its process ended or ran past
        its time (:data:`MAX_RESTARTS`).
    strict : bool
        Whether a record naming another student than ``student`` refuses the notebook (one file
        with ``--student``); otherwise it is graded as ``student`` with a note (a file in a
        folder, whose path names the student).

    Returns
    -------
    Report
        Per-question scores and reasons; ``report.error`` says why, if the notebook could not be
        graded at all (then no question has a score).
    """
    spec = get(assignment)
    key = grading_key() if key is None else bytes(key)
    report = Report(assignment, student or "?", str(submission), seed, course or "",
                    [QuestionScore(q.name, q.title, q.points, None, q.manual)
                     for q in spec.questions], key=key_fingerprint(key))
    try:
        _grade_into(report, spec, Path(submission), student, course, key, strict,
                    {"notebook_time": notebook_time, "memory": memory}, restarts)
    except Exception as exc:                 # noqa: BLE001 (one notebook's failure is its own)
        report.error = f"the grader could not grade it: {_said(exc)}"
        for q in report.questions:
            q.score = None
    return report


def _grade_into(report: Report, spec, path: Path, student, course, key: bytes, strict: bool,
                limits: dict, restarts: int) -> None:
    """Fill ``report`` in: identify the notebook, run it, check each question."""
    try:
        nb = _read(path)
        who, course, note = _identify(notebook_record(nb), spec.name, student, course, path,
                                      strict)
    except (OSError, ValueError) as exc:
        report.error = str(exc)
        return
    report.student, report.course, report.declared = who, course, student is None
    report.notes += [note] if note else []
    report.isolation = isolation()
    protect()
    variant = spec.variant(who, course)
    cells = [(n, c.source) for n, c in enumerate(nb.cells, 1)
             if c.cell_type == "code" and CHECK_TAG not in c.get("metadata", {}).get("tags", [])]
    report.flags = flags(cells)
    with _Bounded(cells, restarts=restarts, **limits) as sub:
        try:
            sub.start()
        except (Crashed, TimedOut) as exc:
            report.error = f"the notebook's cells did not finish: {exc}"
            return
        report.isolation = isolation(sub.confined)
        report.cell_errors = [f"cell {e.get('cell')}: {e.get('error')}" for e in sub.cell_errors]
        for q in report.questions:
            if not q.manual:
                rng = hidden_rng(key, spec.name, who, q.name, course, report.seed)
                _check(q, spec, sub, Context(variant, False, rng))
        report.restarts = max(0, sub.starts - 1)
        report.isolation = isolation(sub.confined)


def _check(q: QuestionScore, spec, sub: Submission, ctx: Context) -> None:
    """Score question ``q`` of ``sub``: its points, a part of them, or 0 with the reasons."""
    q.score = 0
    try:
        q.summary = spec.check(q.name, sub, ctx)
        q.score = q.points
    except GradingFailure as f:
        q.reasons = [reason(k, d) for k, d in f.reasons]
        q.score = round(f.score * q.points, 6)
    except TimedOut as exc:
        q.reasons = [reason("time", str(exc))]
    except GaveUp as exc:
        q.reasons = [reason("crash", f"this question was not run: the notebook's process was "
                            f"{exc}")]
    except Crashed as exc:
        q.reasons = [reason("crash", str(exc))]
    except Unsendable as exc:
        q.reasons = [reason("wrong", str(exc))]
    except Exception as exc:                 # noqa: BLE001 (whatever the notebook provoked)
        sub.close()                          # its channel may be mid-message: start afresh
        q.reasons = [reason("error", f"the grader could not check this answer: {_said(exc)}")]


def _said(exc: BaseException) -> str:
    """An exception in one line of bounded length."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


def _read(path: Path):
    import nbformat

    if not path.is_file():
        raise FileNotFoundError(f"no submission at {path}")
    _not_too_large(path)
    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:                 # noqa: BLE001 (any unreadable file)
        raise ValueError(f"{path} is not a notebook ({_said(exc)})") from None


def _not_too_large(path: Path) -> None:
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"{path} is not read: {size:,} bytes, more than a notebook's "
                         f"{MAX_NOTEBOOK_BYTES:,}")


def _identify(record: dict, assignment: str, student, course, path: Path,
              strict: bool = True) -> tuple[str, str, str]:
    """The student and course to grade as, checked against the notebook's record, and a note
    for the report when the record names another student and ``strict`` is false."""
    if record.get("assignment", assignment) != assignment:
        raise ValueError(f"{path} is the notebook of assignment {record['assignment']!r}, not "
                         f"{assignment!r}")
    if student is None:
        if "student" not in record:
            raise ValueError(f"{path} does not record whose it is: pass --student")
        student = record["student"]
    student = check_student_id(student)
    note = ""
    if "student" in record and record["student"] != student:
        if strict:
            raise ValueError(f"{path} was made for student {record['student']!r}, not "
                             f"{student!r}: check the file name or --student")
        note = (f"the notebook records the student {record['student']!r}; it is graded as "
                f"{student!r}, the student its path names")
    if course is None:
        course = record.get("course", "")
    course = check_course(course)
    if "course" in record and record["course"] != course:
        raise ValueError(f"{path} was made for course {record['course']!r}, not {course!r}: "
                         "check --course")
    return student, course, note


# ------------------------------------------------------------------------------ a folder
def student_of(path, folder, assignment: str) -> str:
    """The student a submission's path names: ``<folder>/<student>/<any name>.ipynb``, or
    ``<folder>/<student>.ipynb``, where the name may carry what a learning-management system
    adds to a second upload or to the assignment (``ada (1).ipynb``, ``ada-matmul.ipynb``,
    ``ada_matmul.ipynb``). A clear ``ValueError`` when that is not a student id."""
    path, folder = Path(path), Path(folder)
    parts = path.relative_to(folder).parts
    if len(parts) == 2:
        name = parts[0]
    else:
        name = re.sub(r"\s*\(\d+\)$", "", path.stem)
        name = re.sub(rf"[-_.]{re.escape(assignment)}$", "", name, flags=re.I) or name
    try:
        return check_student_id(name)
    except ValueError:
        raise ValueError(f"{path}: its name does not give a student id ({name!r}); name it "
                         "<id>.ipynb or put it in a folder <id>/") from None


def find_submissions(folder, assignment: str) -> tuple[list, list]:
    """``(pairs, problems)``: ``(student, path)`` for every submission in ``folder``, sorted,
    and a line for each file that is not one.

    A submission is ``<student>.ipynb`` in ``folder`` or ``<student>/<any name>.ipynb`` one level
    down (as ``ioattn assign`` lays them out); :func:`student_of` reads the student from the
    path, never from the file, so no file can take a classmate's place. A student with two files
    has two pairs: each file is graded on its own (:func:`grade_many` notes it in both reports).
    Not a submission: a file that is not a notebook, a notebook of another assignment, a name
    that gives no student id.
    """
    import nbformat

    folder = Path(folder)
    candidates = sorted(set(folder.glob("*.ipynb")) | set(folder.glob("*/*.ipynb")))
    pairs, problems = [], []
    for p in candidates:
        try:
            who = student_of(p, folder, assignment)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        try:
            _not_too_large(p)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        try:
            record = notebook_record(nbformat.read(p, as_version=4))
        except Exception as exc:             # noqa: BLE001 (any unreadable file)
            problems.append(f"{p}: not a notebook ({type(exc).__name__})")
            continue
        if record.get("assignment", assignment) != assignment:
            problems.append(f"{p}: the notebook of assignment {record['assignment']!r}")
            continue
        pairs.append((who, p))
    return sorted(pairs), problems


def note_duplicates(reports) -> None:
    """Add to each report of a student who handed in more than one file a note naming them
    all."""
    by_student: dict = {}
    for r in reports:
        by_student.setdefault(r.student, []).append(r)
    for student, theirs in by_student.items():
        if len(theirs) > 1:
            files = ", ".join(r.submission for r in theirs)
            for r in theirs:
                r.notes.append(f"{student} handed in {len(theirs)} files ({files}); each is "
                               "graded on its own: keep the grade of the one that counts")


# ------------------------------------------------------------------------------ a class
def deadline(assignment: str, notebook_time: float = NOTEBOOK_TIME,
             restarts: int = MAX_RESTARTS) -> float:
    """Seconds one submission's grading may take in all, from the limits: its cells' time
    (shared by all its starts), :data:`CALLS_PER_QUESTION` calls per question at the
    assignment's limit per call, and :data:`WORKER_SLACK` for each start. A worker past it is
    stopped and the submission reported as not graded."""
    spec = get(assignment)
    per_call = float(getattr(spec, "time_limit", 60.0))
    questions = sum(1 for q in spec.questions if not q.manual)
    return (float(notebook_time) + questions * CALLS_PER_QUESTION * per_call
            + (1 + restarts) * WORKER_SLACK)


def grade_many(assignment: str, submissions, *, jobs: int = 1, seed: int | None = None,
               course: str | None = None, key: bytes | None = None,
               notebook_time: float = NOTEBOOK_TIME, memory: int = MEMORY,
               restarts: int = MAX_RESTARTS, strict: bool = False,
               seconds: float | None = None, grader=None) -> list[Report]:
    """Grade ``(student, path)`` pairs, each in a worker process of its own, ``jobs`` at a time;
    the reports in the same order.

    Parameters
    ----------
    assignment, seed, course, key, notebook_time, memory, restarts, strict
        As for :func:`grade` (``strict`` false: the path names the student).
    jobs : int
        How many submissions are graded at once.
    seconds : float, optional
        The wall-clock deadline of one submission (default :func:`deadline`).
    grader : callable, optional
        What grades one submission in the worker (default :func:`grade`; a function importable
        by name, with :func:`grade`'s signature).

    A worker that ends without a report, or runs past ``seconds``, yields the submission's
    report with ``error`` saying so. Interrupted (Ctrl-C), it stops every worker, whose notebooks
    end with them, before it raises ``KeyboardInterrupt``.
    """
    pairs = list(submissions)
    key = grading_key() if key is None else bytes(key)
    options = {"seed": seed, "course": course, "key": key, "notebook_time": notebook_time,
               "memory": memory, "restarts": restarts, "strict": strict}
    limit = deadline(assignment, notebook_time, restarts) if seconds is None else float(seconds)
    context = multiprocessing.get_context("spawn")
    reports: list = [None] * len(pairs)
    waiting = list(enumerate(pairs))[::-1]
    running: dict = {}                       # reader -> (index, process, deadline)
    try:
        while waiting or running:
            while waiting and len(running) < max(1, jobs):
                i, (student, path) = waiting.pop()
                reader, writer = context.Pipe(duplex=False)
                proc = context.Process(target=_worker, name=f"ioattn-grade-{i}", daemon=True,
                                       args=(writer, grader, assignment, str(path), student,
                                             options))
                proc.start()
                writer.close()
                running[reader] = (i, proc, time.monotonic() + limit)
            nearest = min(end for _, _, end in running.values())
            ready = wait([*running, *(p.sentinel for _, p, _ in running.values())],
                         timeout=max(0.0, nearest - time.monotonic()))
            for reader in list(running):
                i, proc, end = running[reader]
                done = reader in ready or proc.sentinel in ready
                if not done and time.monotonic() < end:
                    continue
                del running[reader]
                reports[i] = _collect(reader, proc, done, limit, assignment, pairs[i], options)
    finally:
        for reader, (_, proc, _) in running.items():
            _stop(proc)
            reader.close()
    note_duplicates(reports)
    return reports


def _collect(reader, proc, done: bool, limit: float, assignment: str, pair, options) -> Report:
    """The report a worker sent, or one saying why it sent none."""
    data = None
    if done:
        try:
            if reader.poll(10 if proc.is_alive() else 0):
                data = reader.recv()
        except (EOFError, OSError):
            data = None
    reader.close()
    if isinstance(data, dict):
        proc.join(10)                        # it has reported: let it end on its own
    _stop(proc)
    if isinstance(data, dict):
        return Report.from_dict(data)
    student, path = pair
    spec = get(assignment)
    report = Report(assignment, student or "?", str(path), options["seed"],
                    options["course"] or "",
                    [QuestionScore(q.name, q.title, q.points, None, q.manual)
                     for q in spec.questions], key=key_fingerprint(options["key"]))
    if done:
        code = proc.exitcode
        how = f"killed by signal {-code}" if code and code < 0 else f"exit code {code}"
        report.error = f"the grader's worker for this notebook ended without a report ({how})"
    else:
        report.error = (f"its grading ran past {limit:g} s, the limit for one notebook (every "
                        "start of its cells and every call at their limits): it was stopped")
    return report


def _stop(proc, grace: float = 10.0) -> None:
    """End a worker: ``SIGTERM`` (it closes its notebook), then ``SIGKILL`` after ``grace``."""
    if proc.is_alive():
        proc.terminate()
        proc.join(grace)
    if proc.is_alive():
        proc.kill()
    proc.join(grace)


def _worker(writer, grader, assignment: str, path: str, student, options: dict) -> None:
    """A worker process: grade one submission and send its report as plain data."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)         # the parent stops it with SIGTERM
    signal.signal(signal.SIGTERM, _exit)
    with run_folder():
        report = (grader or grade)(assignment, path, student=student, **options)
    writer.send(report.to_dict())
    writer.close()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)        # nothing left to clean up


def _exit(signum, frame):
    raise SystemExit(128 + signum)


# ------------------------------------------------------------------------------ temporary files
@contextlib.contextmanager
def run_folder():
    """A fresh temporary folder that every temporary folder of this process's grading goes in
    (``tempfile``'s default while it lasts), removed on the way out, however the grading ends.
    Folders of this kind left by a process that no longer runs (killed outright) are removed
    first."""
    sweep_stale()
    folder = tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-")
    os.chmod(folder, 0o711)              # a notebook run as another user reaches its own folder
    before = tempfile.tempdir
    tempfile.tempdir = folder
    try:
        yield Path(folder)
    finally:
        tempfile.tempdir = before
        shutil.rmtree(folder, ignore_errors=True)


def sweep_stale(where=None) -> list[Path]:
    """Remove the grading folders (:func:`run_folder`) in ``where`` (the system's temporary
    folder) that belong to this user and to a process that no longer runs; the ones removed."""
    where = Path(tempfile.gettempdir() if where is None else where)
    removed = []
    for folder in where.glob(f"{RUN_PREFIX}*-*"):
        match = re.fullmatch(rf"{RUN_PREFIX}(\d+)-.*", folder.name)
        try:
            mine = folder.is_dir() and folder.stat().st_uid == os.geteuid()
        except OSError:
            continue
        if match and mine and not _running(int(match.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
