"""The memory model: exact counts, capacity, opaque slow memory, traces."""

import numpy as np
import pytest

from ioattn import CacheOverflowError, IOCount, Transfer, TwoLevelMemory


@pytest.fixture
def mem():
    return TwoLevelMemory(20)


def test_a_tile_read_is_one_call_counting_its_entries(mem):
    A = mem.load("A", np.arange(30.0).reshape(5, 6))
    tile = mem.read(A, slice(1, 4), slice(2, 5))
    assert tile.shape == (3, 3)
    np.testing.assert_array_equal(tile, np.arange(30.0).reshape(5, 6)[1:4, 2:5])
    assert (mem.reads, mem.writes, mem.occupancy, mem.peak) == (9, 0, 9, 9)


def test_missing_axes_are_whole_and_ints_drop_their_axis(mem):
    A = mem.load("A", np.arange(12.0).reshape(3, 4))
    rows = mem.read(A, slice(0, 2))
    row = mem.read(A, 2)
    assert rows.shape == (2, 4) and row.shape == (4,)
    assert mem.reads == 12


def test_writes_count_and_land(mem):
    out = mem.allocate_slow("O", (2, 3))
    buf = mem.allocate((2, 3), fill=7.0)
    mem.write(out, buf[:, :2], slice(0, 2), slice(0, 2))     # a view of a cache buffer
    assert mem.writes == 4
    got = mem.fetch(out)
    np.testing.assert_array_equal(got[:, :2], 7.0)
    assert np.isnan(got[:, 2]).all()                           # never written: still NaN


def test_free_releases_and_peak_remembers(mem):
    A = mem.load("A", np.ones((4, 4)))
    a = mem.read(A, slice(0, 4))
    b = mem.allocate(3)
    mem.free(a)
    assert (mem.occupancy, mem.peak) == (3, 19)
    mem.free(b)
    assert mem.occupancy == 0
    assert mem.io == IOCount(reads=16, writes=0, peak=19)
    assert mem.io.total == 16


def test_overflow_names_M_the_occupancy_and_the_tile():
    mem = TwoLevelMemory(10, owner="demo")
    A = mem.load("K", np.ones((4, 4)))
    mem.read(A, slice(0, 2))                                   # 8 entries
    with pytest.raises(CacheOverflowError) as err:
        mem.read(A, slice(2, 4), slice(0, 1))                  # 2 more would fit: 10
        mem.read(A, slice(0, 1), slice(0, 1))                  # 11 would not
    text = str(err.value)
    assert "M = 10" in text and "holds 10" in text and "K[0:1, 0:1]" in text and "demo" in text
    with pytest.raises(CacheOverflowError, match="scratch"):
        mem.allocate(1, "scratch")


def test_a_failed_read_counts_nothing():
    mem = TwoLevelMemory(3)
    A = mem.load("A", np.ones((2, 2)))
    with pytest.raises(CacheOverflowError):
        mem.read(A)
    assert (mem.reads, mem.occupancy) == (0, 0)


def test_slow_memory_is_opaque(mem):
    A = mem.load("A", np.ones((2, 2)))
    for peek in (np.asarray, lambda h: h[0], list):
        with pytest.raises(TypeError, match="slow memory"):
            peek(A)
    assert "SlowArray('A', 2x2)" == repr(A)


def test_only_cache_values_can_be_written(mem):
    out = mem.allocate_slow("O", (2,))
    with pytest.raises(ValueError, match="only values held in the cache"):
        mem.write(out, np.zeros(2))
    buf = mem.allocate(2)
    mem.free(buf)
    with pytest.raises(ValueError, match="only values held in the cache"):
        mem.write(out, buf)                                    # freed: no longer in the cache
    assert mem.writes == 0


def test_write_shape_must_match(mem):
    out = mem.allocate_slow("O", (3, 3))
    buf = mem.allocate((2, 2))
    with pytest.raises(ValueError, match=r"shape \(2, 2\).*O\[0:3, 0:3\]"):
        mem.write(out, buf)


def test_tiles_are_contiguous_and_handles_belong_to_their_memory(mem):
    A = mem.load("A", np.ones((4, 4)))
    with pytest.raises(IndexError, match="step"):
        mem.read(A, slice(0, 4, 2))
    with pytest.raises(IndexError, match="slices or ints"):
        mem.read(A, [0, 1])
    other = TwoLevelMemory(5).load("B", np.ones(2))
    with pytest.raises(TypeError, match="SlowArray of this memory"):
        mem.read(other)


def test_double_free_is_an_error(mem):
    b = mem.allocate(2)
    mem.free(b)
    with pytest.raises(ValueError, match="freed already"):
        mem.free(b)


def test_trace_records_transfers_in_order():
    mem = TwoLevelMemory(8, trace=True)
    A = mem.load("A", np.ones((3, 3)))
    out = mem.allocate_slow("B", 3)
    t = mem.read(A, slice(1, 3), slice(0, 2))
    mem.write(out, t[0], slice(0, 2))
    assert mem.trace == [Transfer("read", "A", (1, 3), (0, 2), 4),
                         Transfer("write", "B", (0, 2), None, 2)]
    assert TwoLevelMemory(8).trace is None


def test_fetch_is_not_a_transfer(mem):
    A = mem.load("A", np.ones((3, 3)))
    mem.fetch(A)
    assert mem.io == IOCount(reads=0, writes=0, peak=0)


@pytest.mark.parametrize("M, error", [(0, ValueError), (-3, ValueError), (4.0, TypeError),
                                      ("8", TypeError), (True, TypeError)])
def test_M_must_be_a_positive_integer(M, error):
    with pytest.raises(error, match="M"):
        TwoLevelMemory(M)
