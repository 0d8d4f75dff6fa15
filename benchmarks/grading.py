"""Grading time per notebook, assignment by assignment: ``python benchmarks/grading.py [N]``.

Grades ``N`` honest notebooks of each assignment (default 2; ``--quick``: 1 of each, ``--jobs``
1 only), as ``ioattn grade`` does a folder (:func:`ioattn.teach.grade.grade_many`: each notebook
in a worker process of its own), once with ``--jobs 1`` and once with ``--jobs 2``, and prints the
wall-clock seconds per notebook of each, side by side, with the scores the notebooks got (so a
table of fast failures cannot pass for one of gradings). The honest notebooks are the
repository's test solutions (``tests/teach/solutions``) and the test suite's crossover and
pebbling cells; the pebbling one calls the grader's own key, which a confined notebook cannot
read, so it scores its partition question only there. The grading key is a fixed one of the
benchmark's own.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The benchmark's grading key: fixed, so that two runs grade the same hidden instances.
KEY = b"the grading benchmark's own key, not a course's"


def honest_cells() -> dict[str, str]:
    """Each assignment's honest notebook cell (from the repository's tests)."""
    sys.path.insert(0, str(ROOT))
    from tests.teach.helpers import solution
    from tests.teach.test_crossover_pebbling import CROSSOVER_CELL, PEBBLING_CELL

    cells = {name: solution(name) for name in ("matmul", "flash", "backward", "decoding")}
    cells.update(crossover=CROSSOVER_CELL, pebbling=PEBBLING_CELL)
    return cells


def timed(assignment: str, pairs: list, jobs: int) -> tuple[float, list]:
    """Seconds to grade ``pairs`` ``jobs`` at a time, and the reports."""
    from ioattn.teach.grade import grade_many

    start = time.perf_counter()
    reports = grade_many(assignment, pairs, jobs=jobs, key=KEY)
    return time.perf_counter() - start, reports


def scores(reports) -> str:
    """The reports' totals, e.g. ``5/5 5/5`` (``x`` for a notebook not graded)."""
    return " ".join("x" if r.error else f"{r.score:g}/{r.possible:g}" for r in reports)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="?", type=int, default=2,
                        help="honest notebooks per assignment (default 2)")
    parser.add_argument("--quick", action="store_true", help="1 notebook each, --jobs 1 only")
    parser.add_argument("--only", metavar="NAME", action="append",
                        help="only this assignment (repeatable)")
    args = parser.parse_args(argv)
    if args.notebooks < 1:
        parser.error("expected at least 1 notebook per assignment")
    from ioattn.teach import assignments

    sys.path.insert(0, str(ROOT))
    from tests.teach.helpers import notebook

    count, runs = (1, (1,)) if args.quick else (args.notebooks, (1, 2))
    cells = honest_cells()
    head = (f"{'assignment':11} {'notebooks':>9} "
            + " ".join(f"{f's/notebook jobs={j}':>18}" for j in runs) + "  scores")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory() as tmp:
        for name in assignments():
            if args.only and name not in args.only:
                continue
            pairs = [(s, notebook(Path(tmp) / name / f"{s}.ipynb", name, s, cells[name]))
                     for s in (f"student{i}" for i in range(count))]
            results = [timed(name, pairs, jobs) for jobs in runs]
            per = " ".join(f"{seconds / count:>18.1f}" for seconds, _ in results)
            print(f"{name:11} {count:>9} {per}  {scores(results[-1][1])}", flush=True)
    print()
    print("each notebook in a worker process of its own; seconds of wall-clock time on this "
          "machine, per notebook, starting the worker and the notebook's process included")
    return 0


if __name__ == "__main__":
    sys.exit(main())
