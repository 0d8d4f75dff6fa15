"""The census of values held outside the cache, and the audit hooks, on small schedules."""

from __future__ import annotations

import builtins
import gc
import sys

import numpy as np
import pytest

from ioattn.teach.harness import call
from ioattn.teach.memory import Referee

M = 24


def _run(fn, rows=8, cols=4, M=M):
    ref = Referee(M, owner=fn.__name__)
    A = ref.load("A", np.arange(rows * cols, dtype=float).reshape(rows, cols))
    S = ref.output("S", (rows,))
    done = call(fn, (ref.memory, A, S), name=fn.__name__, referee=ref)
    assert done.error is None or "Overflow" in type(done.error).__name__, done.describe_error()
    return ref, done


def _kinds(ref):
    return [v.kind for v in ref.violations]


# ---------------------------------------------------------------- honest schedules pass
def honest(mem, A, S):
    """Row sums, a row at a time, with temporaries and scalars that are free."""
    n = A.shape[0]
    scale = 1.0
    for i in range(n):
        row = mem.read(A, i)
        total = mem.allocate(1)
        total[0] = row.sum() * scale                 # a temporary, gone before the next transfer
        view = total[0:1]                            # a view of a cache buffer is the buffer
        mem.write(S, view, slice(i, i + 1))
        mem.free(row, total)                         # `row` still names a freed (NaN) buffer


def small_outside(mem, A, S):
    """A few entries outside the cache are fine while the total stays within M."""
    kept = np.zeros(2)
    for i in range(A.shape[0]):
        row = mem.read(A, i)
        kept[:] = row[:2]
        out = mem.allocate(1)
        out[0] = row.sum()
        mem.write(S, out, slice(i, i + 1))
        mem.free(row, out)
    del kept


@pytest.mark.parametrize("fn", [honest, small_outside])
def test_honest_schedules_pass(fn):
    ref, done = _run(fn)
    assert ref.violations == [] and ref.recount().total == 8 * 4 + 8


# ---------------------------------------------------------------- stashes are found
def stash_local(mem, A, S):
    rows = []
    for i in range(A.shape[0]):
        row = mem.read(A, i)
        rows.append(row.copy())
        mem.free(row)


def stash_comprehension(mem, A, S):
    """The list a comprehension builds is on the stack, not in a variable: it is found at the
    next transfer after it is bound, before anything is written."""
    rows = [_copy_and_free(mem, A, i) for i in range(A.shape[0])]
    out = mem.allocate(1)
    out[0] = sum(r.sum() for r in rows)
    mem.write(S, out, slice(0, 1))


def _copy_and_free(mem, A, i):
    row = mem.read(A, i)
    kept = row.copy()
    mem.free(row)
    return kept


def stash_closure(mem, A, S):
    rows = []

    def keep(i):
        rows.append(_copy_and_free(mem, A, i))

    for i in range(A.shape[0]):
        keep(i)


def stash_default(mem, A, S, _cache=[]):             # noqa: B006 (the point of the test)
    for i in range(A.shape[0]):
        _remember(_copy_and_free(mem, A, i))


def _remember(row, _kept=[]):                         # noqa: B006
    _kept.append(row)


class Box:
    rows: list = []


def stash_class(mem, A, S):
    for i in range(A.shape[0]):
        Box.rows.append(_copy_and_free(mem, A, i))


def stash_object(mem, A, S):
    class Holder:
        pass

    h = Holder()
    h.data = {"rows": []}
    for i in range(A.shape[0]):
        h.data["rows"].append(_copy_and_free(mem, A, i))


def stash_builtins(mem, A, S):
    builtins.__dict__["_kept_rows"] = kept = []
    del kept
    for i in range(A.shape[0]):
        builtins.__dict__["_kept_rows"].append(_copy_and_free(mem, A, i))
    del builtins.__dict__["_kept_rows"]


def stash_module(mem, A, S):
    sys.modules["numpy"].__dict__["_kept_rows"] = []
    for i in range(A.shape[0]):
        np._kept_rows.append(_copy_and_free(mem, A, i))


def stash_floats(mem, A, S):
    values = []
    for i in range(A.shape[0]):
        row = mem.read(A, i)
        values += row.tolist()
        mem.free(row)


def stash_bytes(mem, A, S):
    packed = []
    for i in range(A.shape[0]):
        packed.append(_copy_and_free(mem, A, i).tobytes())


def stash_generator(mem, A, S):
    def keeper():
        rows = []
        while True:
            rows.append((yield))

    kept = keeper()
    next(kept)
    for i in range(A.shape[0]):
        kept.send(_copy_and_free(mem, A, i))


def stash_private_memory(mem, A, S):
    from ioattn import TwoLevelMemory

    mine = TwoLevelMemory(10 ** 6)
    kept = mine.allocate_slow("A", A.shape)
    for i in range(A.shape[0]):
        row = mem.read(A, i)
        copy = mine.allocate(A.shape[1])
        copy[:] = row
        mine.write(kept, copy, i)
        mine.free(copy)
        mem.free(row)


@pytest.mark.parametrize("fn", [stash_local, stash_comprehension, stash_closure, stash_default,
                                stash_class, stash_object, stash_builtins, stash_module,
                                stash_floats, stash_bytes, stash_generator,
                                stash_private_memory])
def test_values_kept_outside_the_cache_are_found(fn):
    try:
        ref, _ = _run(fn)
    finally:
        Box.rows.clear()
        np.__dict__.pop("_kept_rows", None)
        builtins.__dict__.pop("_kept_rows", None)
    assert _kinds(ref) == ["cache"], ref.violations
    assert "outside the cache" in ref.violations[0].message


def test_the_census_names_where_the_values_are():
    ref, _ = _run(stash_local)
    (message,) = [v.message for v in ref.violations if v.kind == "cache"]
    assert "stash_local: rows" in message and f"M = {M}" in message


# ---------------------------------------------------------------- the audit hooks
def search_gc(mem, A, S):
    gc.get_referrers(A)


def climb_the_stack(mem, A, S):
    return sys._getframe(2).f_locals


def open_a_file(mem, A, S, path=None):
    with open(path, "w") as f:
        f.write("1.0")


def test_audit_hooks_record_the_ways_around_the_handles(tmp_path):
    assert _kinds(_run(search_gc)[0]) == ["uncounted"]
    assert _kinds(_run(climb_the_stack)[0]) == ["uncounted"]
    ref = Referee(M, owner="f")
    A = ref.load("A", np.ones((2, 2)))
    call(open_a_file, (ref.memory, A, None), {"path": str(tmp_path / "x.txt")}, name="f",
         referee=ref)
    assert _kinds(ref) == ["cache"]


def test_hooks_ignore_the_grader():
    ref, _ = _run(honest)
    gc.get_referrers(ref)                            # not armed: not recorded
    sys._getframe(0)
    assert ref.violations == []


def library_schedule(mem, A, S):
    from ioattn.algorithms.matmul import plan_matmul, tiled_product

    B = mem.allocate_slow("B", (4, 1))
    tiled_product(mem, A, B, mem.allocate_slow("C", (8, 1)), plan_matmul(8, 4, 1, mem.M))


def test_running_ioattns_own_schedule_is_named():
    ref, _ = _run(library_schedule)
    assert _kinds(ref)[0] == "library" and "ioattn.algorithms.matmul" in ref.violations[0].message
