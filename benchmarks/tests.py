"""How long the test suite takes: serially as it ran before, against `make test` now, which runs
it on every core with pytest-xdist and builds the book once, in the background. Prints a table.

Each run is a fresh checkout (``git worktree``) with no ``_build`` folder, so the book is built
and every page executed from cold, as in CI; the same virtual environment runs both. Rows:

- *before, serial*: the suite at ``--before`` (default :data:`sides.BEFORE`), ``pytest``;
- *now, parallel*: the suite at ``--now`` (default ``HEAD``), ``pytest -n auto`` as `make test`
  runs it;
- *now, parallel, warm* (with ``--warm``): the same again in the same checkout, so that the
  execution cache kept from the first run applies (the package is unchanged);
- *now, serial* (with ``--serial``): ``pytest -p no:xdist`` at ``--now``, to compare the test
  counts and to see what the background build alone gains.

Every row gives the tests passed, skipped and failed, the wall-clock time and its ratio to the
first row. Run ``python benchmarks/tests.py`` (the length of two or more whole test runs: about
20 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sides import BEFORE, ROOT, table

SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def checkout(rev: str) -> Path:
    """A fresh worktree of the repository at ``rev``, in a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix=f"ioattn-tests-{rev}-")) / "repo"
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(folder), rev],
                   cwd=ROOT, check=True)
    return folder


def remove(folder: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, check=False)
    shutil.rmtree(folder.parent, ignore_errors=True)


def run_suite(folder: Path, args: list[str]) -> dict:
    """Run pytest in ``folder`` with ``args``; its counts and wall-clock seconds."""
    env = {**os.environ, "PYTHONPATH": str(folder), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    env.pop("IOATTN_BOOK_HTML", None)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in SUMMARY.findall(last)}
    if proc.returncode not in (0, 1):
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
    return dict(seconds=seconds, rc=proc.returncode, summary=last, **counts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help=f"the earlier commit (default {BEFORE})")
    parser.add_argument("--now", default="HEAD", help="the commit to measure (default HEAD)")
    parser.add_argument("--warm", action="store_true",
                        help="also run the parallel suite again with the kept execution cache")
    parser.add_argument("--serial", action="store_true",
                        help="also run the suite at --now serially (-p no:xdist)")
    args = parser.parse_args(argv)

    runs = []
    before = checkout(args.before)
    try:
        runs.append((f"before ({args.before}), serial: pytest", run_suite(before, [])))
    finally:
        remove(before)
    now = checkout(args.now)
    try:
        runs.append((f"now ({args.now}), parallel: pytest -n auto",
                     run_suite(now, ["-n", "auto"])))
        if args.warm:
            runs.append(("now, parallel, warm execution cache", run_suite(now, ["-n", "auto"])))
        if args.serial:
            runs.append(("now, serial: pytest -p no:xdist", run_suite(now, ["-p", "no:xdist"])))
    finally:
        remove(now)

    first = runs[0][1]["seconds"]
    rows = [(what, r.get("passed", 0), r.get("skipped", 0), r.get("failed", 0) + r.get("error", 0),
             f"{r['seconds'] / 60:.1f} min", f"{r['seconds'] / first:.2f}x") for what, r in runs]
    print(f"The test suite on {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(table(rows, ["run", "passed", "skipped", "failed", "wall clock", "ratio"]))
    bad = [what for what, r in runs if r["rc"] != 0]
    if bad:
        print("NOT all passing: " + "; ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
