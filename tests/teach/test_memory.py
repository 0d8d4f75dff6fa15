"""The grader's memory: the same counts as TwoLevelMemory, and nothing the submission can bend."""

from __future__ import annotations

import numpy as np
import pytest

import ioattn
from ioattn import CacheOverflowError, SlowArray, TwoLevelMemory
from ioattn.algorithms import get
from ioattn.teach.harness import call
from ioattn.teach.memory import GradedMemory, Referee


def _kinds(ref):
    return [v.kind for v in ref.violations]


@pytest.mark.parametrize("name, options", [("flash", {}), ("flash", {"variant": "fa1"}),
                                           ("square_tiling", {"schedule": "outer"}),
                                           ("standard", {})])
def test_counts_equal_the_closed_form_for_every_algorithm(name, options):
    """ioattn's own schedules, run on the grader's memory (not armed), count exactly what
    io_cost says, and compute the same output: it is the same model."""
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((40, 6)) for _ in range(3))
    M = 200
    algo = get(name)
    plan = algo.plan(40, 6, M, **options)
    ref = Referee(M, owner=name)
    hQ, hK, hV, hO = ref.load("Q", Q), ref.load("K", K), ref.load("V", V), ref.output("O", (40, 6))
    algo.simulate(ref.memory, hQ, hK, hV, hO, plan, 1 / np.sqrt(6))
    assert ref.recount() == ioattn.io_cost(name, 40, 6, M, **options)
    assert ref.memory.io == ref.recount()
    np.testing.assert_allclose(ref.value(hO), ioattn.run(name, Q, K, V, M, **options).output)
    assert ref.violations == []


def test_it_is_a_two_level_memory_with_opaque_handles():
    ref = Referee(10, owner="t")
    A = ref.load("A", np.arange(12.0).reshape(3, 4))
    mem = ref.memory
    assert isinstance(mem, TwoLevelMemory) and isinstance(A, SlowArray)
    assert A.shape == (3, 4) and A.name == "A" and mem.M == 10
    with pytest.raises(TypeError, match="lives in slow memory"):
        A[0, 0]
    t = mem.read(A, 1)
    np.testing.assert_array_equal(t, [4.0, 5.0, 6.0, 7.0])
    assert (mem.reads, mem.writes, mem.occupancy, mem.peak) == (4, 0, 4, 4)


def test_the_handle_holds_decoys_not_the_values():
    ref = Referee(10, owner="t", seed=1)
    values = np.arange(12.0).reshape(3, 4)
    A = ref.load("A", values)
    decoy = SlowArray._data.__get__(A)
    assert decoy.shape == values.shape and not np.allclose(decoy, values)
    np.testing.assert_array_equal(ref.decoy(A), decoy)


def test_every_touch_of_slow_memory_outside_a_transfer_is_recorded():
    ref = Referee(10, owner="t")
    A = ref.load("A", np.ones((2, 2)))
    mem = ref.memory
    ref.armed = True
    A._data                                                     # noqa: B018
    with pytest.raises(PermissionError):
        mem.fetch(A)
    with pytest.raises(PermissionError):
        mem.load("B", np.ones(2))
    with pytest.raises(AttributeError):
        A.shape = (1, 1)
    assert _kinds(ref) == ["uncounted"] * 4


def test_counters_and_methods_cannot_be_changed():
    ref = Referee(10, owner="t")
    mem = ref.memory
    for attempt in (lambda: setattr(mem, "reads", 0), lambda: setattr(mem, "M", 10 ** 6),
                    lambda: object.__setattr__(mem, "occupancy", 0),
                    lambda: setattr(mem, "read", print), lambda: mem._hold(-5),
                    lambda: delattr(mem, "writes")):
        with pytest.raises(AttributeError):
            attempt()
    assert _kinds(ref) == ["counters"] * 6
    assert mem.M == 10 and mem.reads == 0


def test_an_overflow_is_recorded_even_when_caught():
    ref = Referee(5, owner="t")
    A = ref.load("A", np.ones((3, 3)))
    with pytest.raises(CacheOverflowError, match="M = 5"):
        ref.memory.read(A)
    assert _kinds(ref) == ["cache"] and ref.memory.occupancy == 0


def test_freed_buffers_are_poisoned_and_writes_are_tracked():
    ref = Referee(10, owner="t")
    A = ref.load("A", np.ones((2, 3)))
    C = ref.output("C", (2, 3))
    mem = ref.memory
    a = mem.read(A, 0)
    mem.write(C, a, 0)
    mem.free(a)
    assert np.isnan(a).all()
    np.testing.assert_array_equal(ref.written(C), [[True] * 3, [False] * 3])
    with pytest.raises(ValueError, match="only values held in the cache"):
        mem.write(C, np.ones(3), 1)
    with pytest.raises(ValueError, match="freed already"):
        mem.free(a)


def test_the_armed_call_records_the_violations_of_a_submission():
    ref = Referee(10, owner="cheat")
    A = ref.load("A", np.ones((2, 2)))

    def cheat(mem, A):
        values = A._data.copy()                      # a peek
        try:
            mem.reads = -1                           # and a tampered counter
        except AttributeError:
            pass
        return values

    done = call(cheat, (ref.memory, A), name="cheat", referee=ref)
    assert done.error is None and isinstance(done.returned, np.ndarray)
    assert _kinds(ref) == ["uncounted", "counters"]


def test_a_replaced_class_method_is_caught_even_if_put_back():
    ref = Referee(10, owner="t")
    A = ref.load("A", np.ones((2, 2)))

    def patch(mem, A):
        honest = GradedMemory.free
        GradedMemory.free = lambda self, *b: None
        try:
            mem.read(A, 0)
        finally:
            GradedMemory.free = honest

    call(patch, (ref.memory, A), name="patch", referee=ref)
    assert "counters" in _kinds(ref)


def test_time_limit():
    ref = Referee(10, owner="t")

    def forever(mem):
        while True:
            pass

    done = call(forever, (ref.memory,), name="forever", referee=ref, time_limit=0.2)
    assert done.timed_out and done.seconds < 5
