"""Cheating notebooks score nothing; honest ones get full marks (graded as ``ioattn grade`` does).

Each file in ``tests/teach/cheats/`` is the code of one notebook of ``matmul`` for student
``ada``: its cells are separated by ``# %%`` lines, and a line ``# %% solution`` is a cell holding
the honest answer (``tests/teach/solutions/matmul.py``). The module docstring says what it tries.
:data:`EXPECT` says what the grader must make of each, precisely, so a cheat that starts to work
(or an honest notebook that loses points) fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ioattn.teach import jail, sandbox
from ioattn.teach.grade import grade

from .helpers import CHEATS, cheat_cells, notebook, solution
from .test_protocol_attacks import EXPECT as PROTOCOL_EXPECT

SEED, STUDENT = 7, "ada"

#: What the grader does with each file: ``full`` (5/5; ``cell_errors``: whether some cell
#: failed), or ``q1``/``q2`` scores with a substring each of their reasons must contain
#: (and ``cell_error``, a substring one of the cell errors must contain), or ``error``: a
#: substring of ``report.error``.
ZERO = {"q1": 0, "q2": 0}
NEVER = "2,028 of the 2,028 entries of C were never written"


def _zero(reason, q2=None) -> dict:
    """Both questions 0, each with ``reason`` (q2: ``q2`` if given; a tuple: one of them) in
    its reasons."""
    return {**ZERO, "q1_reason": reason, "q2_reason": q2 or reason}


EXPECT: dict[str, dict] = {
    "honest_reference": {"full": True},
    "honest_print_logging": {"full": True},
    "honest_progress_log": {"full": True},
    "honest_helper_class": {"full": True},
    "honest_split_cells": {"full": True, "cell_errors": True},
    "buggy_off_by_one": _zero("676 of the 2,028 entries of C were never written"),
    # reaching the referee: patches live in the notebook's process, the checks in the grader's
    "referee_patch_judge": _zero(NEVER),
    "referee_patch_check": _zero(NEVER),
    "referee_patch_grade": _zero(NEVER),
    "referee_patch_machine_request": {"q1": 2, "q2": 0, "q2_reason": "Over budget"},
    "referee_patch_memory_counters": _zero("cannot bring A[0:49, 0:39] (1911 entries)"),
    "referee_getframe": _zero("RuntimeError: no machine in any frame"),
    "referee_gc_objects": _zero("RuntimeError: gc holds no machine and no input array"),
    "referee_env_seed": _zero("RuntimeError: no seed in the environment"),
    "referee_proc_ppid_mem": _zero("PermissionError"),
    "referee_proc_ppid_environ": _zero("PermissionError"),
    "referee_proc_classmates": _zero("no classmate's notebook in /proc"),
    "referee_forge_returned": _zero((NEVER, "Permission denied: '/proc/self/fd'")),
    "referee_forge_tile": _zero("unknown request 'load'"),
    "referee_os_exit": _zero("The notebook's process ended"),
    "referee_system_exit": _zero("Did not run: tiled_matmul"),
    "referee_keyboard_interrupt": _zero("KeyboardInterrupt"),
    # keeping data outside the counted cache
    "cache_keep_handles": _zero("CacheOverflowError"),
    "cache_use_freed": _zero("no tile 0 in the cache (freed already?)"),
    "cache_negative_alloc": _zero("non-negative sizes"),
    "cache_huge_alloc": _zero("CacheOverflowError: tiled_matmul: cannot bring a tile (2028"),
    "cache_huge_row_index": _zero("is too large"),
    "cache_read_whole_input": _zero("cannot bring A[0:49, 0:39] (1911 entries)"),
    "cache_wrong_shape_write": _zero("cannot write a tile of shape (1, 1)"),
    "cache_scratch_as_cache": {"q1": 0, "q1_reason": "into the cache: it already holds", "q2": 0,
                               "q2_reason": "Over budget"},
    # the package answering
    "package_run_square_tiling": _zero("is in slow memory"),
    # the masters hold the A @ B key only (wrong shapes for ada's A.T @ B); while they are
    # being moved out of book/, there may be none in the checkout
    "package_read_masters": _zero(("cannot write a tile of shape", "no answer key")),
    # a world-readable file of the checkout: Landlock keeps it out of reach (see KNOWN), and
    # in namespaces of its own the file is not there at all
    "package_read_solution_file": {**_zero("tiled_matmul is not defined"),
                                   "cell_error": "FileNotFoundError" if not jail.bwrap()
                                   else "PermissionError"},
    # hard-coding, lying returned values
    "hardcode_example_constants": _zero("C is wrong (your sizes, hidden data"),
    "return_int_subclass": _zero("returned a __main__.Liar, which is not plain data"),
    "return_numpy_array": _zero(NEVER),
}
EXPECT.update(PROTOCOL_EXPECT)          # the notebooks that attack the grader's messages

#: Cheats that work where the kernel has no Landlock (:mod:`ioattn.teach.sandbox`): the
#: notebook's process can then read every file its user can, such as this checkout's tests.
KNOWN = {} if sandbox.abi() or not jail.bwrap() else {
    "package_read_solution_file": (
        "no Landlock on this kernel: the notebook can read the checkout it imports ioattn from, "
        "and tests/teach/solutions/ holds answer keys"),
}


def cells_of(stem: str) -> list[str]:
    """The notebook cells of ``cheats/<stem>.py``, empty ones left out."""
    return [c for c in cheat_cells(stem) if c.strip()]


def grade_file(stem: str, folder: Path):
    path = notebook(folder / f"{stem}.ipynb", "matmul", STUDENT, *cells_of(stem))
    return grade("matmul", path, seed=SEED)


# the sandbox's cheats need servers and limits of their own: tests/teach/test_sandbox_attacks.py
STEMS = sorted(p.stem for p in CHEATS.glob("*.py")
               if p.stem != "conftest" and not p.stem.startswith("sandbox_"))


def _param(stem):
    marks = ()
    if stem in KNOWN:
        marks = (pytest.mark.xfail(strict=True, reason=KNOWN[stem]),)
    return pytest.param(stem, id=stem, marks=marks)


def test_every_file_has_an_expectation_and_a_docstring():
    assert len([s for s in STEMS if not s.startswith(("honest_", "buggy_"))]) >= 25
    for stem in STEMS:
        assert stem in EXPECT, stem
        text = (CHEATS / f"{stem}.py").read_text()
        assert text.startswith('"""') and "Kind:" in text, stem


@pytest.mark.parametrize("stem", [_param(s) for s in STEMS])
def test_graded(stem, tmp_path):
    report = grade_file(stem, tmp_path)
    want = EXPECT.get(stem, {"full": True})
    summary = [(q.name, q.score, q.reasons) for q in report.questions]
    if "error" in want:
        assert report.error is not None and want["error"] in report.error, report.error
        assert all(q.score is None for q in report.questions)
        return
    assert report.error is None, report.error
    if "full" in want:
        assert report.score == report.possible == 5, summary
        assert bool(report.cell_errors) == want.get("cell_errors", False), report.cell_errors
        return
    if "cell_error" in want:
        assert any(want["cell_error"] in e for e in report.cell_errors), report.cell_errors
    for q in report.questions:
        assert q.score == want[q.name], summary
        text = want.get(f"{q.name}_reason")
        if text is not None:
            texts = text if isinstance(text, tuple) else (text,)
            assert any(t in r for r in q.reasons for t in texts), summary
    if want["q1"] == want["q2"] == 0:
        assert report.score == 0
