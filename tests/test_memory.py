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


# ----------------------------------------------------------------- bad input changes nothing

def _state(mem):
    """Everything a call could change: counts, occupancy, peak, trace, the live buffers."""
    return (mem.reads, mem.writes, mem.occupancy, mem.peak, tuple(mem.trace or ()),
            sorted(mem._buffers))


def test_a_negative_shape_is_refused_before_the_occupancy_moves():
    mem = TwoLevelMemory(20)
    with pytest.raises(ValueError, match="non-negative"):
        mem.allocate((-10 ** 7, 1))
    assert (mem.occupancy, mem.peak) == (0, 0)
    with pytest.raises(CacheOverflowError):                    # the capacity still holds
        mem.allocate(21)
    full = mem.allocate((4, 5))
    assert mem.occupancy == 20
    with pytest.raises(CacheOverflowError):
        mem.allocate(1)
    mem.free(full)


@pytest.mark.parametrize("shape, error", [
    (-1, ValueError), ((2, -1), ValueError), ((-10 ** 7, 1), ValueError),
    (2.5, TypeError), ((2.0, 3), TypeError), (True, TypeError), ((True, 2), TypeError),
    ("3", TypeError), (None, TypeError), ((np.float64(2),), TypeError), ({2: 3}, TypeError),
    ((1, 2, 3), ValueError), ([[2]], TypeError),
])
def test_bad_cache_shapes_are_refused_and_change_nothing(mem, shape, error):
    keep = mem.allocate(3)
    before = _state(mem)
    with pytest.raises(error, match="shape"):
        mem.allocate(shape)
    assert _state(mem) == before
    mem.free(keep)


def test_huge_shapes_overflow_the_cache_without_being_allocated(mem):
    for shape in (10 ** 12, (10 ** 9, 10 ** 9), 2 ** 80, (2 ** 40, 2 ** 40)):
        with pytest.raises(CacheOverflowError, match="M = 20"):
            mem.allocate(shape)
    assert (mem.occupancy, mem.peak) == (0, 0)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"label": 3}, TypeError, "label"), ({"fill": "x"}, TypeError, "fill"),
    ({"fill": True}, TypeError, "fill"), ({"fill": 1j}, TypeError, "fill"),
    ({"fill": 10 ** 400}, ValueError, "fill"),
])
def test_bad_labels_and_fills_are_refused(mem, kwargs, error, match):
    with pytest.raises(error, match=match):
        mem.allocate(2, **kwargs)
    assert (mem.occupancy, mem.peak) == (0, 0)


def test_fills_of_any_real_type_give_float_buffers(mem):
    for fill in (2, np.float32(1.5), np.int64(-1), -np.inf):
        buf = mem.allocate((1, 2), fill=fill)
        assert buf.dtype == np.float64 and (buf == fill).all()
        mem.free(buf)


@pytest.mark.parametrize("name, shape, error", [
    ("O", -1, ValueError), ("O", (2, 2, 2), ValueError), ("O", (), ValueError),
    ("O", 2.0, TypeError), ("O", (2 ** 40, 2 ** 40), ValueError), (3, 2, TypeError),
    ("", 2, ValueError), (None, 2, TypeError),
])
def test_bad_slow_arrays_are_refused(mem, name, shape, error):
    with pytest.raises(error):
        mem.allocate_slow(name, shape)


@pytest.mark.parametrize("values, error", [
    ([[1.0, 2.0], [3.0]], ValueError), ("abc", TypeError), ([1 + 2j], TypeError),
    (None, TypeError), (np.ones((2, 2, 2)), ValueError), (3.0, ValueError),
])
def test_bad_inputs_are_refused(mem, values, error):
    with pytest.raises(error):
        mem.load("X", values)


def test_slow_arrays_of_one_memory_cannot_be_loaded_into_another(mem):
    A = TwoLevelMemory(5).load("A", np.ones(2))
    with pytest.raises(TypeError, match="slow memory"):
        mem.load("B", A)
    with pytest.raises(TypeError, match="another memory"):
        mem.fetch(A)


