"""Property: random good and bad calls never corrupt the memory's books.

A random program interleaves valid calls with bad ones (negative, float and huge shapes, bad names
and fills, foreign handles and buffers, views, double frees, bad tiles, wrong dtypes) and with
buffers resized in place behind the memory's back. After every step:

- the reported occupancy is the sum of the live buffers' current sizes;
- the reported peak is the largest occupancy seen so far (so at least every one of them);
- a call that raised left everything as it was: counts, occupancy, peak, trace, live buffers and
  the contents of slow memory;
- a call that succeeded did exactly what it should (counts, trace, live buffers), and a valid
  call raised CacheOverflowError exactly when the cache would hold more than ``M`` entries.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ioattn import CacheOverflowError, TwoLevelMemory

M = 24
A_VALUES = np.arange(30.0).reshape(5, 6)
BAD_SHAPES = [-1, (-10 ** 7, 1), (2, -1), 2.5, (2.0, 3), True, (True, 1), "3", None,
              (np.float64(2),), (1, 2, 3), [[2]], {2: 3}]
HUGE_SHAPES = [M + 1, 10 ** 12, (10 ** 9, 10 ** 9), 2 ** 80]
BAD_TILES = [(slice(0, 4, 2),), (slice(4, 0, -1),), (slice(0, 2.5),), (slice(0, 2, 1.0),), (None,),
             (Ellipsis,), ([0, 1],), (np.array([0]),), (True,), (1.0,), (0, 0, 0), (5,), (-6,),
             (0, 6), (slice(None), 9)]


def pick(data, items):
    """One of ``items``, drawn by its position: Hypothesis keeps no reference (nor weak reference,
    which would stop ``ndarray.resize``) to the buffers themselves."""
    return items[data.draw(st.integers(0, len(items) - 1))]


class World:
    """The memory under test, what the test believes it holds, and things to misuse."""

    def __init__(self):
        self.mem = TwoLevelMemory(M, trace=True, owner="property")
        self.other = TwoLevelMemory(M)
        self.A = self.mem.load("A", A_VALUES)
        self.O = self.mem.allocate_slow("O", (8, 8))
        self.F = self.mem.allocate_slow("F", 4 * M)       # long enough for any buffer, flat
        self.foreign_handle = self.other.load("B", np.ones((2, 2)))
        self.foreign_buffer = self.other.allocate(3)
        self.live: list[np.ndarray] = []
        self.freed: list[np.ndarray] = []

    def held(self) -> int:
        return sum(b.size for b in self.live)

    def state(self):
        mem = self.mem
        return (mem.reads, mem.writes, mem.occupancy, mem.peak, tuple(mem.trace),
                sorted(mem._buffers), mem.fetch(self.O).tobytes(), mem.fetch(self.F).tobytes())


# Each action draws its arguments and returns (call, expected, on_success):
# expected is "ok", "overflow" or "bad" (TypeError, ValueError or IndexError).

def good_allocate(w, data):
    shape = data.draw(st.one_of(st.integers(0, 8), st.tuples(st.integers(0, 5), st.integers(0, 5)),
                                st.just(()), st.tuples(st.integers(0, 4).map(np.int64))))
    fill = data.draw(st.sampled_from([0.0, None, -np.inf, 2, np.float32(1.5)]))
    entries = int(np.prod(shape))
    expected = "overflow" if w.held() + entries > w.mem.M else "ok"

    def done(buf):
        assert buf.dtype == np.float64 and buf.size == entries
        w.live.append(buf)
    return (lambda: w.mem.allocate(shape, "tile", fill=fill)), expected, done


def bad_allocate(w, data):
    kind = data.draw(st.sampled_from(["shape", "huge", "label", "fill"]))
    if kind == "shape":
        shape = data.draw(st.sampled_from(BAD_SHAPES))
        return (lambda: w.mem.allocate(shape)), "bad", None
    if kind == "huge":
        shape = data.draw(st.sampled_from(HUGE_SHAPES))
        return (lambda: w.mem.allocate(shape)), "overflow", None
    if kind == "label":
        return (lambda: w.mem.allocate(1, label=5)), "bad", None
    fill = data.draw(st.sampled_from(["x", True, 1j, [0.0]]))
    return (lambda: w.mem.allocate(1, fill=fill)), "bad", None


def good_read(w, data):
    a, b = sorted(data.draw(st.tuples(st.integers(-1, 7), st.integers(-1, 7))))
    c = data.draw(st.integers(0, 4))
    index = data.draw(st.sampled_from([(slice(a, b),), (c,), (slice(a, b), slice(1, 3)),
                                       (c, slice(None, 4)), (c, -1), ()]))
    tile = A_VALUES[index]
    entries = np.size(tile)
    expected = "overflow" if w.held() + entries > w.mem.M else "ok"
    reads = w.mem.reads

    def done(buf):
        np.testing.assert_array_equal(buf, tile)
        assert isinstance(buf, np.ndarray) and w.mem.reads == reads + entries
        assert w.mem.trace[-1].op == "read" and w.mem.trace[-1].entries == entries
        w.live.append(buf)
    return (lambda: w.mem.read(w.A, *index)), expected, done


def bad_read(w, data):
    kind = data.draw(st.sampled_from(["tile", "handle", "label"]))
    if kind == "tile":
        index = data.draw(st.sampled_from(BAD_TILES))
        return (lambda: w.mem.read(w.A, *index)), "bad", None
    if kind == "handle":
        src = data.draw(st.sampled_from([w.foreign_handle, A_VALUES, "A", None]))
        return (lambda: w.mem.read(src, 0)), "bad", None
    return (lambda: w.mem.read(w.A, 0, label=3.0)), "bad", None


def _flat(buf):
    """A float64 view of every entry of ``buf``, and the tile of F it fits."""
    return buf.reshape(-1), (slice(0, buf.size),)


def good_write(w, data):
    if not w.live:
        return bad_write(w, data)
    buf = pick(data, w.live)
    if buf.ndim == 2 and data.draw(st.booleans()):
        dst, values, index = w.O, buf, (slice(0, buf.shape[0]), slice(0, buf.shape[1]))
    else:
        dst, (values, index) = w.F, _flat(buf)
    expected = "overflow" if w.held() > w.mem.M else "ok"
    writes, copy = w.mem.writes, np.array(values)

    def done(_):
        assert w.mem.writes == writes + copy.size
        np.testing.assert_array_equal(w.mem.fetch(dst)[index], copy)
        t = w.mem.trace[-1]
        assert (t.op, t.array, t.entries) == ("write", dst.name, copy.size)
    return (lambda: w.mem.write(dst, values, *index)), expected, done


def bad_write(w, data):
    kinds = ["foreign array", "other memory", "list", "handle", "shape"]
    if w.freed:
        kinds.append("freed")
    if any(b.size for b in w.live):
        kinds += ["dtype", "tile"]
    kind = data.draw(st.sampled_from(kinds))
    if kind == "foreign array":
        return (lambda: w.mem.write(w.F, np.zeros(2), slice(0, 2))), "bad", None
    if kind == "other memory":
        return (lambda: w.mem.write(w.F, w.foreign_buffer, slice(0, 3))), "bad", None
    if kind == "list":
        return (lambda: w.mem.write(w.F, [1.0], slice(0, 1))), "bad", None
    if kind == "freed":
        buf = pick(data, w.freed)
        values, index = _flat(buf)
        return (lambda: w.mem.write(w.F, values, *index)), "bad", None
    if kind == "handle":
        values = w.live[0] if w.live else w.foreign_buffer
        return (lambda: w.mem.write(w.foreign_handle, values)), "bad", None
    if kind == "shape":
        values = w.live[0] if w.live else w.foreign_buffer
        return (lambda: w.mem.write(w.F, values, slice(0, values.size + 1))), "bad", None
    buf = pick(data, [b for b in w.live if b.size])
    if kind == "dtype":
        values = buf.reshape(-1).view(np.int64)
        return (lambda: w.mem.write(w.F, values, slice(0, values.size))), "bad", None
    index = data.draw(st.sampled_from(BAD_TILES))
    return (lambda: w.mem.write(w.F, buf.reshape(-1), *index)), "bad", None


def good_free(w, data):
    if not w.live:
        return bad_free(w, data)
    chosen = data.draw(st.lists(st.integers(0, len(w.live) - 1), min_size=1, unique=True))
    bufs = [w.live[i] for i in chosen]
    expected = "overflow" if w.held() > w.mem.M else "ok"

    def done(_):
        w.live[:] = [b for i, b in enumerate(w.live) if i not in chosen]
        w.freed.extend(bufs)
    return (lambda: w.mem.free(*bufs)), expected, done


def bad_free(w, data):
    bad = [np.zeros(2), w.foreign_buffer, 3, None, *w.freed[-3:]]
    for buf in w.live[:3]:
        bad += [buf[...], buf.reshape(-1)[:1]]                 # views, not the buffers
    one = pick(data, bad)
    chosen = data.draw(st.lists(st.integers(0, len(w.live) - 1), max_size=2, unique=True)) \
        if w.live else []
    good = [w.live[i] for i in chosen]
    args = [*good, one]
    args.insert(data.draw(st.integers(0, len(good))), args.pop())
    if good and data.draw(st.booleans()):
        args = [*good, good[0]]                                # the same buffer twice
    return (lambda: w.mem.free(*args)), "bad", None


def resize(w, data):
    """Not a call to the memory: a live buffer changes size behind its back."""
    if not w.live:
        return None
    buf = pick(data, w.live)
    n = data.draw(st.integers(0, 2 * M))
    if data.draw(st.booleans()):
        return lambda: buf.resize(n, refcheck=False)
    state = np.arange(float(n)).__reduce__()[2]
    return lambda: buf.__setstate__(state)


def slow(w, data):
    """Slow-memory calls, good and bad: they never touch the cache."""
    name = data.draw(st.sampled_from(["S", "", 3, None]))
    if data.draw(st.booleans()):
        shape = data.draw(st.sampled_from([3, (2, 2), (0, 4), *BAD_SHAPES, (2 ** 40, 2 ** 40)]))
        call = lambda: w.mem.allocate_slow(name, shape)             # noqa: E731
        ok = isinstance(name, str) and name and shape in (3, (2, 2), (0, 4))
    else:
        values = data.draw(st.sampled_from(["ones", "ragged", "text", "complex", "3-D"]))
        arg = {"ones": np.ones((2, 3)), "ragged": [[1.0], [2.0, 3.0]], "text": ["a"],
               "complex": [1j], "3-D": np.ones((1, 1, 1))}[values]
        call = lambda: w.mem.load(name, arg)                         # noqa: E731
        ok = isinstance(name, str) and name and values == "ones"
    return call, "ok" if ok else "bad", None


ACTIONS = [good_allocate, good_allocate, good_read, good_read, good_write, good_free, good_free,
           bad_allocate, bad_read, bad_write, bad_free, resize, resize, slow]


@settings(max_examples=150)
@given(st.data())
def test_random_calls_keep_the_books_straight(data):
    w = World()
    seen = 0
    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        action = data.draw(st.sampled_from(ACTIONS), label="action")
        if action is resize:
            change = resize(w, data)
            if change is not None:
                change()
        else:
            call, expected, done = action(w, data)
            before = w.state()
            try:
                result = call()
            except CacheOverflowError:
                outcome = "overflow"
            except (TypeError, ValueError, IndexError):
                outcome = "bad"
            else:
                outcome = "ok"
            assert outcome == expected, (action.__name__, outcome, expected)
            if outcome == "ok":
                if done is not None:
                    done(result)
            else:
                assert w.state() == before, action.__name__
        occupancy = w.mem.occupancy
        assert occupancy == w.held()
        assert sorted(w.mem._buffers) == sorted(map(id, w.live))
        seen = max(seen, occupancy)
        assert w.mem.peak == w.mem.io.peak == seen
        assert w.mem.reads == sum(t.entries for t in w.mem.trace if t.op == "read")
        assert w.mem.writes == sum(t.entries for t in w.mem.trace if t.op == "write")
