"""Tile programs: the vocabulary, the machine's checks, and counts equal to the memory model's."""

import numpy as np
import pytest

import ioattn
from ioattn.tiles import (
    CacheOverflowError,
    Machine,
    Memory,
    TileError,
    col_index,
    exp,
    log,
    maximum,
    minimum,
    row_index,
    sqrt,
    where,
)


def _mem(M=64, **arrays):
    mem = Memory(M, inspect=True)
    return mem, {k: mem.load(k, v) for k, v in arrays.items()}


def test_expressions_compute_what_numpy_does():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    mem, h = _mem(64, A=A, B=B)
    a, b = mem.read(h["A"]), mem.read(h["B"])
    c, v = mem.allocate((3, 2)), mem.allocate(3)
    c[...] = a @ b
    assert np.allclose(mem.values(c), A @ B)
    c += 2 * (a @ b) - 1
    assert np.allclose(mem.values(c), 3 * (A @ B) - 1)
    v[...] = exp(a).sum(axis=1) / a.max(axis=1) + minimum(a, 0).min(axis=1)
    want = np.exp(A).sum(1) / A.max(1) + np.minimum(A, 0).min(1)
    assert np.allclose(mem.values(v), want)
    c[...] = where(col_index(0, 2) <= row_index(0, 3), c, -np.inf)
    assert np.isneginf(mem.values(c)[0, 1]) and np.isfinite(mem.values(c)[1, 1])
    v[...] = log(sqrt(abs(a.sum(axis=1)) + 1))
    assert np.allclose(mem.values(v), np.log(np.sqrt(np.abs(A.sum(1)) + 1)))
    v[...] = maximum(v, a.max(axis=1))
    assert np.allclose(mem.values(v), np.maximum(np.log(np.sqrt(np.abs(A.sum(1)) + 1)), A.max(1)))
    c[1:3, 0:1] = 7.0
    assert (mem.values(c)[1:, 0] == 7).all()
    d = mem.allocate((2, 3))
    d[...] = a[0:2, 1:4]
    assert np.array_equal(mem.values(d), A[0:2, 1:4])


def test_counts_are_the_memory_models():
    """A tiled product as a tile program moves exactly what io_cost says for the same tiles."""
    m = k = n = 12
    b = 4
    M = b * b + 2 * b
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    mem, h = _mem(M, A=A, B=B)
    C = mem.output("C", (m, n))
    for i in range(0, m, b):
        for j in range(0, n, b):
            acc = mem.allocate((b, b))
            for t in range(k):
                a = mem.read(h["A"], slice(i, i + b), slice(t, t + 1))
                w = mem.read(h["B"], slice(t, t + 1), slice(j, j + b))
                acc += a @ w
                mem.free(a, w)
            mem.write(C, acc, slice(i, i + b), slice(j, j + b))
            mem.free(acc)
    assert np.allclose(mem.fetch(C), A @ B)
    assert mem.io.reads == 2 * m * n * k // b and mem.io.writes == m * n
    assert mem.io.peak == M and mem.occupancy == 0


def test_the_cache_limit_is_exact():
    mem, h = _mem(10, A=np.ones((4, 4)))
    t = mem.read(h["A"], slice(0, 2))                     # 8 entries
    with pytest.raises(CacheOverflowError):
        mem.read(h["A"], slice(2, 3))                     # 4 more: 12 > 10
    with pytest.raises(CacheOverflowError):
        mem.allocate(3)
    mem.allocate(2)
    assert mem.occupancy == 10 and mem.io.reads == 8      # the refused read moved nothing
    mem.free(t)
    assert mem.occupancy == 2


def test_an_assignment_is_one_fused_loop():
    mem, h = _mem(32, A=np.arange(6.0).reshape(2, 3))
    t, m = mem.read(h["A"]), mem.allocate(2)
    t[...] = exp(t) + t * 2                               # entry by entry: fine
    for bad in (lambda: t.__setitem__(Ellipsis, t - t.max(axis=1)[:, None]),
                lambda: t.__setitem__(Ellipsis, t @ mem.allocate((3, 3))),
                lambda: t.__setitem__((slice(0, 1),), t[1:2] + 1)):
        with pytest.raises(TileError, match="entry by entry"):
            bad()
    m[...] = t.max(axis=1)                                # a tile of its own: fine
    t[...] = t - m[:, None]


