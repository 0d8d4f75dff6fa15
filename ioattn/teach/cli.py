"""The ``ioattn assign`` and ``ioattn grade`` commands (wired into :mod:`ioattn.cli`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from pathlib import Path

from ..cli import _positive

__all__ = ["EXIT_GRADED", "EXIT_NOT_GRADED", "EXIT_USAGE", "add_commands", "run_command"]

#: ``ioattn grade``'s exit statuses: every submission graded (whatever the scores); one or more
#: not graded (its report, or a line "not graded:", says why); a mistake on the command line.
EXIT_GRADED, EXIT_NOT_GRADED, EXIT_USAGE = 0, 1, 2
#: Exit status when the grading was interrupted (Ctrl-C, SIGTERM): 128 + SIGINT.
EXIT_INTERRUPTED = 130
EXIT_STATUS = (f"exit status: {EXIT_GRADED} when every submission was graded, whatever the "
               f"scores; {EXIT_NOT_GRADED} when one or more could not be (each says why); "
               f"{EXIT_USAGE} for a mistake on the command line (an option, a path, the key); "
               f"{EXIT_INTERRUPTED} when interrupted. A student's notebook never makes it "
               f"{EXIT_USAGE}.")


def _assignment(text: str) -> str:
    from .assignments import get

    try:
        get(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _student(text: str) -> str:
    from .variants import check_student_id

    try:
        return check_student_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _course(text: str) -> str:
    from .variants import check_course

    try:
        return check_course(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value < 2 ** 63:
        raise argparse.ArgumentTypeError(f"the seed must be between 0 and 2**63 - 1, got {value}")
    return value


def add_commands(sub) -> None:
    """Add ``assign`` and ``grade`` to the ``ioattn`` command's subparsers."""
    from . import assignments

    names = ", ".join(assignments())
    a = sub.add_parser("assign", help="make the student notebooks of an assignment, one per "
                       "student", description="Write the student notebook of an assignment and "
                       "each student's own copy, with their parameters and a record of whose it "
                       f"is. Assignments: {names}.")
    a.add_argument("assignment", type=_assignment, help=f"one of: {names}")
    a.add_argument("--student", type=_student, action="append", default=[], metavar="ID",
                   help="a student id (repeatable)")
    a.add_argument("--roster", type=Path, metavar="FILE",
                   help="a file of student ids, one per line ('#' starts a comment)")
    a.add_argument("--course", type=_course, default="", metavar="NAME",
                   help="course name: variants depend on it too (default: none)")
    a.add_argument("--out", type=Path, default=Path("assignments"), metavar="DIR",
                   help="where the notebooks go (default: ./assignments)")
    a.add_argument("--masters", type=Path, metavar="DIR",
                   help="your private folder of notebooks with solutions (DIR/<name>.md; the "
                        "solutions are cut); default: the notebooks shipped with ioattn")
    a.add_argument("--json", action="store_true", help="print the variants as JSON")

    g = sub.add_parser("grade", help="grade a submitted notebook (or a folder of them)",
                       description="Grade submissions on this machine: each notebook runs in a "
                       "process of its own, with limits, and its answers are checked on hidden "
                       "data of the student's own, drawn from your secret grading key, against "
                       "the student's own variant. In a folder, the path of each file names "
                       "its student.",
                       epilog=EXIT_STATUS)
    g.add_argument("assignment", type=_assignment, help=f"one of: {names}")
    g.add_argument("submission", type=Path,
                   help="a notebook, or a folder of them: <student>.ipynb (also as an LMS "
                        "names a second upload, <student> (1).ipynb) or <student>/<any name>"
                        ".ipynb; the path names the student, whatever the file records")
    g.add_argument("--student", type=_student, metavar="ID",
                   help="whose notebook a single file is (default: the student it records; "
                        "given, it must agree)")
    g.add_argument("--course", type=_course, metavar="NAME",
                   help="the course the notebooks were made for (default: what each records; "
                        "given, it must agree)")
    g.add_argument("--json", action="store_true", help="print the reports as JSON")
    g.add_argument("--csv", type=Path, metavar="FILE", help="also write a score sheet (CSV)")
    g.add_argument("--key", type=Path, metavar="FILE",
                   help="your secret grading key, which every student's hidden data are drawn "
                        "from (default: $IOATTN_GRADING_KEY, else ~/.config/ioattn/grading.key; "
                        "made, readable by you alone, on first use)")
    g.add_argument("--seed", type=_seed, help="mixed into every student's hidden data, to "
                   "draw them afresh (the same key and seed repeat a grading; each student "
                   "still has their own)")
    g.add_argument("--jobs", type=_positive, default=1, metavar="N",
                   help="grade N notebooks at a time, each in a process of its own (default 1)")
    g.add_argument("--timeout", type=_positive, default=300, metavar="SECONDS",
                   help="time the notebook's cells may take (default 300; each graded call "
                        "has its own limit)")
    g.add_argument("--memory", type=_positive, default=4096, metavar="MB",
                   help="memory the notebook's process may use (default 4096)")
    g.add_argument("--similar", type=_fraction, default=0.8, metavar="FRACTION",
                   help="report pairs of submissions whose answer code is at least this "
                        "similar (default 0.8)")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {value}")
    return value