@pytest.mark.parametrize("index, error", [
    ((slice(0, 2.5),), TypeError), ((slice(0, 4, 2),), IndexError),
    ((slice(4, 0, -1),), IndexError), ((slice(0, 4, 1.0),), IndexError),
    ((None,), IndexError), ((Ellipsis,), IndexError), (([0, 1],), IndexError),
    ((np.array([0, 1]),), IndexError), ((True,), IndexError), ((0.0,), IndexError),
    ((0, 0, 0), IndexError), ((4,), IndexError), ((-5,), IndexError),
])
def test_bad_tiles_are_refused_and_change_nothing(index, error):
    mem = TwoLevelMemory(20, trace=True)
    A = mem.load("A", np.ones((4, 4)))
    keep = mem.read(A, 0)
    out = mem.allocate_slow("O", (4, 4))
    before = _state(mem)
    with pytest.raises(error):
        mem.read(A, *index)
    with pytest.raises(error):
        mem.write(out, keep, *index)
    assert _state(mem) == before


def test_a_read_label_must_be_a_string(mem):
    A = mem.load("A", np.ones(2))
    with pytest.raises(TypeError, match="label"):
        mem.read(A, label=7)
    assert mem.reads == 0


def test_one_entry_read_with_ints_is_a_zero_d_buffer(mem):
    A = mem.load("A", np.arange(6.0).reshape(2, 3))
    out = mem.allocate_slow("O", (2, 3))
    x = mem.read(A, 1, 2)
    assert isinstance(x, np.ndarray) and x.shape == () and x == 5.0
    assert (mem.reads, mem.occupancy) == (1, 1)
    mem.write(out, x, 0, 0)
    assert mem.writes == 1 and mem.fetch(out)[0, 0] == 5.0


