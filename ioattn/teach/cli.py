"""The ``ioattn assign`` and ``ioattn grade`` commands (wired into :mod:`ioattn.cli`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..cli import _positive

__all__ = ["add_commands", "run_command"]


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
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", type=_course, default="", metavar="NAME",
                        help="course name: variants depend on it too (default: none)")
    common.add_argument("--out", type=Path, metavar="DIR",
                        help="where generated files go (default: _build/assignments)")
    common.add_argument("--masters", type=Path, metavar="DIR",
                        help="folder of master notebooks (default: the repository's "
                             "book/assignments/masters)")

    a = sub.add_parser("assign", parents=[common],
                       help="make the student notebooks of an assignment, one per student",
                       description="Generate the student version and the autograder of an "
                       "assignment from its master notebook (otter-grader), and each student's "
                       f"own copy with their parameters. Assignments: {names}.")
    a.add_argument("assignment", type=_assignment, help=f"one of: {names}")
    a.add_argument("--student", type=_student, action="append", default=[], metavar="ID",
                   help="a student id (repeatable)")
    a.add_argument("--roster", type=Path, metavar="FILE",
                   help="a file of student ids, one per line ('#' starts a comment)")
    a.add_argument("--json", action="store_true", help="print the variants as JSON")

    g = sub.add_parser("grade", parents=[common],
                       help="grade a submitted notebook (or a folder of them) locally",
                       description="Grade submissions locally, without Docker: each notebook "
                       "runs in a fresh kernel with the assignment's hidden tests, checked "
                       "against the student's own variant. Exit status 0 when every submission "
                       "was graded, whatever the scores; 1 when one could not be graded.")
    g.add_argument("assignment", type=_assignment, help=f"one of: {names}")
    g.add_argument("submission", type=Path,
                   help="a notebook, or a folder of <student>.ipynb (or <student>/"
                        "<assignment>.ipynb)")
    g.add_argument("--student", type=_student, metavar="ID",
                   help="whose variant to check a single notebook against (default: the id "
                        "the notebook declares)")
    g.add_argument("--json", action="store_true", help="print the reports as JSON")
    g.add_argument("--csv", type=Path, metavar="FILE", help="also write a score sheet (CSV)")
    g.add_argument("--seed", type=_seed, help="grading seed, to repeat a grading exactly")
    g.add_argument("--jobs", type=_positive, default=1, metavar="N",
                   help="grade N notebooks at a time (default 1)")
    g.add_argument("--timeout", type=_positive, default=900, metavar="SECONDS",
                   help="time limit per notebook (default 900)")


def run_command(args) -> int:
    """Run ``ioattn assign`` or ``ioattn grade``; the exit status."""
    try:
        return _assign(args) if args.command == "assign" else _grade(args)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"ioattn: {exc}", file=sys.stderr)
        return 2


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
    from .build import DEFAULT_OUT, build, personalize

    students = list(args.student) + (_roster(args.roster) if args.roster else [])
    built = build(args.assignment, args.out, masters=args.masters)
    folder = Path(args.out if args.out is not None else DEFAULT_OUT) / args.assignment / "students"
    rows = []
    for student in dict.fromkeys(students):
        v = variant(args.assignment, student, args.course)
        path = personalize(built, v, folder)
        rows.append({"student": student, "notebook": str(path), "params": v.params})
    if args.json:
        print(json.dumps({"assignment": args.assignment, "course": args.course,
                          "student_version": str(built.student),
                          "autograder": str(built.autograder), "students": rows}, indent=2))
        return 0
    print(f"student version: {built.student}")
    print(f"autograder:      {built.autograder}")
    for row in rows:
        shown = ", ".join(f"{k} = {v}" for k, v in row["params"].items() if k != "EDGES")
        print(f"{row['student']}: {row['notebook']}  ({shown})")
    if not rows:
        print("no students given: --student ID or --roster FILE writes each one's notebook")
    return 0


def _grade(args) -> int:
    from .grade import find_submissions, grade, grade_many
    from .report import csv_table

    if args.submission.is_dir():
        if args.student:
            raise ValueError("--student names the student of one notebook; a folder's "
                             "notebooks are named after their students")
        pairs = find_submissions(args.submission, args.assignment)
        if not pairs:
            raise FileNotFoundError(f"no notebooks in {args.submission}")
        reports = grade_many(args.assignment, pairs, jobs=args.jobs, seed=args.seed,
                             course=args.course, out=args.out, masters=args.masters,
                             timeout=args.timeout)
    else:
        if not args.submission.is_file():
            raise FileNotFoundError(f"no submission at {args.submission}")
        reports = [grade(args.assignment, args.submission, student=args.student, seed=args.seed,
                         course=args.course, out=args.out, masters=args.masters,
                         timeout=args.timeout)]
    if args.json:
        data = [r.to_dict() for r in reports]
        print(json.dumps(data if args.submission.is_dir() else data[0], indent=2))
    else:
        print("\n\n".join(r.text() for r in reports))
    if args.csv:
        args.csv.write_text(csv_table(reports), encoding="utf-8")
        if not args.json:
            print(f"scores written to {args.csv}")
    return 1 if any(r.error for r in reports) else 0
