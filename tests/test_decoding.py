"""Paged, split-K, grouped decoding: the counted run equals the closed form, field by field."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ioattn import bounds
from ioattn.decoding import (TERMS, decoding_cost, decoding_flops, decoding_plan,
                             decoding_predict, decoding_terms, page_reads, run_decoding,
                             split_tiles, tile_pages)
from ioattn.gpus import GPUS
from ioattn.masks import causal_chunk
from ioattn.memory import CacheOverflowError
from ioattn.roofline import terms

from .conftest import reference_attention, relative_error

H_Q = 16
GROUPS = (1, 2, 8, H_Q)                       # g: multi-head, grouped, multi-query
N_QS = (1, 2, 7, 64)


def _cache(H_q, H_kv, N_q, N_k, d, seed=0, batch=None):
    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    return (rng.standard_normal(lead + (H_q, N_q, d)), rng.standard_normal(lead + (H_kv, N_k, d)),
            rng.standard_normal(lead + (H_kv, N_k, d)))


def _pool(K, V, P_s, seed=0, spare=3):
    """A shuffled page pool ``(blocks, H_kv, P_s, d)`` and block table for the caches of ``K``,
    ``V`` (``(batch, H_kv, N_k, d)``): the pages of every sequence scattered over the pool
    among ``spare`` unused blocks; every slot no page fills holds 1e6 (read, it would show)."""
    batch, H_kv, N_k, d = K.shape
    n = -(-N_k // P_s)
    blocks = batch * n + spare
    rng = np.random.default_rng(seed)
    table = rng.permutation(blocks)[:batch * n].reshape(batch, n)
    pools = [np.full((blocks, H_kv, P_s, d), 1e6) for _ in range(2)]
    for b, p in itertools.product(range(batch), range(n)):
        rows = min(P_s, N_k - p * P_s)
        for pool, X in zip(pools, (K, V)):
            pool[table[b, p], :, :rows] = X[b, :, p * P_s:p * P_s + rows]
    return pools[0], pools[1], table


def _reference(Q, K, V, g, causal):
    H_q, N_q, _ = Q.shape
    mask = causal_chunk(N_q, K.shape[1]) if causal else None
    return np.stack([reference_attention(Q[h], K[h // g], V[h // g], mask=mask)
                     for h in range(H_q)])


def _check(Q, K, V, B_c, P_s, S, grouping, causal, *, paged=True, seed=0, B_r=None):
    """Run (through a shuffled pool when ``P_s`` and ``paged``) at M = the closed form's peak;
    the count must equal the closed form and the output the softmax reference."""
    Qb, Kb, Vb = (X if X.ndim == 4 else X[None] for X in (Q, K, V))
    batch, H_q, N_q, d = Qb.shape
    H_kv, N_k = Kb.shape[1], Kb.shape[2]
    cost = decoding_cost(H_q, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s, S=S, grouping=grouping,
                         batch=batch, B_r=B_r)
    if P_s is not None and paged:
        Kp, Vp, table = _pool(Kb, Vb, P_s, seed)
        r = run_decoding(Q, Kp, Vp, cost.peak, B_c=B_c, S=S, grouping=grouping, causal=causal,
                         table=table if Q.ndim == 4 else table[0], N_k=N_k, B_r=B_r)
    else:
        r = run_decoding(Q, K, V, cost.peak, B_c=B_c, P_s=P_s, S=S, grouping=grouping,
                         causal=causal, B_r=B_r)
    assert r.io == cost
    assert r.output.shape == Q.shape
    g = H_q // H_kv
    for b in range(batch):
        out = r.output if Q.ndim == 3 else r.output[b]
        assert relative_error(out, _reference(Qb[b], Kb[b], Vb[b], g, causal)) <= 1e-12
    return r


@pytest.mark.parametrize("N_q", N_QS)
@pytest.mark.parametrize("g", GROUPS)
def test_counted_equals_closed_form(g, N_q):
    d, H_kv = 2, H_Q // g
    # B_c = 8 with pages that divide it (4), that do not (3; 5 with N_k not a multiple), and
    # that are larger than the tile (11)
    for N_k, P_s, grouping in itertools.product((N_q + 29, 64), (None, 4, 3, 5, 11),
                                                ("stacked", "per_head")):
        Q, K, V = _cache(H_Q, H_kv, N_q, N_k, d, seed=g + N_q + N_k)
        T = -(-N_k // 8)
        for S, causal in itertools.product((1, 2, T), (False, True)):
            _check(Q, K, V, 8, P_s, S, grouping, causal)


@pytest.mark.parametrize("grouping", ["stacked", "per_head"])
def test_batch_shares_one_shuffled_pool(grouping):
    Q, K, V = _cache(8, 2, 3, 37, 4, seed=5, batch=3)
    for P_s, S in [(5, 3), (6, 1), (16, 2), (1, 4)]:
        _check(Q, K, V, 6, P_s, S, grouping, True, seed=P_s)
        _check(Q, K, V, 6, P_s, S, grouping, False, paged=False)      # identity table


def test_pages_in_place_and_scattered_count_the_same():
    Q, K, V = _cache(4, 2, 2, 23, 3, seed=1)
    a = _check(Q, K, V, 4, 3, 2, "stacked", False, paged=False)
    b = _check(Q, K, V, 4, 3, 2, "stacked", False, paged=True, seed=9)
    assert a.io == b.io
    assert np.array_equal(a.output, b.output)


def test_run_fails_one_entry_below_the_peak():
    Q, K, V = _cache(8, 2, 2, 30, 4, seed=2)
    for P_s, S in [(None, 1), (3, 2), (7, 3)]:
        c = decoding_cost(8, 2, 2, 30, 4, B_c=4, P_s=P_s, S=S)
        with pytest.raises((CacheOverflowError, ValueError)):
            run_decoding(Q, K, V, c.peak - 1, B_c=4, P_s=P_s, S=S)


@pytest.mark.parametrize("g, N_q", [(1, 7), (4, 3), (8, 1)])
def test_row_groups_counted_equal_closed_form(g, N_q):
    """Row groups of every size (ragged last group included), with and without pages (dividing
    the tile or not), one split or several, dense and causal: counted = closed form, and the
    output is the reference's."""
    d, H_kv = 3, 2
    for N_k, P_s, grouping in itertools.product((N_q + 13, 32), (None, 4, 3), ("stacked",
                                                                             "per_head")):
        Q, K, V = _cache(g * H_kv, H_kv, N_q, N_k, d, seed=g + N_q + N_k)
        R = g * N_q if grouping == "stacked" else N_q
        T = -(-N_k // 4)
        sizes = sorted({1, min(2, R), (R + 1) // 2, R})
        for B_r, S, causal in itertools.product(sizes, (1, 3, T), (False, True)):
            r = _check(Q, K, V, 4, P_s, S, grouping, causal, B_r=B_r)
            assert r.plan.B_r == B_r and r.plan.G == -(-R // B_r)


def test_row_groups_read_the_cache_once_each():
    """Against one group: (G - 1) (2 d W + E) more reads a unit, the same writes; the peak is
    that of the largest group (B_r rows)."""
    for g, N_q, N_k, B_c, P_s, S, grouping in itertools.product(
            (1, 2, 8), (1, 3, 5), (9, 40), (1, 4), (None, 3), (1, 2), ("stacked", "per_head")):
        H_q, H_kv, d = 8, 8 // g, 5
        units, R = (H_kv, g * N_q) if grouping == "stacked" else (H_q, N_q)
        kw = dict(B_c=B_c, P_s=P_s, S=S, grouping=grouping, batch=2)
        one = decoding_cost(H_q, H_kv, N_q, N_k, d, **kw)
        assert decoding_cost(H_q, H_kv, N_q, N_k, d, B_r=R, **kw) == one
        W, E = page_reads(N_k, B_c, P_s)
        for B_r in range(1, R + 1):
            G = -(-R // B_r)
            c = decoding_cost(H_q, H_kv, N_q, N_k, d, B_r=B_r, **kw)
            assert c.reads - one.reads == 2 * units * (G - 1) * (2 * d * W + E)
            assert c.writes == one.writes
            assert c.peak == decoding_cost(H_q, H_kv, B_r, N_k, d, **{**kw, "grouping":
                                                                      "per_head"}).peak


def test_row_groups_by_hand():
    """The doctest: 4 stacked rows in groups of 3 (3 rows, then 1) read the 16 page rows of K
    and V and the 6 table entries twice."""
    one = decoding_cost(4, 1, 1, 10, 2, B_c=4, P_s=3, S=2)
    two = decoding_cost(4, 1, 1, 10, 2, B_c=4, P_s=3, S=2, B_r=3)
    assert two.reads == one.reads + 2 * 2 * 16 + 6 == 188 and two.writes == one.writes == 40
    # tiles 0 and 1 hold 2 entries and 6 page rows beside the 3 rows' Q, O, m, l, m_new, scores
    assert two.peak == 2 * 3 * 2 + 3 * 3 + 2 + 2 * 2 * 6 + 3 * 4 == 59


def test_plan_takes_the_fewest_row_groups_that_fit():
    """Without B_r: all R rows when a tile of one key fits beside them (today's plan), else
    G = ceil(R / B) for the most rows B that fit, balanced; each plan fits, and one group
    fewer does not."""
    for g, N_q, d, M, P_s, S in itertools.product((1, 4), (1, 5, 16), (4, 16), (300, 900, 3000),
                                                  (None, 4, 6), (1, 2)):
        H_q, R = 4 * g, g * N_q
        p = decoding_plan(H_q, 4, N_q, 200, d, M, P_s=P_s, S=S)
        assert p.footprint <= M and p.cost(3) == decoding_cost(
            H_q, 4, N_q, 200, d, B_c=p.B_c, P_s=P_s, S=S, batch=3, B_r=p.B_r)
        if decoding_cost(H_q, 4, N_q, 200, d, B_c=1, P_s=P_s, S=S).peak <= M:
            assert p.B_r == R and p == decoding_plan(H_q, 4, N_q, 200, d, M, P_s=P_s, S=S,
                                                     B_r=R)
            continue
        assert p.G == -(-R // p.B_r) >= 2 and p.B_r == -(-R // p.G)
        fewer = -(-R // (p.G - 1))                  # the rows of a group with one group fewer
        assert decoding_cost(H_q, 4, N_q, 200, d, B_c=1, P_s=P_s, S=S, B_r=fewer).peak > M


def test_row_groups_refuse_bad_input():
    with pytest.raises(ValueError, match="B_r = 5 rows a row group.*R = 4"):
        decoding_cost(4, 1, 1, 10, 2, B_c=4, B_r=5)
    with pytest.raises(ValueError, match="B_r must be at least 1"):
        decoding_terms(4, 1, 1, 10, 2, B_c=4, B_r=0)
    with pytest.raises(TypeError, match="B_r"):
        decoding_plan(4, 1, 1, 10, 2, 1000, B_r=2.0)
    with pytest.raises(ValueError, match="B_r = 3 rows a row group.*R = 2"):
        decoding_plan(4, 2, 1, 10, 2, 1000, B_r=3)
    Q, K, V = _cache(4, 1, 1, 12, 3)
    with pytest.raises(ValueError, match=r"B_c = 4 needs \d+ entries of cache for B_r = 2"):
        run_decoding(Q, K, V, 40, B_c=4, B_r=2)
    with pytest.raises(ValueError, match="no key tile fits.*B_r = 4 query rows"):
        run_decoding(Q, K, V, 40, B_r=4)
    assert run_decoding(Q, K, V, 40).plan.B_r == 2                  # chosen: it fits
    with pytest.raises(ValueError, match="the merge.*B_r = 1"):
        decoding_plan(4, 1, 1, 10, 2, 8, S=2)


@given(H_kv=st.integers(1, 2), g=st.integers(1, 4), N_q=st.integers(1, 6),
       N_k=st.integers(1, 40), d=st.integers(1, 4), B_c=st.integers(1, 12),
       P_s=st.one_of(st.none(), st.integers(1, 15)), S=st.integers(1, 6),
       grouping=st.sampled_from(["stacked", "per_head"]), causal=st.booleans(),
       B_r=st.integers(1, 24), batch=st.integers(1, 2), seed=st.integers(0, 100))
def test_random_row_groups(H_kv, g, N_q, N_k, d, B_c, P_s, S, grouping, causal, B_r, batch,
                           seed):
    S = min(S, -(-N_k // B_c))
    N_q = min(N_q, N_k) if causal else N_q
    R = g * N_q if grouping == "stacked" else N_q
    Q, K, V = _cache(g * H_kv, H_kv, N_q, N_k, d, seed=seed, batch=batch)
    _check(Q, K, V, B_c, P_s, S, grouping, causal, seed=seed, B_r=min(B_r, R))


@given(H_kv=st.integers(1, 3), g=st.integers(1, 4), N_q=st.integers(1, 9),
       N_k=st.integers(1, 60), d=st.integers(1, 5), B_c=st.integers(1, 20),
       P_s=st.one_of(st.none(), st.integers(1, 25)), S=st.integers(1, 8),
       grouping=st.sampled_from(["stacked", "per_head"]), causal=st.booleans(),
       batch=st.integers(1, 2), seed=st.integers(0, 100))
def test_random_sizes(H_kv, g, N_q, N_k, d, B_c, P_s, S, grouping, causal, batch, seed):
    S = min(S, -(-N_k // B_c))
    N_q = min(N_q, N_k) if causal else N_q
    Q, K, V = _cache(g * H_kv, H_kv, N_q, N_k, d, seed=seed, batch=batch)
    _check(Q, K, V, B_c, P_s, S, grouping, causal, seed=seed)


# ------------------------------------------------------------------------------ the closed form
def test_page_reads_equal_the_tiles_one_by_one():
    for N_k, B_c, P_s in itertools.product(range(1, 70), range(1, 22), [None, *range(1, 30)]):
        T = -(-N_k // B_c)
        seen = [tile_pages(t, N_k, B_c, P_s) for t in range(T)]
        assert page_reads(N_k, B_c, P_s) == (sum(w for _, w, _ in seen),
                                              sum(len(p) for p, _, _ in seen))
        assert sum(c for _, _, c in seen) == N_k


def test_page_reads_at_large_sizes_are_exact_ints():
    W, E = page_reads(10 ** 15 + 3, 10 ** 6 + 1, 4096)
    assert isinstance(W, int) and isinstance(E, int) and W >= 10 ** 15 + 3
    c = decoding_cost(128, 8, 4, 10 ** 15 + 3, 128, B_c=10 ** 6, P_s=4096, batch=10 ** 4)
    assert isinstance(c.total, int) and c.total > 2 ** 63


def test_terms_sum_to_the_cost():
    for args in itertools.product((1, 2, 4), (1, 3), (5, 31), (1, 4), (None, 3, 8)):
        g, N_q, N_k, B_c, P_s = args
        for S, grouping in itertools.product(range(1, -(-N_k // B_c) + 1), ("stacked",
                                                                          "per_head")):
            kw = dict(B_c=B_c, P_s=P_s, S=S, grouping=grouping, batch=2)
            t, c = decoding_terms(4 * g, 4, N_q, N_k, 3, **kw), decoding_cost(4 * g, 4, N_q, N_k,
                                                                               3, **kw)
            assert tuple(t) == TERMS
            assert c.reads == sum(t.values()) - t["partial writes"] - t["O"]
            assert c.writes == t["partial writes"] + t["O"]


def test_whole_pages_cost_more_exactly_where_the_page_does_not_divide_the_tile():
    """Reading pages whole moves W > N_k rows iff some tile boundary cuts a page: T >= 2 and
    P_s not dividing B_c. A formula reading only the needed rows would miss the difference."""
    for N_k, B_c, P_s in itertools.product(range(1, 60), range(1, 18), range(1, 18)):
        W, E = page_reads(N_k, B_c, P_s)
        T, n = -(-N_k // B_c), -(-N_k // P_s)
        cut = [t for t in range(1, T) if (t * B_c) % P_s]
        assert (W > N_k) == (T >= 2 and B_c % P_s != 0)
        assert E == n + len(cut)                         # one more entry per cut
        assert W - N_k == sum(min(P_s, N_k - (t * B_c // P_s) * P_s) for t in cut)
        whole = decoding_cost(4, 2, 1, N_k, 3, B_c=B_c, P_s=P_s).total
        needed = decoding_cost(4, 2, 1, N_k, 3, B_c=B_c).total + 2 * E
        assert (whole != needed) == (T >= 2 and B_c % P_s != 0)
        assert whole - needed == 2 * 2 * 3 * (W - N_k)   # units 2, 2d (W - N_k)


def test_what_splitting_costs():
    """Against S = 1: (S - 1) R d more reads of Q and 2 S R (d + 2) of partials, per unit."""
    for g, N_q, N_k, B_c, P_s, grouping in itertools.product(
            (1, 2, 8), (1, 3), (9, 40), (1, 4), (None, 3), ("stacked", "per_head")):
        H_q, H_kv, d = 8, 8 // g, 5
        units, R = (H_kv, g * N_q) if grouping == "stacked" else (H_q, N_q)
        one = decoding_cost(H_q, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s, grouping=grouping,
                            batch=3)
        for S in range(2, -(-N_k // B_c) + 1):
            c = decoding_cost(H_q, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s, S=S, grouping=grouping,
                              batch=3)
            assert c.total - one.total == 3 * units * (2 * S * R * (d + 2) + (S - 1) * R * d)
            assert c.writes - one.writes == 3 * units * S * R * (d + 2)


def test_doctest_example_by_hand():
    # 4 stacked query heads, d = 2, 10 keys, tiles of 4 over pages of 3, two splits of
    # tiles [0, 1] and [2]: pages {0,1}, {1,2}, {2,3}: 6 entries, 3+3 + 3+3 + 3+1 = 16 rows
    assert [list(r) for r in split_tiles(3, 2)] == [[0, 1], [2]]
    c = decoding_cost(4, 1, 1, 10, 2, B_c=4, P_s=3, S=2)
    assert c.reads == 2 * 4 * 2 + 2 * 2 * 16 + 6 + 2 * 4 * 4
    assert c.writes == 4 * 2 + 2 * 4 * 4
    # tiles 0 and 1 hold 2 entries, 6 page rows (K and V) and 4 x 4 scores beside
    # Q, O (8 each) and m, l, m_new (4 each)
    assert c.peak == 2 * 4 * 2 + 3 * 4 + 2 + 2 * 2 * 6 + 4 * 4


@pytest.mark.parametrize("bad, error, words", [
    (dict(H_kv=3), ValueError, "divide"),
    (dict(S=4), ValueError, "S = 4"),
    (dict(B_c=True), TypeError, "B_c"),
    (dict(N_k=10.0), TypeError, "N_k"),
    (dict(d=0), ValueError, "d must be"),
    (dict(P_s=0), ValueError, "P_s"),
    (dict(P_s=False), TypeError, "P_s"),
    (dict(grouping="stack"), ValueError, "grouping"),
    (dict(batch=0), ValueError, "batch"),
    (dict(S=1.0), TypeError, "S"),
])
def test_cost_refuses_bad_input(bad, error, words):
    args = dict(H_q=4, H_kv=2, N_q=1, N_k=10, d=2, B_c=4, P_s=None, S=1, grouping="stacked",
                batch=1)
    args.update(bad)
    with pytest.raises(error, match=words):
        decoding_cost(args.pop("H_q"), args.pop("H_kv"), args.pop("N_q"), args.pop("N_k"),
                      args.pop("d"), **args)


def test_run_refuses_bad_input():
    Q, K, V = _cache(4, 2, 1, 12, 3)
    Kp, Vp, table = _pool(K[None], V[None], 5)
    with pytest.raises(ValueError, match="N_k"):
        run_decoding(Q, Kp, Vp, 10 ** 4, table=table[0])
    with pytest.raises(ValueError, match="table must have shape"):
        run_decoding(Q, Kp, Vp, 10 ** 4, table=table[0][:2], N_k=12)
    with pytest.raises(ValueError, match="blocks of the pool"):
        run_decoding(Q, Kp, Vp, 10 ** 4, table=table[0] + 100, N_k=12)
    with pytest.raises(TypeError, match="integers"):
        run_decoding(Q, Kp, Vp, 10 ** 4, table=table[0] * 1.0, N_k=12)
    with pytest.raises(ValueError, match="P_s = 4"):
        run_decoding(Q, Kp, Vp, 10 ** 4, table=table[0], N_k=12, P_s=4)
    with pytest.raises(ValueError, match="divide"):
        run_decoding(Q[:3], K, V, 10 ** 4)
    with pytest.raises(ValueError, match="S = 5"):
        run_decoding(Q, K, V, 10 ** 4, B_c=3, S=5)
    with pytest.raises(ValueError, match="N_q = 3 > N_k = 2"):
        run_decoding(Q[:, :1].repeat(3, axis=1), K[:, :2], V[:, :2], 10 ** 4, causal=True)
    with pytest.raises(TypeError, match="causal"):
        run_decoding(Q, K, V, 10 ** 4, causal="yes")
    # R = 2 rows do not fit in 20 entries, one row a group does (16 entries), none in 15
    assert run_decoding(Q, K, V, 20).plan.B_r == 1
    with pytest.raises(ValueError, match="no key tile fits"):
        run_decoding(Q, K, V, 15)
    with pytest.raises(ValueError, match="more than M"):
        run_decoding(Q, K, V, 100, B_c=12)


# ------------------------------------------------------------------------------ the block rule
def test_decode_plan_takes_the_largest_tile_that_fits():
    for H_q, H_kv, N_q, d, M, S, grouping in itertools.product(
            (8,), (1, 8), (1, 4), (16, 64), (3000, 20000), (1, 3), ("stacked", "per_head")):
        R = (H_q // H_kv) * N_q if grouping == "stacked" else N_q
        p = decoding_plan(H_q, H_kv, N_q, 4096, d, M, S=S, grouping=grouping)
        if (M - 2 * R * d - 3 * R) // (2 * d + R) < 1 or (S > 1 and 2 * R * d + 5 * R > M):
            # the rows do not fit: the fewest row groups that do, balanced
            most = max(b for b in range(1, R) if 2 * b * d + 3 * b + 2 * d + b <= M
                       and (S == 1 or 2 * b * d + 5 * b <= M))
            assert (p.G, p.B_r) == (-(-R // most), -(-R // -(-R // most)))
            assert p.B_c == min((M - 2 * p.B_r * d - 3 * p.B_r) // (2 * d + p.B_r), 4096 // S)
            assert p.footprint <= M and p.cost().peak == p.footprint
            continue
        assert p.B_r == R and p.G == 1
        assert R == ((H_q // H_kv) * N_q if grouping == "stacked" else N_q)
        assert p.B_c == min((M - 2 * R * d - 3 * R) // (2 * d + R), 4096 // S)
        assert p.footprint <= M
        assert p.cost().peak == p.footprint
        if p.B_c < 4096 // S:
            assert decoding_cost(H_q, H_kv, N_q, 4096, d, B_c=p.B_c + 1, S=S,
                                 grouping=grouping).peak > M


def test_a_decode_step_does_not_plan_as_if_N_q_were_N_k():
    """A step's tile is sized beside one query row (stacked: g), not beside N_k rows, which
    would not fit at all."""
    p = decoding_plan(32, 8, 1, 8192, 128, 116224)
    assert p.R == 4 and p.B_c == (116224 - 2 * 4 * 128 - 12) // (256 + 4)
    with pytest.raises(ValueError, match="no key tile fits"):
        decoding_plan(32, 8, 8192, 8192, 128, 116224, B_r=4 * 8192)
    p = decoding_plan(32, 8, 8192, 8192, 128, 116224)          # in row groups instead
    assert p.R == 4 * 8192 and p.B_r < p.R and p.footprint <= 116224


def test_paged_plan_prefers_whole_pages():
    for P_s in (1, 4, 16, 48):
        p = decoding_plan(8, 2, 1, 5000, 32, 10000, P_s=P_s)
        assert p.B_c % P_s == 0 and p.footprint <= 10000
        bigger = decoding_cost(8, 2, 1, 5000, 32, B_c=p.B_c + P_s, P_s=P_s)
        assert bigger.peak > 10000
    # a tile of a whole page does not fit; one that cuts a page reads two: only B_c | 200 fit
    p = decoding_plan(8, 2, 1, 5000, 32, 13500, P_s=200)
    assert decoding_cost(8, 2, 1, 5000, 32, B_c=200, P_s=200).peak > 13500
    assert p.B_c == 100 and p.footprint <= 13500
    assert all(decoding_cost(8, 2, 1, 5000, 32, B_c=b, P_s=200).peak > 13500
               for b in range(101, 200))


def test_planned_run_fits():
    Q, K, V = _cache(8, 2, 3, 50, 4, seed=3)
    for P_s, S in [(None, 1), (None, 4), (7, 2)]:
        r = run_decoding(Q, K, V, 600, P_s=P_s, S=S)
        assert r.io.peak <= 600 and r.io == r.plan.cost()
        assert relative_error(r.output, _reference(Q, K, V, 4, False)) <= 1e-12


# ------------------------------------------------------------------------------ bounds
def test_stacked_unsplit_aligned_meets_the_trivial_bound_plus_the_table():
    """The chapter's theorem, at every integer of its box."""
    checked = 0
    for H_kv, g, N_q, d, N_k in itertools.product(range(1, 4), range(1, 5), range(1, 5),
                                                  range(1, 5), range(1, 41)):
        trivial = bounds.grouped_trivial_lower(g * H_kv, H_kv, N_q, d, N_k=N_k)
        for P_s in range(1, 9):
            for B_c in range(P_s, 17, P_s):
                c = decoding_cost(g * H_kv, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s)
                assert c.total == trivial + H_kv * -(-N_k // P_s)
                checked += 1
        assert decoding_cost(g * H_kv, H_kv, N_q, N_k, d, B_c=3).total == trivial
    assert checked == 3 * 4 * 4 * 4 * 40 * sum(16 // P for P in range(1, 9))


def test_every_bound_below_every_count():
    checked = 0
    for H_kv, g, N_q, N_k, d, B_c, P_s in itertools.product(
            (1, 3), (1, 2, 8), (1, 2, 7, 64), (1, 5, 64, 300), (1, 4, 32), (1, 6, 64),
            (None, 1, 4, 5, 16, 100)):
        T = -(-N_k // B_c)
        for S, grouping, batch in itertools.product(sorted({1, 2, T}), ("stacked", "per_head"),
                                                    (1, 3)):
            if S > T:
                continue
            c = decoding_cost(g * H_kv, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s, S=S,
                              grouping=grouping, batch=batch)
            low = bounds.decoding_lower(g * H_kv, H_kv, N_q, N_k, d, c.peak, batch=batch)
            program = bounds.decoding_lower(g * H_kv, H_kv, N_q, N_k, d, c.peak, batch=batch,
                                            program=True)
            trivial = batch * bounds.grouped_trivial_lower(g * H_kv, H_kv, N_q, d, N_k=N_k)
            assert trivial <= low <= c.total and program <= c.total
            checked += 1
    assert checked >= 10_000


# ------------------------------------------------------------------------------ the roofline
def test_prediction_is_the_roofline_of_the_exact_bytes():
    p = decoding_predict(32, 8, 1, 8192, 128, gpu="H100", batch=4, layers=32, P_s=16, S=2)
    t = p.terms
    assert t == decoding_terms(32, 8, 1, 8192, 128, B_c=p.plan.B_c, P_s=16, S=2, batch=4)
    nbytes = 32 * (2 * (t["Q"] + t["KV"] + t["O"]) + 4 * t["table"]
                   + 4 * (t["partial writes"] + t["partial reads"]))
    assert p.bytes == nbytes
    assert p.flops == 32 * decoding_flops(32, 1, 8192, 128, batch=4) == 32 * 4 * 4 * 32 * 8192 * 128
    assert (p.memory_time, p.compute_time) == terms(nbytes, p.flops, gpu="H100", dtype="bfloat16")
    assert p.tokens_per_second == 4 / p.time
    assert p.plan.footprint <= GPUS["H100"].shared_per_block // 2


def test_batch_does_not_move_the_intensity_g_and_N_q_do():
    def intensity(**kw):
        p = decoding_predict(**{**dict(H_q=32, H_kv=8, N_q=1, N_k=8192, d=128, gpu="H100"),
                                **kw})
        return Fraction(p.flops, p.bytes)

    base = intensity()
    assert all(intensity(batch=b) == base for b in (2, 7, 64))
    assert intensity(H_kv=1) > intensity(H_kv=4) > base            # g = 32, 8, 4
    assert intensity(N_q=4) > intensity(N_q=2) > base
    # per head, every query head reads the cache: the intensity does not grow with g
    assert intensity(H_kv=1, grouping="per_head") == intensity(H_kv=32, grouping="per_head")


def test_memory_bound_exactly_below_the_ridge():
    """Stacked, contiguous, S = 1, N_k = 8192, d = 128 on an H100 in bf16: the intensity is
    R N_k / (R + N_k) flops a byte for R = g N_q rows, memory-bound iff R <= 306, at every R
    from 1 to the largest unit that fits in shared memory."""
    M = GPUS["H100"].shared_per_block // 2
    largest = max(R for R in range(1, 1000)
                  if 2 * R * 128 + 3 * R + 256 + R <= M)             # B_c = 1 fits
    assert largest == 446
    for R in range(1, largest + 1):
        p = decoding_predict(8, 8, R, 8192, 128, gpu="H100")          # g = 1, N_q = R
        assert Fraction(p.flops, p.bytes) == Fraction(R * 8192, R + 8192)
        assert (p.bound == "memory") == (R <= 306)
        q = decoding_predict(8 * R, 8, 1, 8192, 128, gpu="H100") if R <= 64 else p
        assert Fraction(q.flops, q.bytes) == Fraction(R * 8192, R + 8192)


def test_predict_refuses_bad_input():
    with pytest.raises(ValueError, match="unknown GPU"):
        decoding_predict(8, 8, 1, 64, 16, gpu="B200")
    with pytest.raises(ValueError, match="dtype"):
        decoding_predict(8, 8, 1, 64, 16, gpu="H100", dtype="int8")
    with pytest.raises(ValueError, match="no bfloat16 peak|bfloat16"):
        decoding_predict(8, 8, 1, 64, 16, gpu="T4")
