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
                       "process of its own, with limits, and its answers are checked by this "
                       "process on hidden data against the student's own variant. Exit status "
                       "0 when every submission was graded, whatever the scores; 1 when one "
                       "could not be.")
    g.add_argument("assignment", type=_assignment, help=f"one of: {names}")
    g.add_argument("submission", type=Path,
                   help="a notebook, or a folder of them (<student>.ipynb, <student>/<name>"
                        ".ipynb, or any names: each notebook records its student)")
    g.add_argument("--student", type=_student, metavar="ID",
                   help="whose notebook a single file is (default: the student it records; "
                        "given, it must agree)")
    g.add_argument("--course", type=_course, metavar="NAME",
                   help="the course the notebooks were made for (default: what each records; "
                        "given, it must agree)")
    g.add_argument("--json", action="store_true", help="print the reports as JSON")
    g.add_argument("--csv", type=Path, metavar="FILE", help="also write a score sheet (CSV)")
    g.add_argument("--seed", type=_seed, help="grading seed, to repeat a grading exactly")
    g.add_argument("--jobs", type=_positive, default=1, metavar="N",
                   help="grade N notebooks at a time (default 1)")
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
    from .grade import find_submissions, grade, grade_many
    from .report import csv_table

    limits = {"notebook_time": float(args.timeout), "memory": int(args.memory) << 20}
    problems = []
    if args.submission.is_dir():
        if args.student:
            raise ValueError("--student names the student of one notebook; a folder's "
                             "notebooks record their students")
        pairs, problems = find_submissions(args.submission, args.assignment)
        if not pairs and not problems:
            raise FileNotFoundError(f"no notebooks in {args.submission}")
        reports = grade_many(args.assignment, pairs, jobs=args.jobs, seed=args.seed,
                             course=args.course, **limits)
    else:
        if not args.submission.is_file():
            raise FileNotFoundError(f"no submission at {args.submission}")
        pairs = [(args.student, args.submission)]
        reports = [grade(args.assignment, args.submission, student=args.student, seed=args.seed,
                         course=args.course, **limits)]
    similar = _similar(args.assignment, pairs, args.similar) if pairs else []
    if args.json:
        data = [r.to_dict() for r in reports]
        if args.submission.is_dir():
            print(json.dumps({"reports": data, "problems": problems,
                              "similar": [vars(p) for p in similar]}, indent=2))
        else:
            print(json.dumps(data[0], indent=2))
    else:
        print("\n\n".join(r.text() for r in reports))
        for line in problems:
            print(f"not graded: {line}")
        for pair in similar:
            print(f"similar: {pair.text()}")
    if args.csv:
        args.csv.write_text(csv_table(reports), encoding="utf-8")
        if not args.json:
            print(f"scores written to {args.csv}")
    return 1 if problems or any(r.error for r in reports) else 0


def _similar(assignment: str, pairs, threshold: float) -> list:
    """Pairs of students whose answer code is near-identical (:mod:`ioattn.teach.similarity`),
    the shipped notebook's own code not counted, and students whose code is the grader's own
    answers' (:mod:`ioattn.teach.keys`)."""
    from importlib.util import find_spec

    from .build import notebook_source
    from .similarity import answer_code, similar_pairs

    codes = {}
    for student, path in pairs:
        try:
            codes[student or path.stem] = answer_code(path)
        except (OSError, ValueError):
            continue
    import jupytext

    template = jupytext.read(notebook_source(assignment))
    starter = "\n".join(c.source for c in template.cells if c.cell_type == "code")
    known = {}
    spec = find_spec(f"ioattn.teach.keys.{assignment}")
    if spec is not None and spec.origin:
        known[f"ioattn.teach.keys.{assignment}"] = Path(spec.origin).read_text(encoding="utf-8")
    return similar_pairs(codes, threshold=threshold, starter=starter, known=known)