@pytest.mark.parametrize("request_, match", [
    (["nope"], "unknown request"),
    ("read", "a request is a list"),
    (["read", "Z", [[0, 1], [0, 1]]], "no array"),
    (["read", "A", [[0, 9], [0, 1]]], "not within"),
    (["read", "A", [[0, 1]]], "span"),
    (["alloc", [-1], 0.0], "shape"),
    (["alloc", [2], "x"], "fill"),
    (["free", [99]], "no tile"),
    (["set", ["tile", 0], ["frobnicate", 1]], "malformed"),
    (["set", ["tile", 0], ["num", True]], "malformed number"),
    (["set", ["tile", 0], ["rows", 0, 10 ** 9]], "too large"),
    (["values", ["tile", 0]], "does not show"),
    (["scratch", "A", [2]], "already has"),
    (["scratch", "big", [1 << 23]], "in all"),
    (["io", 1], "too many"),
])
def test_malformed_requests_are_refused_and_change_nothing(request_, match):
    machine = Machine(16)
    machine.load("A", np.ones((2, 2)))
    machine.request(["alloc", [2], 0.0])
    before = machine.request(["io"])
    with pytest.raises((TileError, CacheOverflowError), match=match):
        machine.request(request_)
    assert machine.request(["io"]) == before and list(machine.tiles) == [0]


def test_deep_expressions_are_refused():
    machine = Machine(16)
    machine.request(["alloc", [2], 1.0])
    node = ["tile", 0]
    for _ in range(100):
        node = ["neg", node]
    with pytest.raises(TileError, match="at most"):
        machine.request(["set", ["tile", 0], node])


def test_values_never_reach_the_program():
    mem, h = _mem(16, A=np.ones((2, 2)))
    t = mem.read(h["A"])
    for leak in (lambda: np.asarray(t), lambda: h["A"][0], lambda: bool(t > 0), lambda: float(t)):
        with pytest.raises(TypeError):
            leak()


def test_scratch_arrays_are_slow_memory():
    mem, h = _mem(8, A=np.arange(4.0))
    D = mem.scratch("D", 4)
    t = mem.read(h["A"])
    mem.write(D, t)
    mem.free(t)
    u = mem.read(D, slice(1, 3))
    assert mem.values(u).tolist() == [1.0, 2.0] and mem.io.total == 4 + 4 + 2


def test_a_flash_program_meets_the_package_count():
    """FlashAttention-2 written as a tile program moves what io_cost counts at its blocks."""
    N, d, B_r, B_c = 24, 4, 6, 4
    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((N, d)) for _ in range(3))
    mem, h = _mem(10_000, Q=Q, K=K, V=V)
    O = mem.output("O", (N, d))
    for i0 in range(0, N, B_r):
        Q_i = mem.read(h["Q"], slice(i0, i0 + B_r))
        O_i, m, l, m2 = (mem.allocate((B_r, d)), mem.allocate(B_r, -np.inf),
                         mem.allocate(B_r), mem.allocate(B_r))
        for j0 in range(0, N, B_c):
            K_j, V_j = mem.read(h["K"], slice(j0, j0 + B_c)), mem.read(h["V"], slice(j0, j0 + B_c))
            S = mem.allocate((B_r, B_c))
            S[...] = (Q_i @ K_j.T) / np.sqrt(d)
            m2[...] = maximum(m, S.max(axis=1))
            S[...] = exp(S - m2[:, None])
            m[...] = exp(m - m2)
            l[...] = l * m + S.sum(axis=1)
            O_i[...] = O_i * m[:, None] + S @ V_j
            m[...] = m2
            mem.free(S, K_j, V_j)
        O_i /= l[:, None]
        mem.write(O, O_i, slice(i0, i0 + B_r))
        mem.free(Q_i, O_i, m, l, m2)
    S = Q @ K.T / np.sqrt(d)
    P = np.exp(S - S.max(1, keepdims=True))
    assert np.allclose(mem.fetch(O), (P / P.sum(1, keepdims=True)) @ V)
    assert mem.io.total == ioattn.io_cost("flash", N, d, 10_000, block=(B_r, B_c)).total