def test_writes_take_float_views_of_live_buffers_only(mem):
    out = mem.allocate_slow("O", (4,))
    buf = mem.allocate(4)
    other = TwoLevelMemory(8).allocate(4)
    with pytest.raises(TypeError, match="only values held in the cache"):
        mem.write(out, [0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="only values held in the cache"):
        mem.write(out, other)                                  # another memory's buffer
    with pytest.raises(ValueError, match="float64"):
        mem.write(out, buf.view(np.int64))
    with pytest.raises(ValueError, match="float64"):
        mem.write(mem.allocate_slow("P", 8), buf.view(np.float32))     # 8 float32 halves
    with pytest.raises(TypeError, match="SlowArray of this memory"):
        mem.write(np.zeros(4), buf)
    assert mem.writes == 0
    mem.write(out, buf[::-1])                                  # any float64 view is fine
    assert mem.writes == 4


def test_free_frees_all_or_nothing(mem):
    a, b = mem.allocate(2), mem.allocate(3)
    cases = [((a, a), ValueError, "twice"), ((a, np.zeros(2)), ValueError, "cache"),
             ((a, b[1:]), ValueError, "views"), ((a, 3), TypeError, "buffers"),
             ((a, None), TypeError, "buffers"),
             ((b, TwoLevelMemory(9).allocate(1)), ValueError, "cache")]
    for bad, error, match in cases:
        with pytest.raises(error, match=match):
            mem.free(*bad)
        assert mem.occupancy == 5 and sorted(mem._buffers) == sorted([id(a), id(b)])
    mem.free(a, b)
    assert mem.occupancy == 0


@pytest.mark.parametrize("kwargs, error", [({"trace": "yes"}, TypeError), ({"trace": 1}, TypeError),
                                           ({"owner": 3}, TypeError)])
def test_trace_and_owner_are_checked(kwargs, error):
    with pytest.raises(error):
        TwoLevelMemory(8, **kwargs)


# ----------------------------------------------------------------- capacity after the new tile

def test_a_schedule_keeping_one_scratch_row_beyond_M_is_caught():
    """Q_i (2 x 4) and O_i (1 x 4) fill M = 12 exactly; one more scratch row must not fit."""
    mem = TwoLevelMemory(12, owner="honest bug")
    Q = mem.load("Q", np.ones((4, 4)))
    Q_i = mem.read(Q, slice(0, 2))
    O_i = mem.allocate((1, 4), "O_i")
    assert mem.occupancy == mem.peak == 12                     # exactly M is allowed
    with pytest.raises(CacheOverflowError, match=r"scratch row \(4 entries\).*holds 12 of M = 12"):
        mem.allocate(4, "scratch row")
    with pytest.raises(CacheOverflowError, match=r"Q\[2:3, 0:4\]"):
        mem.read(Q, slice(2, 3))
    assert (mem.occupancy, mem.peak, mem.reads) == (12, 12, 8)
    mem.free(Q_i, O_i)


# ----------------------------------------------------------------- buffers that change size

def test_a_buffer_grown_past_M_in_place_is_caught_at_the_next_operation():
    mem = TwoLevelMemory(10, owner="resizer")
    A = mem.load("A", np.ones((2, 2)))
    out = mem.allocate_slow("O", 20)
    b = mem.allocate(4)
    b.resize(11, refcheck=False)                               # grows behind the memory's back
    assert mem.occupancy == 11 and mem.peak == 11 and mem.io.peak == 11
    before = _state(mem)
    with pytest.raises(CacheOverflowError, match="holds 11 of M = 10.*grew in place"):
        mem.read(A, 0)
    with pytest.raises(CacheOverflowError, match="grew in place"):
        mem.allocate(0)
    with pytest.raises(CacheOverflowError, match="resizer: cannot write to 'O'.*11 entries"):
        mem.write(out, b, slice(0, 11))
    with pytest.raises(CacheOverflowError, match="grew in place"):
        mem.free(b)
    assert _state(mem) == before
    b.resize(3, refcheck=False)                                # shrunk back: usable again
    mem.write(out, b, slice(0, 3))
    mem.free(b)
    assert (mem.occupancy, mem.peak, mem.writes) == (0, 11, 3)


def test_a_buffer_grown_within_M_counts_at_its_real_size():
    mem = TwoLevelMemory(10)
    A = mem.load("A", np.ones((2, 3)))
    b = mem.allocate(4)
    b.resize(8, refcheck=False)
    with pytest.raises(CacheOverflowError, match="holds 8 of M = 10"):
        mem.read(A, 0)                                         # 8 + 3 > 10; 4 + 3 would fit
    small = mem.read(A, 0, slice(0, 2))
    assert mem.occupancy == mem.peak == 10
    mem.free(small)
    b.resize(1, refcheck=False)                                # shrinking frees room
    t = mem.read(A)
    assert mem.occupancy == 7 and mem.peak == 10
    mem.free(t, b)
    assert mem.occupancy == 0


def test_a_growth_freed_before_any_transfer_still_raises_and_counts():
    mem = TwoLevelMemory(10)
    b = mem.allocate(2)
    b.resize(30, refcheck=False)
    with pytest.raises(CacheOverflowError):
        mem.free(b)
    b.resize(9, refcheck=False)
    mem.free(b)
    assert mem.io.peak == 30                                   # seen by the failed free


def test_any_in_place_size_change_counts():
    mem = TwoLevelMemory(50)
    b = mem.allocate((2, 2))
    b.__setstate__(np.arange(30.0).__reduce__()[2])            # unpickling in place: 30 entries
    assert mem.occupancy == 30
    with pytest.raises(CacheOverflowError, match="holds 30 of M = 50"):
        mem.allocate(21)
    mem.free(b)
    assert (mem.occupancy, mem.peak) == (0, 30)


def test_a_growth_seen_by_a_query_stays_in_the_peak():
    mem = TwoLevelMemory(10)
    b = mem.allocate(2)
    b.resize(7, refcheck=False)
    assert mem.occupancy == 7                                  # seen here...
    b.resize(1, refcheck=False)
    assert (mem.occupancy, mem.peak, mem.io.peak) == (1, 7, 7)  # ...and remembered
    mem.free(b)