def run_command(args) -> int:
    """Run ``ioattn assign`` or ``ioattn grade``; the exit status."""
    from .report import printable

    try:
        return _assign(args) if args.command == "assign" else _grade(args)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(printable(f"ioattn: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ioattn: interrupted; the notebooks being graded were stopped", file=sys.stderr)
        return EXIT_INTERRUPTED


def _roster(path: Path) -> list[str]:
    from .variants import check_student_id

    ids = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if text:
            try:
                ids.append(check_student_id(text))
            except ValueError as exc:
                raise ValueError(f"{path}, line {number}: {exc}") from None
    return ids


def _assign(args) -> int:
    from . import variant
    from .build import build, personalize

    students = list(args.student) + (_roster(args.roster) if args.roster else [])
    built = build(args.assignment, args.out, masters=args.masters)
    folder = built.folder / "students"
    rows = []
    for student in dict.fromkeys(students):
        v = variant(args.assignment, student, args.course)
        path = personalize(built, v, folder)
        rows.append({"student": student, "notebook": str(path), "params": v.params})
    if args.json:
        print(json.dumps({"assignment": args.assignment, "course": args.course,
                          "student_version": str(built.student), "students": rows}, indent=2))
        return 0
    print(f"student version: {built.student}")
    for row in rows:
        shown = ", ".join(f"{k} = {v}" for k, v in row["params"].items() if k != "EDGES")
        print(f"{row['student']}: {row['notebook']}  ({shown})")
    if not rows:
        print("no students given: --student ID or --roster FILE writes each one's notebook")
    return 0


def _grade(args) -> int:
    """``ioattn grade``: everything the command line names is checked first (a mistake there
    is exit status 2); from then on, whatever a notebook does is in its own report."""
    from .grade import find_submissions, grade_many

    limits = {"notebook_time": float(args.timeout), "memory": int(args.memory) << 20}
    key = _key(args.key)
    if args.csv is not None:
        _check_writable(args.csv)
    problems = []
    if args.submission.is_dir():
        if args.student:
            raise ValueError("--student names the student of one notebook; in a folder, each "
                             "file's path names its student")
        pairs, problems = find_submissions(args.submission, args.assignment)
        if not pairs and not problems:
            raise FileNotFoundError(f"no notebooks in {args.submission}")
        strict = False
    else:
        if not args.submission.is_file():
            raise FileNotFoundError(f"no submission at {args.submission}")
        pairs, strict = [(args.student, args.submission)], True
    with _terminated_as_interrupt():
        reports = grade_many(args.assignment, pairs, jobs=args.jobs, seed=args.seed,
                             course=args.course, key=key, strict=strict, **limits)
    similar = _similar_or_why(args.assignment, pairs, args.similar)
    _print(args, reports, problems, similar)
    if args.csv:
        from .report import csv_table

        args.csv.write_text(csv_table(reports), encoding="utf-8")
        if not args.json:
            print(f"scores written to {args.csv}")
    graded = not problems and not any(r.error for r in reports)
    return EXIT_GRADED if graded else EXIT_NOT_GRADED


def _key(path) -> bytes:
    """The grading key (made on first use, with a line that says where)."""
    from .variants import grading_key, key_path

    where = key_path(path)
    new = not where.exists()
    key = grading_key(where)
    if new:
        print(f"ioattn: made a new grading key, {where}: keep it, readable by you alone "
              "(the same key draws the same hidden data)", file=sys.stderr)
    return key


def _check_writable(path: Path) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ValueError(f"--csv {path} is a folder; name a file")
    if not folder.is_dir():
        raise FileNotFoundError(f"--csv {path}: there is no folder {folder}")


@contextlib.contextmanager
def _terminated_as_interrupt():
    """While it lasts, ``SIGTERM`` and ``SIGINT`` interrupt as Ctrl-C does (so the notebooks are
    stopped and the temporary folders removed), even where the command started with ``SIGINT``
    ignored (as a shell starts a background job), in which case Python installs no handler."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        before = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:                   # not the main thread: leave the signals as they are
        yield
        return
    before_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.signal(signal.SIGINT, before_int)


def _print(args, reports, problems, similar) -> None:
    """The reports, the files not graded and the similar pairs, as text or JSON, every string
    printable (:func:`~ioattn.teach.report.printable`)."""
    from .report import _clean, printable

    if args.json:
        data = [r.to_dict() for r in reports]
        if args.submission.is_dir():
            print(json.dumps(_clean({"reports": data, "problems": problems,
                                     "similar": similar}), indent=2))
        else:
            print(json.dumps(data[0], indent=2))
        return
    print("\n\n".join(r.text() for r in reports))
    for line in problems:
        print(printable(f"not graded: {line}"))
    for pair in similar:
        print(printable(f"similar: {pair['text']}" if "text" in pair else
                        f"similar: not compared ({pair['error']})"))


def _similar_or_why(assignment: str, pairs, threshold: float) -> list[dict]:
    """:func:`_similar`'s pairs as plain data (with their line of text), or one entry saying
    why the comparison could not be made: it is an aid, and never stops a grading."""
    if not pairs:
        return []
    try:
        return [{**vars(p), "text": p.text()} for p in _similar(assignment, pairs, threshold)]
    except Exception as exc:                 # noqa: BLE001 (students' code, compared here)
        return [{"error": f"{type(exc).__name__}: {exc}"[:300]}]


def _similar(assignment: str, pairs, threshold: float) -> list:
    """Pairs of students whose answer code is near-identical, or whose code is found in a public
    source (:func:`ioattn.teach.similarity.similar_in_class`)."""
    from .similarity import similar_in_class

    return similar_in_class(assignment, pairs, threshold)
