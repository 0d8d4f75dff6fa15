"""Measure a change side by side in one run: this tree's ``ioattn`` against the package as it was
at an earlier commit.

:class:`Side` starts a Python process that imports ``ioattn`` from this tree (``rev=None``) or
from ``git archive REV ioattn`` unpacked into a temporary folder, and then runs the statements it
is sent. Timing both sides alternately (:func:`interleaved`) makes the ratio robust to the load
of the machine, which changes both alike. Everything is measured in the side's own process: time
by ``time.perf_counter``, memory by ``tracemalloc`` (the peak of Python's and NumPy's
allocations during a statement, beyond what was allocated before it).

The benchmarks take ``--before REV`` (default :data:`BEFORE`, the last commit before the speed
work they measure); they need the repository's history, so they run from a clone, not from an
installed package.

>>> # with Side(BEFORE) as old, Side() as new:
>>> #     ratio = interleaved([old, new], "io_cost('flash', 4096, 64, 4096, mask=m)",
>>> #                         setup="from ioattn import io_cost; ...")
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The commit before the speed work (issue "fast at scale"): the "before" of every ratio.
BEFORE = "a85c3ca"

_WORKER = r"""
import gc, json, sys, time, tracemalloc
space = {}
for line in sys.stdin:
    job = json.loads(line)
    try:
        if job["kind"] == "exec":
            exec(job["code"], space)
            reply = {"ok": True}
        elif job["kind"] == "time":
            code = compile(job["code"], "<timed>", "exec")
            t = time.perf_counter()
            for _ in range(job["number"]):
                exec(code, space)
            reply = {"ok": True, "seconds": (time.perf_counter() - t) / job["number"]}
        elif job["kind"] == "peak":
            code = compile(job["code"], "<measured>", "exec")
            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            exec(code, space)
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            reply = {"ok": True, "bytes": peak}
        elif job["kind"] == "eval":
            reply = {"ok": True, "value": eval(job["code"], space)}
    except BaseException as exc:
        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(reply), flush=True)
"""


def package_at(rev: str) -> Path:
    """A temporary folder holding ``ioattn`` as it was at commit ``rev``."""
    folder = Path(tempfile.mkdtemp(prefix=f"ioattn-{rev}-"))
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "ioattn"], cwd=ROOT,
                             capture_output=True, check=False)
    if archive.returncode:
        raise SystemExit(f"cannot read ioattn at {rev!r} from git: "
                         f"{archive.stderr.decode().strip()} (run from a clone with its history)")
    with tempfile.TemporaryFile() as f:
        f.write(archive.stdout)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(folder, filter="data")
    return folder


class Side:
    """A Python process running ``ioattn`` from this tree (``rev=None``) or from commit ``rev``."""

    def __init__(self, rev: str | None = None, label: str | None = None):
        self.rev = rev
        self.label = label or (f"before ({rev})" if rev else "now")
        path = self._folder = package_at(rev) if rev else ROOT
        env = {"PYTHONPATH": str(path), "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], cwd=path, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env={**os.environ, **env})
        self.exec(f"import ioattn; assert ioattn.__file__.startswith({str(path)!r}), "
                  "ioattn.__file__")

    def _ask(self, **job):
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if not reply["ok"]:
            raise RuntimeError(f"{self.label}: {reply['error']}\n  in: {job['code']}")
        return reply

    def exec(self, code: str) -> None:
        """Run ``code`` (statements) in the side's namespace."""
        self._ask(kind="exec", code=code)

    def eval(self, code: str):
        """The value of the expression ``code`` (JSON-serialisable)."""
        return self._ask(kind="eval", code=code)["value"]

    def time(self, code: str, number: int = 1) -> float:
        """Seconds per run of ``code``, averaged over ``number`` runs."""
        return self._ask(kind="time", code=code, number=number)["seconds"]

    def peak(self, code: str) -> int:
        """Bytes allocated at the peak while ``code`` runs, beyond those held before it."""
        return self._ask(kind="peak", code=code)["bytes"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        if self.rev:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def interleaved(sides, code: str, repeats: int = 7, number: int = 1) -> list[float]:
    """The median seconds per run of ``code`` on each side, the sides timed alternately
    ``repeats`` times (after one untimed warm-up run each)."""
    for side in sides:
        side.time(code, 1)
    times = [[] for _ in sides]
    for _ in range(repeats):
        for side, t in zip(sides, times):
            t.append(side.time(code, number))
    return [statistics.median(t) for t in times]


def table(rows, header) -> str:
    """A plain-text table: ``rows`` of strings under ``header``."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(f"{str(x):<{w}}" for x, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])
