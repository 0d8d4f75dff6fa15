"""The decoding kernel (kernels/flash_decoding.cu: split-K, grouped, paged), run by the CPU emulator: the
output against float64 NumPy with the pages shuffled in a larger pool, and the traffic it counts
against ioattn.decoding.decoding_cost (grouping "stacked") for its B_c, P_s and S."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ioattn.gpu as gpu
from ioattn.decoding import decoding_cost
from ioattn.gpu.flash_decoding import (KERNELS, decode_plan, footprint, layout, max_rows,
                                       prepare_decode, row_stride)
from ioattn.gpu.backend import EmulatorBackend
from ioattn.gpu.emulator import OutOfBounds
from ioattn.gpus import GPUS
from ioattn.gpu.plans import MAX_GRID_Y, SharedMemoryExceeded

EMU = "emulator"


def reference(Q, K, V, scale=None, causal=False):
    """``O`` in float64 for ``Q (batch, H_q, N_q, d)`` against the contiguous ``K, V (batch,
    H_kv, N_k, d)``: query head ``h`` uses key/value head ``h // g``; with ``causal`` row ``i``
    sees the keys ``j <= N_k - N_q + i``; a row that sees no key is 0."""
    Q, K, V = (np.asarray(x, np.float64) for x in (Q, K, V))
    g = Q.shape[1] // K.shape[1]
    K, V = np.repeat(K, g, axis=1), np.repeat(V, g, axis=1)
    N_q, N_k, d = Q.shape[2], K.shape[2], Q.shape[3]
    s = (1 / np.sqrt(d) if scale is None else scale) * np.einsum("bhid,bhjd->bhij", Q, K)
    if causal:
        seen = np.arange(N_k)[None, :] <= N_k - N_q + np.arange(N_q)[:, None]
        s = np.where(seen, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.where(np.isfinite(m), np.exp(s - np.where(np.isfinite(m), m, 0)), 0)
    l = p.sum(axis=-1, keepdims=True)
    return np.where(l > 0, p / np.where(l > 0, l, 1), 0) @ V


def rounded(x, dtype="float32"):
    """``x`` as float32 holding values of ``dtype`` exactly (rounded to nearest even, as the
    kernel's storage is): the float64 reference of a 16-bit run then sees what the kernel
    reads."""
    from ioattn.gpu.api import to_storage

    x = np.asarray(x, np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        return (to_storage(x, dtype, np).astype(np.uint32) << 16).view(np.float32)
    return x


def paged(rng, K, V, P_s, spare=3, fill=np.nan):
    """``(K_pages, V_pages, table)``: the rows of ``K, V (batch, H_kv, N_k, d)`` in pages of
    ``P_s`` scattered over a pool with ``spare`` pages no sequence uses, in shuffled order. The
    unused pages and the slots past ``N_k`` of the last page hold ``fill`` (NaN: the kernel
    must never read them), and the table has one entry more per sequence than needed, -1."""
    batch, H_kv, N_k, d = K.shape
    n = -(-N_k // P_s)
    pool = batch * n + spare
    order = rng.permutation(pool)
    table = np.full((batch, n + 1), -1, dtype=np.int32)
    table[:, :n] = order[:batch * n].reshape(batch, n)
    Kp = np.full((pool, H_kv, P_s, d), fill, dtype=np.float32)
    Vp = Kp.copy()
    for b in range(batch):
        for p in range(n):
            rows = slice(p * P_s, min((p + 1) * P_s, N_k))
            w = rows.stop - rows.start
            Kp[table[b, p], :, :w] = K[b, :, rows]
            Vp[table[b, p], :, :w] = V[b, :, rows]
    return Kp, Vp, table


def check(rng, *, batch=1, H_q, H_kv, N_q, N_k, d, B_c=None, P_s=None, S=1, causal=False,
          logits=1.0, scale=None, tol=1e-5, dtype="float32", backend=EMU, B_r=None):
    """Run the kernel on fresh data (values of ``dtype``); assert the output (fully written,
    within ``tol`` of float64 relative to its largest entry) and the counted traffic
    (``decoding_cost`` for the plan)."""
    Q = rounded(logits * rng.standard_normal((batch, H_q, N_q, d)), dtype)
    K, V = (rounded(rng.standard_normal((batch, H_kv, N_k, d)), dtype) for _ in range(2))
    if P_s is None:
        args = (K, V, None)
    else:
        args = paged(rng, K, V, P_s)
    r = gpu.decode(Q, *args, N_k, S=S, B_c=B_c, causal=causal, scale=scale, dtype=dtype,
                   count_io=True, backend=backend, B_r=B_r)
    want = reference(Q, K, V, scale, causal)
    out = np.asarray(r.output)
    assert out.shape == Q.shape and out.dtype == np.float32
    assert np.isfinite(out).all(), "O not fully written"
    err = np.abs(out - want).max() / max(np.abs(want).max(), 1e-30)
    assert err <= tol, err
    p = r.plan
    cost = decoding_cost(H_q, H_kv, N_q, N_k, d, B_c=p.B_c, P_s=P_s, S=S, batch=batch,
                         B_r=p.B_r)
    assert (r.io.reads, r.io.writes) == (cost.reads, cost.writes)
    assert B_r is None or p.B_r == B_r
    assert r.io.peak == p.footprint and r.heads == batch * H_q and r.dtype == dtype
    return r, err


# N_q in {1, 2, 7} x g in {1, 2, 8, H_q}; every case runs S = 1, 2, 5 (T = 5 tiles of 8 keys,
# the last of 5), dense and causal (S = 5 both), with pages that do not divide the tile (5),
# that do (4), larger than it (16), or no pages; the last page is ragged in each.
GROUPS = [(8, 8), (8, 4), (8, 1), (16, 1)]       # (H_q, H_kv): g = 1, 2, 8, H_q = 16
PAGES = [5, 4, 16, None]


@pytest.mark.parametrize("N_q", [1, 2, 7])
@pytest.mark.parametrize("group", GROUPS, ids=[f"g{q // kv}" for q, kv in GROUPS])
def test_splits_groups_pages_and_the_causal_chunk(rng, N_q, group):
    H_q, H_kv = group
    P_s = PAGES[(N_q + GROUPS.index(group)) % len(PAGES)]
    for S, causal in ((1, False), (2, True), (5, False), (5, True)):
        r, _ = check(rng, batch=2 if H_kv < 8 else 1, H_q=H_q, H_kv=H_kv, N_q=N_q, N_k=37,
                     d=16, B_c=8, P_s=P_s, S=S, causal=causal)
        assert r.plan.T == 5 and r.plan.R == (H_q // H_kv) * N_q


@pytest.mark.parametrize("g, N_q", [(1, 7), (4, 2), (3, 3)])
def test_row_groups(rng, g, N_q):
    """R = g N_q rows in row groups of B_r (the last ragged where B_r does not divide R), a block
    each, dense and causal, with and without pages, S = 1, 2, 5: the count is decoding_cost's
    with that B_r, the cache read once per row group, and the output the reference's."""
    R = g * N_q
    for i, (B_r, P_s) in enumerate([(1, 5), (2, None), (R - 1, 4), (R // 2, 16)]):
        S, causal = ((1, False), (2, True), (5, True), (5, False))[i]
        r, _ = check(rng, batch=2, H_q=2 * g, H_kv=2, N_q=N_q, N_k=37, d=8, B_c=8, P_s=P_s,
                     S=S, causal=causal, B_r=B_r)
        assert r.plan.G == -(-R // B_r) >= 2


def test_row_groups_have_no_race(rng):
    """The race-checking emulator: row groups of 4 (of 4, 4, 1 rows) with pages and 3 splits,
    and of 3 (ragged) on a contiguous cache with 2 splits."""
    for kw in (dict(H_q=6, H_kv=2, N_q=3, N_k=29, d=8, B_c=8, P_s=5, S=3, B_r=4),
               dict(H_q=2, H_kv=1, N_q=5, N_k=20, d=12, B_c=4, S=2, B_r=3)):
        r, _ = check(rng, causal=True, backend="emulator-racecheck", **kw)
        assert r.backend == "emulator-racecheck" and r.plan.G == -(-r.plan.R // kw["B_r"])


def test_named_counts_of_row_groups(rng):
    """g = 4, N_q = 1 (R = 4), N_k = 37, d = 16, B_c = 8, pages of 5, S = 2, in row groups of
    B_r = 3 (of 3 and 1 rows): each row group reads the 12 table entries and the 57 page rows
    of K and V (test_named_counts), so per unit 2 * 64 + 2 * (32 * 57 + 12) + 2 * 4 * 18 =
    3944 reads, 1836 more than one group, and the same 208 writes."""
    r, _ = check(rng, batch=2, H_q=8, H_kv=2, N_q=1, N_k=37, d=16, B_c=8, P_s=5, S=2, B_r=3)
    assert (r.io.reads, r.io.writes) == (4 * 3944, 4 * 208)
    assert r.plan.G == 2 and r.io.peak == footprint(3, 16, 8, 15, 3)


def test_named_counts():
    """Two launches counted by hand: 2 sequences, H_q = 8, H_kv = 2 (g = 4), N_q = 1, N_k = 37,
    d = 16, B_c = 8. Contiguous, S = 1: per unit 4 * 16 + 2 * 16 * 37 = 1248 reads, 64 writes.
    Pages of 5, S = 2: the 5 tiles read pages {0,1}, {1,2,3}, {3,4}, {4,5,6}, {6,7}: 12 entries
    and 55 + 5 + ... = 10 + 15 + 10 + 15 + 7 = 57 rows, so per unit 2 * 64 + 32 * 57 + 12 +
    2 * 4 * 18 = 2108 reads and 64 + 144 = 208 writes."""
    rng = np.random.default_rng(5)
    r, _ = check(rng, batch=2, H_q=8, H_kv=2, N_q=1, N_k=37, d=16, B_c=8)
    assert (r.io.reads, r.io.writes) == (4 * 1248, 4 * 64)
    r, _ = check(rng, batch=2, H_q=8, H_kv=2, N_q=1, N_k=37, d=16, B_c=8, P_s=5, S=2)
    assert (r.io.reads, r.io.writes) == (4 * 2108, 4 * 208)
    assert (r.plan.rows, r.plan.pages) == (15, 3)


# N_q = 64 (a prefill chunk or a long speculation): g in {1, 2, 8 = H_q}, R = 64, 128, 512
# stacked rows; T = 5 tiles of 16 keys (the last of 6) over N_k = 70, pages of 6 (not dividing
# the tile, the last ragged), 8 (dividing it) or none; dense and causal, S = 1, 2, 5
CHUNK_GROUPS = [(2, 2), (4, 2), (8, 1)]


@pytest.mark.parametrize("group", CHUNK_GROUPS, ids=[f"g{q // kv}" for q, kv in CHUNK_GROUPS])
def test_a_chunk_of_64_rows(rng, group):
    H_q, H_kv = group
    P_s = {2: 6, 4: None, 8: 8}[H_q]
    for S, causal in ((1, False), (2, True), (5, True)):
        r, _ = check(rng, batch=2 if H_kv == 2 else 1, H_q=H_q, H_kv=H_kv, N_q=64, N_k=70,
                     d=8, B_c=16, P_s=P_s, S=S, causal=causal)
        assert r.plan.T == 5 and r.plan.R == (H_q // H_kv) * 64


def test_named_counts_of_a_chunk_of_64_rows(rng):
    """g = 2, N_q = 64 (R = 128 rows), N_k = 100, d = 8, B_c = 16, counted by hand. Contiguous,
    S = 1: 128 * 8 + 2 * 8 * 100 = 2624 reads, 1024 writes. Pages of 6, S = 3: the 7 tiles
    read pages 0-2, 2-5, 5-7, 8-10, 10-13, 13-15 and the 4 valid rows of page 16: 21 entries and
    18 + 24 + 18 + 18 + 24 + 18 + 4 = 124 rows, so 3 * 1024 + 16 * 124 + 21 + 3 * 128 * 10 =
    8917 reads and 3 * 128 * 10 + 1024 = 4864 writes."""
    r, _ = check(rng, H_q=2, H_kv=1, N_q=64, N_k=100, d=8, B_c=16, causal=True)
    assert (r.io.reads, r.io.writes) == (2624, 1024)
    r, _ = check(rng, H_q=2, H_kv=1, N_q=64, N_k=100, d=8, B_c=16, P_s=6, S=3, causal=True)
    assert (r.io.reads, r.io.writes) == (8917, 4864)
    assert (r.plan.rows, r.plan.pages) == (24, 4)


@pytest.mark.parametrize("d", [6, 12, 128, 256])
def test_head_dimensions_with_and_without_16_byte_rows(rng, d):
    check(rng, H_q=4, H_kv=2, N_q=2, N_k=45, d=d, B_c=16, P_s=6, S=2, causal=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("d", [8, 12, 64])
def test_a_16_bit_cache(rng, dtype, d):
    # d = 8, 64: 16-byte rows (8 entries a load); d = 12: 24-byte rows, loaded entry by entry
    check(rng, batch=2, H_q=4, H_kv=2, N_q=2, N_k=41, d=d, B_c=8, P_s=6, S=3, causal=True,
          dtype=dtype)


def test_the_longest_chunk_and_rows_that_see_no_key_of_a_split(rng):
    # N_q = N_k, one key a tile and one tile a split: row i sees keys 0..i, so every split past
    # i writes l = 0 for it, and the merge must weigh those partials 0
    check(rng, H_q=2, H_kv=1, N_q=16, N_k=16, d=8, B_c=1, P_s=3, S=16, causal=True)


def test_large_logits_stay_finite(rng):
    check(rng, H_q=4, H_kv=1, N_q=3, N_k=50, d=16, B_c=8, P_s=7, S=3, logits=40.0)


def test_default_tile_follows_the_page(rng):
    for P_s, B_c in ((None, 64), (16, 64), (48, 48), (40, 40), (128, 128), (100, 100)):
        p = decode_plan(8, 2, 1, 300, 64, P_s=P_s, budget=227 * 1024)
        assert p.B_c == B_c, (P_s, p.B_c)
    r, _ = check(rng, H_q=4, H_kv=2, N_q=1, N_k=150, d=16, P_s=16, S=2)
    assert r.plan.B_c == 64 and r.plan.pages == 4
    # a device with less shared memory halves the default tile until the block fits
    small = decode_plan(8, 1, 1, 4096, 128, budget=48 * 1024)
    assert small.B_c == 32 and 4 * small.footprint <= 48 * 1024
    assert 4 * decode_plan(8, 1, 1, 4096, 128, B_c=64, budget=1 << 30).footprint > 48 * 1024


def test_shared_memory_is_the_layout(rng, monkeypatch):
    # footprint: Q_s, K_s, V_s at the padded stride, O_s, scores, m, l, alpha, table entries
    assert row_stride(64) == 68 and row_stride(6) == 7
    assert layout(37, 8, 5) == (15, 3) and layout(37, 8, None) == (8, 0)
    assert layout(37, 8, 16) == (16, 1) and layout(10, 4, 3) == (6, 2)
    assert footprint(4, 16, 8, 15, 3) == 4 * 20 + 2 * 15 * 20 + 4 * 16 + 4 * 8 + 12 + 3
    # the plan's footprint is what the kernel lays out: one entry less and it runs past the end
    # of shared memory into the emulator's guard page
    import sys

    module = sys.modules["ioattn.gpu.flash_decoding"]
    monkeypatch.setattr(module, "footprint", lambda *a: footprint(*a) - 1)
    with pytest.raises(OutOfBounds):
        check(rng, H_q=2, H_kv=1, N_q=1, N_k=20, d=8, B_c=8, P_s=5)


def test_one_sequence_without_batch_and_a_cache_with_spare_capacity(rng):
    H_q, H_kv, N_q, N_k, d = 4, 2, 2, 29, 8
    Q = rng.standard_normal((H_q, N_q, d)).astype(np.float32)
    K, V = (rng.standard_normal((H_kv, 40, d)).astype(np.float32) for _ in range(2))
    K[:, N_k:] = V[:, N_k:] = np.nan                   # capacity past N_k is never read
    want = reference(Q[None], K[None, :, :N_k], V[None, :, :N_k])[0]
    r = gpu.decode(Q, K, V, None, N_k, S=3, B_c=4, count_io=True, backend=EMU)
    assert r.output.shape == Q.shape
    np.testing.assert_allclose(r.output, want, rtol=0, atol=1e-5)
    cost = decoding_cost(H_q, H_kv, N_q, N_k, d, B_c=4, S=3)
    assert (r.io.reads, r.io.writes) == (cost.reads, cost.writes)
    Kp, Vp, table = paged(rng, K[None, :, :N_k], V[None, :, :N_k], 6)
    r = gpu.decode(Q, Kp, Vp, table[0], N_k, S=2, B_c=4, count_io=True, backend=EMU)
    np.testing.assert_allclose(r.output, want, rtol=0, atol=1e-5)


def test_sequences_sharing_prefix_pages(rng):
    # two sequences whose first 3 pages are the same pool pages (a shared prompt): each reads
    # them for itself, so the count is the model's for 2 sequences
    H_q, H_kv, N_q, N_k, d, P_s = 4, 2, 1, 30, 8, 4
    K, V = (rng.standard_normal((2, H_kv, N_k, d)).astype(np.float32) for _ in range(2))
    K[1, :, :3 * P_s], V[1, :, :3 * P_s] = K[0, :, :3 * P_s], V[0, :, :3 * P_s]
    Kp, Vp, table = paged(rng, K, V, P_s)
    table[1, :3] = table[0, :3]
    Q = rng.standard_normal((2, H_q, N_q, d)).astype(np.float32)
    r = gpu.decode(Q, Kp, Vp, table, N_k, S=2, B_c=8, count_io=True, backend=EMU)
    np.testing.assert_allclose(r.output, reference(Q, K, V), rtol=0, atol=1e-5)
    cost = decoding_cost(H_q, H_kv, N_q, N_k, d, B_c=8, P_s=P_s, S=2, batch=2)
    assert (r.io.reads, r.io.writes) == (cost.reads, cost.writes)


def test_threads_in_reverse_order_and_reruns_give_the_same(rng, monkeypatch):
    Q = rng.standard_normal((2, 4, 3, 16)).astype(np.float32)
    K, V = (rng.standard_normal((2, 2, 33, 16)).astype(np.float32) for _ in range(2))
    Kp, Vp, table = paged(rng, K, V, 5)
    launch = prepare_decode(Q, Kp, Vp, table, 33, S=3, B_c=8, causal=True, count_io=True,
                            backend=EMU)
    launch()
    first = launch.result()
    launch()
    again = launch.result()
    assert first.io == again.io and first.io.total > 0
    monkeypatch.setenv("IOATTN_EMULATOR_REVERSE", "1")
    other = gpu.decode(Q, Kp, Vp, table, 33, S=3, B_c=8, causal=True, backend=EMU)
    np.testing.assert_array_equal(first.output, other.output)
    assert other.io is None


@settings(max_examples=25)
@given(N_q=st.integers(1, 7), g=st.sampled_from([1, 2, 3]), H_kv=st.integers(1, 2),
       N_k=st.integers(1, 40), d=st.sampled_from([1, 4, 8, 12]), B_c=st.integers(1, 12),
       P_s=st.one_of(st.none(), st.integers(1, 13)), split=st.integers(0, 100),
       causal=st.booleans(), batch=st.integers(1, 2), seed=st.integers(0, 2**16))
def test_any_small_shape(N_q, g, H_kv, N_k, d, B_c, P_s, split, causal, batch, seed):
    T = -(-N_k // B_c)
    S = 1 + split % T
    if causal:
        N_q = min(N_q, N_k)
    check(np.random.default_rng(seed), batch=batch, H_q=g * H_kv, H_kv=H_kv, N_q=N_q, N_k=N_k,
          d=d, B_c=B_c, P_s=P_s, S=S, causal=causal, scale=0.4)


# --- the rows a block holds ---------------------------------------------------------------------

# the shared memory per block of Turing (T4: sm_75), Ampere (A100: sm_80) and Hopper (H100: sm_90)
ARCH_BUDGETS = {arch: GPUS[name].shared_per_block
                for arch, name in (("sm_75", "T4"), ("sm_80", "A100"), ("sm_90", "H100"))}


@pytest.mark.parametrize("arch", sorted(ARCH_BUDGETS))
@pytest.mark.parametrize("d", [16, 64, 128, 256])
def test_the_row_limit_is_exact_and_named(arch, d):
    """At the limit the default plan fits the block in one row group; one row more runs in two
    row groups, and given as one row group it is refused, naming the limit. The limit is the
    same for N_q rows of one head and g heads."""
    budget = ARCH_BUDGETS[arch]
    limit = max(max_rows(d, b, *layout(4096, b, 16), budget) for b in (64, 32, 16, 8, 4, 2, 1))
    p = decode_plan(1, 1, limit, 4096, d, P_s=16, budget=budget)
    assert p.R == p.B_r == limit and p.G == 1 and 4 * p.footprint <= budget
    assert 4 * footprint(limit + 1, d, p.B_c, p.rows, p.pages) > budget
    p = decode_plan(1, 1, limit + 1, 4096, d, P_s=16, budget=budget)
    assert (p.G, p.B_r) == (2, -(-(limit + 1) // 2)) and 4 * p.footprint <= budget
    with pytest.raises(SharedMemoryExceeded,
                       match=rf"1 x {limit + 1} = {limit + 1} stacked rows.*R = {limit} .*at most "
                             rf"B_r = {limit} rows"):
        decode_plan(1, 1, limit + 1, 4096, d, P_s=16, budget=budget, B_r=limit + 1)
    p = decode_plan(2, 1, limit // 2, 4096, d, P_s=16, budget=budget)
    assert 4 * p.footprint <= budget and p.G == 1


def test_the_limits_of_a_chunk_of_64_rows():
    """N_q = 64 at d = 128: g = 1 and 2 (64, 128 rows) fit Ampere and Hopper blocks, at most 61,
    157 and 219 rows fit sm_75, sm_80, sm_90 (as decode_plan's docstring says); g = 1 fits
    Turing from d = 64 down, and at d = 16 g = 8 fits Hopper. At d = 128 on Turing g = 1 runs
    in two row groups of 32 rows."""
    B = ARCH_BUDGETS
    for arch, want in (("sm_75", 61), ("sm_80", 157), ("sm_90", 219)):
        assert max(max_rows(128, b, b, 0, B[arch]) for b in (64, 32, 16, 8, 4, 2, 1)) == want
    for g in (1, 2):
        for arch in ("sm_80", "sm_90"):
            p = decode_plan(8 * g, 8, 64, 4096, 128, P_s=16, budget=B[arch])
            assert p.R == 64 * g and 4 * p.footprint <= B[arch]
    assert decode_plan(8, 8, 64, 4096, 128, budget=B["sm_90"]).B_c == 64
    assert decode_plan(16, 8, 64, 4096, 128, budget=B["sm_90"]).B_c == 32
    assert decode_plan(16, 8, 64, 4096, 128, budget=B["sm_80"]).B_c == 16
    decode_plan(8, 8, 64, 4096, 64, P_s=16, budget=B["sm_75"])
    decode_plan(8, 1, 64, 4096, 16, P_s=16, budget=B["sm_90"])
    p = decode_plan(8, 8, 64, 4096, 128, budget=B["sm_75"])
    assert (p.G, p.B_r, p.B_c) == (2, 32, 16) and 4 * p.footprint <= B["sm_75"]
    with pytest.raises(SharedMemoryExceeded, match="R = 61 .*at most B_r = 61 rows"):
        decode_plan(8, 8, 64, 4096, 128, budget=B["sm_75"], B_r=64)
    # a given tile (with all rows): the limit at that tile, and the hint that a smaller one
    # holds more rows
    with pytest.raises(SharedMemoryExceeded, match=r"R = 43 \(max_rows, with B_c = 16\).*at "
                                                   r"most B_r = 43 rows.*or a smaller B_c"):
        decode_plan(8, 8, 64, 4096, 128, B_c=16, budget=B["sm_75"])
    assert decode_plan(8, 8, 64, 4096, 128, B_c=16, B_r=43, budget=B["sm_75"]).G == 2


class Turing(EmulatorBackend):
    """The emulator with a T4's shared memory per block (64 KiB, sm_75)."""

    shared_memory_per_block = ARCH_BUDGETS["sm_75"]


def test_a_chunk_of_64_rows_at_d_128_on_turing(rng):
    """g = 1, N_q = 64, d = 128 runs in a Turing block (64 KiB): two row groups of 32 rows with
    tiles of 16 keys, contiguous and paged, causal, one split and three; the count is
    decoding_cost's with B_r = 32, the output the reference's."""
    for P_s, S in ((None, 1), (16, 3)):
        r, _ = check(rng, H_q=1, H_kv=1, N_q=64, N_k=80, d=128, P_s=P_s, S=S, causal=True,
                     backend=Turing())
        assert (r.plan.G, r.plan.B_r, r.plan.B_c) == (2, 32, 16)
        assert 4 * r.plan.footprint <= ARCH_BUDGETS["sm_75"]
        one = decoding_cost(1, 1, 64, 80, 128, B_c=16, P_s=P_s, S=S)
        assert r.io.reads - one.reads == 2 * 128 * 80 + (0 if P_s is None else 5)
        assert r.io.writes == one.writes


def test_too_many_rows_run_in_row_groups_or_are_refused_before_the_launch():
    # the emulator's 227 KiB: g = 4 heads of 64 rows at d = 128 are 256 > 204 rows (a tile
    # stages whole pages of 16 rows): two row groups of 128, and refused as one; g = 300 heads
    # of one row: two row groups of 150; a given B_r beyond R is refused; S = 500 splits of 64
    # rows overflow the merge's m and l
    Q, K, V, table = _inputs(H_q=8, H_kv=2, N_q=64, N_k=100, d=128, P_s=16)
    with pytest.raises(SharedMemoryExceeded, match=r"4 x 64 = 256 stacked rows.*R = 204 .*at "
                                                   r"most B_r = 204 rows"):
        gpu.decode(Q, K, V, table, 100, backend=EMU, B_r=256)
    p = decode_plan(8, 2, 64, 100, 128, P_s=16, budget=227 * 1024)
    assert (p.G, p.B_r) == (2, 128)
    p = decode_plan(300, 1, 1, 100, 128, budget=227 * 1024)
    assert (p.G, p.B_r) == (2, 150) and 4 * p.footprint <= 227 * 1024
    with pytest.raises(SharedMemoryExceeded, match=r"a row group of B_r = 220 of the g N_q = "
                                                   r"300 x 1 = 300.*R = 219 "):
        decode_plan(300, 1, 1, 100, 128, budget=227 * 1024, B_r=220)
    with pytest.raises(ValueError, match="B_r = 9 rows a row group.*R = g N_q = 8"):
        decode_plan(8, 1, 1, 100, 16, budget=227 * 1024, B_r=9)
    with pytest.raises(ValueError, match="B_r must be at least 1"):
        gpu.decode(Q, K, V, table, 100, backend=EMU, B_r=0)
    with pytest.raises(TypeError, match="B_r must be an integer"):
        decode_plan(8, 1, 1, 100, 16, budget=227 * 1024, B_r=2.5)
    with pytest.raises(SharedMemoryExceeded, match="merge .* 500 x 64 rows.*at most 454 splits"):
        decode_plan(1, 1, 64, 1000, 8, B_c=1, S=500, budget=227 * 1024)


def test_no_register_spills_for_any_row_count(nvcc):
    """The rows are a runtime loop bound, so the registers do not grow with R: every kernel
    compiles for sm_75, sm_80 and sm_90 without spilling, with registers for 256 threads a
    block (the most _threads plans) within the 64 K of an SM."""
    import re

    from ioattn.gpu.sources import ARCHS, nvcc_check

    log = nvcc_check("flash_decoding.cu", ARCHS, nvcc=nvcc)
    found = re.findall(r"Compiling entry function '(\w+)' for '(sm_\d+)'\s+ptxas info\s+: "
                       r"Function properties for \w+\s+(\d+) bytes stack frame, (\d+) bytes "
                       r"spill stores, (\d+) bytes spill loads\s+ptxas info\s+: Used (\d+) "
                       r"registers", log)
    assert {(k, a) for k, a, *_ in found} == {(k, a) for k in ("decode_merge", *KERNELS.values())
                                              for a in ARCHS}, log
    for kernel, arch, stack, stores, loads, registers in found:
        assert (stack, stores, loads) == ("0", "0", "0"), (kernel, arch)
        assert 256 * int(registers) <= 65536, (kernel, arch, registers)


# --- bad input ---------------------------------------------------------------------------------

def _inputs(batch=1, H_q=4, H_kv=2, N_q=1, N_k=10, d=8, P_s=4):
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((batch, H_q, N_q, d)).astype(np.float32)
    K = rng.standard_normal((batch, H_kv, N_k, d)).astype(np.float32)
    return (Q, *paged(rng, K, K, P_s, fill=0.0))


@pytest.mark.parametrize("change, error, match", [
    (lambda a: {**a, "Q": a["Q"][0, 0]}, ValueError, r"Q must be \(H_q, N_q, d\)"),
    (lambda a: {**a, "Q": a["Q"].astype(np.int32)}, TypeError, "Q must hold floating"),
    (lambda a: {**a, "Q": a["Q"] * np.nan}, ValueError, "Q has 32 non-finite"),
    (lambda a: {**a, "table": a["table"].astype(np.float32)}, TypeError, "integer page indices"),
    (lambda a: {**a, "table": a["table"][:, :2]}, ValueError, "table has 2 entries per sequence"),
    (lambda a: {**a, "table": a["table"][0]}, ValueError, r"table must be \(batch, pages"),
    (lambda a: {**a, "table": a["table"] + 100}, ValueError, "index the pool's 6 pages"),
    (lambda a: {**a, "V": a["V"][:, :1]}, ValueError, r"but V_pages \(6, 1, 4, 8\)"),
    (lambda a: {**a, "K": np.concatenate([a["K"], a["K"][:, :1]], 1),
                "V": np.concatenate([a["V"], a["V"][:, :1]], 1)}, ValueError,
     "H_kv = 3 must divide H_q = 4"),
    (lambda a: {**a, "K": a["K"][..., :4], "V": a["V"][..., :4]}, ValueError, "d = 8 but"),
    (lambda a: {**a, "N_k": 0}, ValueError, "N_k must be at least 1"),
    (lambda a: {**a, "N_k": 2.0}, TypeError, "N_k must be an integer"),
    (lambda a: {**a, "S": 4}, ValueError, r"S = 4 splits of T = ceil\(N_k / B_c\) = 3"),
    (lambda a: {**a, "S": 0}, ValueError, "S must be at least 1"),
    (lambda a: {**a, "B_c": 0}, ValueError, "B_c must be at least 1"),
    (lambda a: {**a, "causal": 1}, TypeError, "causal must be True or False"),
    (lambda a: {**a, "scale": -1.0}, ValueError, "scale must be a finite positive"),
    (lambda a: {**a, "backend": "emulater"}, ValueError, "did you mean 'emulator'"),
    (lambda a: {**a, "dtype": "float8"}, ValueError, "dtype must be one of float32, float16"),
    (lambda a: {**a, "dtype": "float16", "Q": a["Q"] * 1e5}, ValueError,
     "beyond float16's range"),
])
def test_bad_input_is_refused_clearly(change, error, match):
    Q, K, V, table = _inputs()
    a = change(dict(Q=Q, K=K, V=V, table=table, N_k=10, S=1, B_c=4, causal=False, scale=None,
                    dtype="float32", backend=EMU))
    with pytest.raises(error, match=match):
        gpu.decode(a["Q"], a["K"], a["V"], a["table"], a["N_k"], S=a["S"], B_c=a["B_c"],
                   causal=a["causal"], scale=a["scale"], dtype=a["dtype"], backend=a["backend"])


def test_sizes_the_kernel_does_not_take():
    Q, K, V, table = _inputs(N_q=3, N_k=2, P_s=2)
    with pytest.raises(ValueError, match="N_q = 3 > N_k = 2"):
        gpu.decode(Q, K, V, table, 2, causal=True, backend=EMU)
    with pytest.raises(ValueError, match="d <= 256"):
        decode_plan(1, 1, 1, 10, 257, budget=1 << 20)
    with pytest.raises(SharedMemoryExceeded, match="need .* bytes of shared memory.*B_c = 64.*"
                                                   "R = 0 .*tile alone.*smaller B_c"):
        decode_plan(8, 1, 16, 4096, 256, B_c=64, budget=48 * 1024)
    with pytest.raises(ValueError, match=f"at most {MAX_GRID_Y} batch"):
        decode_plan(1, 1, 1, 10, 8, batch=MAX_GRID_Y + 1, budget=1 << 20)
    decode_plan(1, 1, 1, 10, 8, batch=MAX_GRID_Y, budget=1 << 20)
    Q, K, V, _ = _inputs()
    with pytest.raises(ValueError, match=r"the contiguous cache \(batch, H_kv, capacity, d\)"):
        gpu.decode(Q, K[0], V[0], None, 10, backend=EMU)
    with pytest.raises(ValueError, match="exceeds the cache's capacity of 10"):
        gpu.decode(Q, Q[:, :2].repeat(10, axis=2), Q[:, :2].repeat(10, axis=2), None, 11,
                   backend=EMU)


@pytest.mark.gpu
def test_on_the_gpu(rng):
    """On a GPU: the same kernel through CuPy, output and counts as in the emulator."""
    for P_s, S in ((16, 4), (5, 3), (None, 1)):
        check(rng, batch=2, H_q=32, H_kv=8, N_q=1, N_k=1000, d=128, P_s=P_s, S=S,
              backend="cuda")
    check(rng, batch=1, H_q=8, H_kv=1, N_q=7, N_k=333, d=64, B_c=32, P_s=24, S=5, causal=True,
          backend="cuda")
    # a causal chunk of 64 rows per head (at d = 64 within even a Turing block)
    check(rng, batch=2, H_q=8, H_kv=8, N_q=64, N_k=500, d=64, P_s=24, S=3, causal=True,
          backend="cuda")
    for dtype in ("float16", "bfloat16"):
        check(rng, batch=2, H_q=32, H_kv=8, N_q=2, N_k=777, d=128, P_s=16, S=3, causal=True,
              dtype=dtype, backend="cuda")
    # row groups: given (the last ragged), and chosen for a Turing block's 64 KiB
    check(rng, batch=2, H_q=8, H_kv=2, N_q=5, N_k=300, d=64, P_s=24, S=3, causal=True, B_r=6,
          backend="cuda")
    from ioattn.gpu.backend import CudaBackend

    class TuringBudget(CudaBackend):
        def __init__(self):
            super().__init__()
            self.shared_memory_per_block = ARCH_BUDGETS["sm_75"]

    r, _ = check(rng, H_q=1, H_kv=1, N_q=64, N_k=1000, d=128, P_s=16, S=4, causal=True,
                 backend=TuringBudget())
    assert (r.plan.G, r.plan.B_r) == (2, 32)


def test_the_gpu_check_launch_runs_in_the_emulator():
    """``make gpu-check``'s decoding launch (ioattn/gpu/check.py) is a valid plan: it runs here,
    counted as the model says, and writes every entry."""
    from ioattn.gpu import check

    assert check.LAUNCHES["decode-paged"][0] == "decode"
    kw = check.LAUNCHES["decode-paged"][1]
    out = check.decode_launch(np.random.default_rng(0), backend=EMU, **kw)
    batch, H_q, _, N_q, _, d = check.DECODE_SHAPE
    assert out.shape == (batch, H_q, N_q, d)
    assert np.isfinite(out).all()


def test_the_benchmark_predicts_from_the_counted_bytes(capsys):
    """benchmarks/decode.py: bytes = 4 x decoding_cost for the kernel's plan; the predicted time
    is the bytes over each GPU's bandwidth where the float32 operations take less."""
    import importlib.util
    from pathlib import Path

    from ioattn.gpus import GPUS

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "decode.py"
    spec = importlib.util.spec_from_file_location("decode_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    r = bench.row("GQA 32/8", 32, 8, 1, 4096, 1)
    cost = decoding_cost(32, 8, 1, 4096, 128, B_c=r["B_c"], P_s=16, S=r["S"])
    assert r["bytes"] == 4 * (cost.reads + cost.writes) and r["S"] == 17 and r["B_c"] == 64
    # the cache read once per group: 2 N_k d H_kv entries, plus Q, table, partials and O
    assert r["bytes"] > 4 * 2 * 4096 * 128 * 8
    for g in bench.GPUS:
        assert not r["compute_bound"][g]
        assert r["us"][g] == pytest.approx(1e6 * r["bytes"] / GPUS[g].bandwidth, rel=1e-12)
    # a 16-bit cache halves the bytes of Q and K, V, not of the table, partials and O
    from ioattn.decoding import decoding_terms

    t = decoding_terms(32, 8, 1, 4096, 128, B_c=64, P_s=16, S=17)
    half = bench.row("GQA 32/8", 32, 8, 1, 4096, 1, dtype="bfloat16")
    assert half["bytes"] == r["bytes"] - 2 * (t["Q"] + t["KV"])
    mqa = bench.row("MQA 32/1", 32, 1, 4, 32768, 1)     # g N_q = 128 rows: past the ridge,
    assert all(mqa["compute_bound"][g] for g in ("A100", "H100", "H200"))
    # more than a T4's block holds: row groups there, timed from the T4 plan's own bytes
    assert mqa["row_groups"] == {"T4": True, "A100": False, "H100": False, "H200": False}
    t4 = bench.decode_plan(32, 1, 4, 32768, 128, P_s=16, budget=GPUS["T4"].shared_per_block)
    assert t4.B_r < 32 * 4
    t4_bytes = bench._planned(32, 1, 4, 32768, 1, GPUS["T4"].shared_per_block, "float32")[2]
    assert t4_bytes > mqa["bytes"]
    assert mqa["us"]["T4"] >= 1e6 * t4_bytes / GPUS["T4"].bandwidth * (1 - 1e-12)
    # a prefill chunk of 64 rows where g N_q fits a block: multi-head only at d = 128, past the
    # ridge, and not on a T4 (61 rows a block)
    assert ("MHA 32/32", 32, 32, 64, 4096, 1) in bench.cases()
    assert not any(c[3] == 64 and c[0] != "MHA 32/32" for c in bench.cases())
    chunk = bench.row("MHA 32/32", 32, 32, 64, 4096, 1)
    assert chunk["row_groups"]["T4"] and chunk["bytes_per_token"] == chunk["bytes"] // 64
    assert all(chunk["compute_bound"][g] for g in ("A100", "H100", "H200"))
    assert bench.main(["--dtype", "float16"]) == 0 and "in float16" in capsys.readouterr().out
    assert bench.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 + len(bench.cases()) and out[3].startswith("| GQA 32/8 | 1 | 4096 | 1 |")
