"""The two-level counts of every processor: each processor's FlashAttention, simulated through
its own TwoLevelMemory step by step (the grid's: one run and the merge of its partials), moves
exactly ``cache_io``'s entries and computes the reference's output (no MPI here;
tests/parallel/test_mpi_two_level.py runs it on MPI)."""

import itertools

import numpy as np
import pytest

import ioattn
from ioattn import parallel
from ioattn.parallel.reference import attention, attention_backward
from ioattn.memory import TwoLevelMemory
from ioattn.parallel.two_level import (BACKWARD_TWO_LEVEL, GRIDS, TWO_LEVEL, BackwardProcessor,
                                       GridProcessor, Processor, add, add_io, cache_io,
                                       grid_runs, local_runs, merge, merge_io, merge_M, min_M)


def _simulate(name, N, d, P, M, H, causal, seed=0, grid=None):
    """Every processor's local FlashAttention on its heads and rows (USP's and all-to-all's:
    the rows of its heads, after the all-to-all), each through its own TwoLevelMemory."""
    rng = np.random.default_rng(seed)
    Q, K, V = rng.standard_normal((3, H, N, d))
    if name in GRIDS:
        return _simulate_grid(name, Q, K, V, P, M, causal, grid)
    O = np.full_like(Q, np.nan)
    reads, writes = [], []
    for (h0, h1), qrows, ks in local_runs(name, N, P, H, grid):
        proc = Processor(M, Q[h0:h1][:, qrows], qrows, ks, causal, 1 / np.sqrt(d))
        for t, krows in enumerate(ks):
            proc.step(t, K[h0:h1][:, krows], V[h0:h1][:, krows])
        O[h0:h1, qrows] = proc.output()
        reads.append(proc.reads)
        writes.append(proc.writes)
    err = np.abs(O - attention(Q, K, V, causal=causal, scale=1 / np.sqrt(d))[0]).max()
    return reads, writes, err


def _simulate_grid(name, Q, K, V, P, M, causal, grid):
    """The grid's processors: each attends its query block to its key block through its own
    cache, then merges the partials of its rows that the others of its grid row computed."""
    H, N, d = Q.shape
    runs = grid_runs(name, N, d, P, H, grid)
    procs = [GridProcessor(M, Q[h0:h1][:, q], K[h0:h1][:, k], V[h0:h1][:, k], q, k, own, parts,
                           causal, 1 / np.sqrt(d)) for (h0, h1), q, k, own, parts in runs]
    for g in procs:
        g.attend()
    O = np.full_like(Q, np.nan)
    for p, ((h0, h1), q, _, own, _) in enumerate(runs):
        row = [i for i, run in enumerate(runs) if run[0] == (h0, h1) and
               np.array_equal(run[1], q)]                    # its grid row, in order
        procs[p].merge([None if i == p else procs[i].partial()[:, own] for i in row])
        O[h0:h1, q[own]] = procs[p].output()
    err = np.abs(O - attention(Q, K, V, causal=causal, scale=1 / np.sqrt(d))[0]).max()
    return [g.reads for g in procs], [g.writes for g in procs], err


GRID = list(itertools.product(TWO_LEVEL, (8, 13, 24), (2, 3), (1, 2, 3, 4), (20, 40, 90, 400),
                              (1, 2), (False, True)))


@pytest.mark.parametrize("name", TWO_LEVEL)
def test_simulated_equals_closed_form_over_a_grid(name):
    checked = 0
    for _, N, d, P, M, H, causal in (g for g in GRID if g[0] == name):
        if M < 4 * d + 4:
            continue
        if name == "all_to_all":        # whole heads: H >= P, so more heads than the others
            H += P
        reads, writes, err = _simulate(name, N, d, P, M, H, causal)
        assert (reads, writes) == cache_io(name, N, d, P, M, heads=H, causal=causal), \
            (N, d, P, M, H, causal)
        assert err < 1e-10
        checked += 1
    assert checked >= 150


def test_usp_at_every_shape_equals_the_closed_form():
    checked = 0
    for name in ("usp", "usp_zigzag"):
        for N, d, M, H, causal in itertools.product((13, 24), (2, 3), (20, 40, 400), (2, 3, 4),
                                                    (False, True)):
            if M < 4 * d + 4:
                continue
            for P, grid in ((4, (2, 2)), (4, (4, 1)), (2, (2, 1)), (6, (2, 3)), (6, (3, 2))):
                if H < grid[0]:
                    continue
                reads, writes, err = _simulate(name, N, d, P, M, H, causal, grid=grid)
                assert (reads, writes) == cache_io(name, N, d, P, M, heads=H, causal=causal,
                                                   grid=grid), (name, N, d, P, M, H, grid)
                c = parallel.cost(name, N, d, P, heads=H, causal=causal, grid=grid, M=M)
                assert (c.cache_reads.tolist(), c.cache_writes.tolist()) == (reads, writes)
                assert err < 1e-10
                checked += 1
    assert checked >= 200


def test_usp_limits_are_the_ring_and_one_flash_run():
    # P_u = 1: the ring's (the zigzag ring's) counts; P_r = 1: one FlashAttention run of the
    # group's N rows against all N keys for each of the h_u heads
    for N, d, P, M, H, causal in [(24, 3, 4, 40, 2, True), (13, 2, 3, 20, 1, False)]:
        for name, ring in (("usp", "ring"), ("usp_zigzag", "zigzag")):
            assert cache_io(name, N, d, P, M, heads=H, causal=causal, grid=(1, P)) == \
                cache_io(ring, N, d, P, M, heads=H, causal=causal)
    reads, writes = cache_io("usp", 24, 3, 4, 40, heads=5, grid=(4, 1))
    io = ioattn.io_cost("flash", 24, 3, 40)
    assert reads == [2 * io.reads, io.reads, io.reads, io.reads]
    assert writes == [2 * io.writes, io.writes, io.writes, io.writes]
    with pytest.raises(ValueError, match="heads >= P_u"):
        cache_io("usp", 24, 3, 4, 40, heads=1, grid=(2, 2))


def test_all_gather_is_one_flash_run_per_processor():
    for N, d, P, M in [(40, 4, 4, 60), (37, 3, 2, 40)]:
        reads, writes = cache_io("all_gather", N, d, P, M)
        n = parallel.layout.sizes(N, P, "zigzag")
        for p in range(P):
            io = ioattn.io_cost("flash", int(n[p]), d, M, N_k=N)
            assert (reads[p], writes[p]) == (io.reads, io.writes)


def test_state_kept_in_the_cache_when_one_block_holds_the_rows():
    # one head, n_p <= B_r: Q_p read once, O_p written once, only K, V stream per step
    N, d, P, M = 32, 4, 4, 1000
    reads, writes = cache_io("ring", N, d, P, M)
    assert reads == [8 * d + 2 * d * N] * P and writes == [8 * d] * P
    # two heads: the state of one head leaves the cache for the other's
    reads2, writes2 = cache_io("ring", N, d, P, M, heads=2)
    assert all(r > 2 * reads[0] for r in reads2)


def test_the_cost_carries_the_cache_counts():
    c = parallel.cost("zigzag", 64, 4, 4, causal=True, M=60)
    assert (c.cache_reads.tolist(), c.cache_writes.tolist()) == \
        cache_io("zigzag", 64, 4, 4, 60, causal=True)
    assert c.M == 60 and c.max_cache_io == int((c.cache_reads + c.cache_writes).max())
    assert c != parallel.cost("zigzag", 64, 4, 4, causal=True, M=61)
    plain = parallel.cost("zigzag", 64, 4, 4, causal=True)
    assert plain.M is None and plain.sent.tolist() == c.sent.tolist()
    with pytest.raises(ValueError, match="no cache was counted"):
        plain.cache_io


@pytest.mark.parametrize("kwargs, match", [
    ({"M": 19}, "at least 4d \\+ 4 = 20"),
    ({"name": "grid", "M": 19}, "at least 4d \\+ 4 = 20"),
    ({"name": "usp_grid", "heads": 2, "M": 19}, "at least 4d \\+ 4 = 20"),
    ({"name": "all_to_all", "heads": 2, "M": 19}, "at least 4d \\+ 4 = 20"),
    ({"backward": True, "name": "usp_grid", "heads": 2, "M": 31},
     "backward pass needs a cache of at least 7d \\+ 4 = 32"),
    ({"backward": True, "name": "grid", "M": 31},
     "backward pass needs a cache of at least 7d \\+ 4 = 32"),
    ({"backward": True, "name": "all_to_all", "heads": 2, "M": 13},
     "backward pass needs a cache of at least 7d \\+ 4 = 32"),
    ({"backward": True, "M": 31}, "backward pass needs a cache of at least 7d \\+ 4 = 32"),
    ({"name": "all_to_all", "heads": 1}, "heads >= P"),
])
def test_bad_cache_arguments(kwargs, match):
    args = {"name": "ring", "M": 100, **kwargs}
    name = args.pop("name")
    with pytest.raises(ValueError, match=match):
        parallel.cost(name, 16, 4, 2, **args)


def test_M_must_be_a_count():
    with pytest.raises(TypeError):
        parallel.cost("ring", 16, 4, 2, M=100.5)


def test_cache_io_refuses_an_unknown_algorithm():
    with pytest.raises(ValueError, match="only, not for 'tree'"):
        cache_io("tree", 16, 4, 2, 100)
    with pytest.raises(ValueError, match="grid_runs is for grid, usp_grid, not 'ring'"):
        grid_runs("ring", 16, 4, 2)


def test_all_to_all_is_one_flash_run_per_head():
    # after the all-to-all, processor p runs FlashAttention on all N rows of its h_p heads
    for N, d, P, M, H, causal in [(24, 3, 4, 40, 5, True), (13, 2, 2, 20, 3, False),
                                  (40, 4, 3, 1000, 3, True)]:
        reads, writes = cache_io("all_to_all", N, d, P, M, heads=H, causal=causal)
        io = ioattn.io_cost("flash", N, d, M, mask=ioattn.masks.causal(N) if causal else None)
        h = parallel.layout.shares(H, P).tolist()
        assert reads == [h_p * io.reads for h_p in h] and writes == [h_p * io.writes for h_p in h]


def test_grid_is_one_flash_run_saving_L_and_a_merge():
    # 2 x 2, no mask: 32 x 32 blocks, each processor merges the 2 partials of its 16 rows
    N, d, M = 64, 4, 64
    reads, writes = cache_io("grid", N, d, 4, M, grid=(2, 2))
    io = ioattn.io_cost("flash", 32, d, M, N_k=32, save_lse=True)
    assert io.writes == 32 * (d + 1)            # O and L of the 32 rows
    assert reads == [io.reads + 2 * (d + 1) * 16] * 4 and writes == [io.writes + d * 16] * 4
    # P_c = 1: nothing to merge, no L: all-gather's one run on contiguous rows
    reads, writes = cache_io("grid", N, d, 4, M, heads=2, causal=True, grid=(4, 1))
    for p, o in enumerate(range(0, N, 16)):
        keep = np.arange(N)[None, :] <= np.arange(o, o + 16)[:, None]   # by the global rows
        io = ioattn.io_cost("flash", 16, d, M, N_k=N, mask=keep)
        assert (reads[p], writes[p]) == (2 * io.reads, 2 * io.writes)


def test_grid_and_usp_grid_at_every_shape_equal_the_closed_form():
    checked = 0
    shapes = [("grid", 4, (2, 2)), ("grid", 4, (1, 4)), ("grid", 4, (4, 1)), ("grid", 6, (2, 3)),
              ("grid", 6, (3, 2)), ("usp_grid", 4, (2, 1, 2)), ("usp_grid", 4, (2, 2, 1)),
              ("usp_grid", 4, (1, 2, 2)), ("usp_grid", 8, (2, 2, 2)), ("usp_grid", 6, (3, 1, 2)),
              ("usp_grid", 4, (2, 2))]
    for (name, P, grid), N, d, M, H, causal in itertools.product(
            shapes, (13, 24), (2, 3), (20, 40, 400), (3, 4), (False, True)):
        if M < 4 * d + 4 or N < P:
            continue
        reads, writes, err = _simulate(name, N, d, P, M, H, causal, grid=grid)
        assert (reads, writes) == cache_io(name, N, d, P, M, heads=H, causal=causal,
                                           grid=grid), (name, grid, N, d, M, H, causal)
        c = parallel.cost(name, N, d, P, heads=H, causal=causal, grid=grid, M=M)
        assert (c.cache_reads.tolist(), c.cache_writes.tolist()) == (reads, writes)
        assert err < 1e-10
        checked += 1
    assert checked >= 300


def test_usp_grid_limits_are_the_grid_and_all_to_all():
    for N, d, M, H, causal in [(24, 3, 40, 2, True), (13, 2, 20, 3, False)]:
        assert cache_io("usp_grid", N, d, 4, M, heads=H, causal=causal, grid=(1, 2, 2)) == \
            cache_io("grid", N, d, 4, M, heads=H, causal=causal, grid=(2, 2))
        assert cache_io("usp_grid", N, d, 2, M, heads=H, causal=causal, grid=(2, 1, 1)) == \
            cache_io("all_to_all", N, d, 2, M, heads=H, causal=causal)


def test_the_merge_streams_rows_through_the_cache():
    # the smallest cache that runs FlashAttention runs the merge too
    assert all(merge_M(d) < min_M(d) for d in range(1, 200))
    rng = np.random.default_rng(5)
    n, d, parts = 7, 3, 3
    O = rng.standard_normal((parts, n, d))
    L = rng.standard_normal((parts, n))
    L[0, 2] = L[1, 2] = np.inf                  # rows with nothing to attend to: weight 0
    w = np.exp(np.where(np.isinf(L), -np.inf, L) - np.logaddexp.reduce(
        np.where(np.isinf(L), -np.inf, L), axis=0))
    want = np.einsum("qn,qnd->nd", w, O)
    for M in (merge_M(d), merge_M(d) + 1, 3 * merge_M(d), 1000):
        mem = TwoLevelMemory(M)
        out = mem.allocate_slow("O", (n, d))
        merge(mem, [(mem.load(f"O {q}", O[q]), mem.load(f"L {q}", L[q]), 0)
                    for q in range(parts)], out)
        assert (mem.reads, mem.writes) == merge_io(n, d, parts)
        assert mem.peak <= M and np.abs(mem.fetch(out) - want).max() < 1e-12
    with pytest.raises(ValueError, match="needs M >= 2d \\+ 3 = 9 entries at d = 3; got M = 8"):
        merge(TwoLevelMemory(8), [], TwoLevelMemory(8).allocate_slow("O", (n, d)))


def test_a_grid_processor_refuses_a_wrong_merge():
    Q = np.zeros((1, 4, 2))
    g = GridProcessor(20, Q, Q, Q, np.arange(4), np.arange(4), slice(0, 2), 2, False, 1.0)
    g.attend()
    with pytest.raises(ValueError, match="not merged yet"):
        g.output()
    with pytest.raises(ValueError, match="the 2 partials of the grid row"):
        g.merge([None])
    with pytest.raises(ValueError, match="the 2 partials of the grid row"):
        g.merge([None, None])


# ----------------------------------------------------------------------------- backward
def _simulate_backward(name, N, d, P, M, H, causal, seed=0, grid=None):
    """The backward pass of :data:`BACKWARD_TWO_LEVEL`, every processor through its own cache:
    block ``j`` (``K_j, V_j`` and its partial ``dK_j, dV_j``, zeros at first) is at processor
    ``(j + s) mod P`` at step ``s``, as the ring passes it on (USP's and all-to-all's: group
    block ``j`` of the heads of part ``u`` at the processor of group ``(j + s) mod P_r`` and
    part ``u``, which received ``D`` with the rows); returns the counts, the gradients' largest
    error against the reference and the largest peak."""
    rng = np.random.default_rng(seed)
    Q, K, V, dO = rng.standard_normal((4, H, N, d))
    tau = 1 / np.sqrt(d)
    O, L = attention(Q, K, V, causal=causal, scale=tau)
    if name == "all_gather":
        return _simulate_all_gather_backward(Q, K, V, dO, O, L, P, M, causal, tau)
    if name in GRIDS:
        return _simulate_grid_backward(name, Q, K, V, dO, O, L, P, M, causal, tau, grid)
    runs = local_runs(name, N, P, H, grid)
    procs = []
    for (h0, h1), q, ks in runs:
        x = (Q[h0:h1][:, q], O[h0:h1][:, q], dO[h0:h1][:, q], L[h0:h1][:, q])
        if name in ("ring", "striped", "zigzag"):
            procs.append(BackwardProcessor(M, *x, q, ks, causal, tau))
        else:
            D = np.einsum("hnd,hnd->hn", x[2], x[1])
            procs.append(BackwardProcessor(M, x[0], None, x[2], x[3], q, ks, causal, tau, D=D))
    # the travelling blocks, by (heads, first row of their rows): each run's own block
    blocks = {(h, int(q[0])): np.stack([K[h[0]:h[1]][:, q], V[h[0]:h[1]][:, q],
                                        np.zeros_like(K[h[0]:h[1]][:, q]),
                                        np.zeros_like(V[h[0]:h[1]][:, q])])
              for h, q, _ in runs}
    for s in range(len(runs[0][2])):
        for p, (h, _, ks) in enumerate(runs):
            procs[p].step(s, blocks[(h, int(ks[s][0]))])
    dQ, dK, dV = (np.full_like(Q, np.nan) for _ in range(3))
    for p, ((h0, h1), q, _) in enumerate(runs):
        b = blocks[((h0, h1), int(q[0]))]
        dQ[h0:h1][:, q], dK[h0:h1][:, q], dV[h0:h1][:, q] = procs[p].gradient(), b[2], b[3]
    want = attention_backward(Q, K, V, dO, causal=causal, scale=tau)
    err = max(float(np.abs(g - w).max()) for g, w in zip((dQ, dK, dV), want))
    return ([x.reads for x in procs], [x.writes for x in procs], err,
            max(x.mem.io.peak for x in procs))


def _simulate_all_gather_backward(Q, K, V, dO, O, L, P, M, causal, tau):
    """The all-gather's backward: every processor folds all ``N`` keys in one step (partials
    from zero), then the ring reduce-scatter: at step ``s`` processor ``p`` receives the running
    sum of block ``p - s - 2`` from ``p - 1`` and adds its own partial through its cache."""
    H, N, d = Q.shape
    runs = local_runs("all_gather", N, P, H)
    rows_of = [q for _, q, _ in runs]
    at = np.cumsum([0] + [len(q) for q in rows_of])
    procs, parts = [], []
    for _, q, ks in runs:
        proc = BackwardProcessor(M, Q[:, q], O[:, q], dO[:, q], L[:, q], q, ks, causal, tau)
        blk = np.stack([K[:, ks[0]], V[:, ks[0]], np.zeros((H, N, d)), np.zeros((H, N, d))])
        proc.step(0, blk)
        procs.append(proc)
        parts.append([blk[2:, :, at[j]:at[j + 1]].copy() for j in range(P)])
    for s in range(P - 1):
        sent = [parts[p][(p - s - 1) % P].copy() for p in range(P)]
        for p in range(P):
            procs[p].add(parts[p][(p - s - 2) % P], sent[(p - 1) % P])
    dQ, dK, dV = (np.full_like(Q, np.nan) for _ in range(3))
    for p, q in enumerate(rows_of):
        dQ[:, q], dK[:, q], dV[:, q] = procs[p].gradient(), parts[p][p][0], parts[p][p][1]
    want = attention_backward(Q, K, V, dO, causal=causal, scale=tau)
    err = max(float(np.abs(g - w).max()) for g, w in zip((dQ, dK, dV), want))
    return ([x.reads for x in procs], [x.writes for x in procs], err,
            max(x.mem.io.peak for x in procs))


def _simulate_grid_backward(name, Q, K, V, dO, O, L, P, M, causal, tau, grid):
    """The grids' backward: every processor folds its gathered query block against its
    gathered key block in one step (``D`` received, partials from zero); then each partial
    ``dQ`` of a processor's own rows goes to it from the others of its grid row and each
    partial ``dK, dV`` from the others of its grid column, and it adds them to its own through
    its cache."""
    H, N, d = Q.shape
    runs = grid_runs(name, N, d, P, H, grid)
    procs, dQs, dKVs = [], [], []
    for (h0, h1), q, k, _, _ in runs:
        D = np.einsum("hnd,hnd->hn", dO[h0:h1][:, q], O[h0:h1][:, q])
        proc = BackwardProcessor(M, Q[h0:h1][:, q], None, dO[h0:h1][:, q], L[h0:h1][:, q],
                                 q, [k], causal, tau, D=D)
        blk = np.stack([K[h0:h1][:, k], V[h0:h1][:, k], np.zeros((h1 - h0, len(k), d)),
                        np.zeros((h1 - h0, len(k), d))])
        proc.step(0, blk)
        procs.append(proc)
        dQs.append(proc.gradient())
        dKVs.append(blk[2:])
    dQ, dK, dV = (np.full_like(Q, np.nan) for _ in range(3))
    adds = [0] * P
    for p, (h, q, k, own, _) in enumerate(runs):
        mine = q[own]
        at = np.flatnonzero(np.isin(k, mine))
        assert np.array_equal(k[at], mine) and np.all(np.diff(at) == 1)
        kown = slice(int(at[0]), int(at[-1]) + 1)
        tq, tkv = dQs[p][None, :, own].copy(), dKVs[p][:, :, kown].copy()
        for x, (hx, qx, kx, _, _) in enumerate(runs):
            if x == p or hx != h:
                continue
            if np.array_equal(qx, q):               # the grid row: its partial dQ of my rows
                procs[p].add(tq, dQs[x][None, :, own])
                adds[p] += 1
            if np.array_equal(kx, k):               # the grid column: its partial dK, dV
                procs[p].add(tkv, dKVs[x][:, :, kown])
                adds[p] += 2
        h0, h1 = h
        dQ[h0:h1][:, mine], dK[h0:h1][:, mine], dV[h0:h1][:, mine] = tq[0], tkv[0], tkv[1]
    want = attention_backward(Q, K, V, dO, causal=causal, scale=tau)
    err = max(float(np.abs(g - w).max()) for g, w in zip((dQ, dK, dV), want))
    return ([x.reads for x in procs], [x.writes for x in procs], err,
            max(x.mem.io.peak for x in procs))


BACKWARD_GRID = list(itertools.product((8, 13, 24), (1, 3), (2, 3, 4), (11, 25, 40, 90, 400),
                                       (1, 2), (False, True)))


@pytest.mark.parametrize("name", BACKWARD_TWO_LEVEL)
def test_backward_simulated_equals_closed_form_over_a_grid(name):
    for N, d, P, M, H, causal in BACKWARD_GRID:
        if M < min_M(d, backward=True):
            continue
        if name == "all_to_all":        # whole heads: H >= P
            H += P
        reads, writes, err, peak = _simulate_backward(name, N, d, P, M, H, causal, seed=N + M)
        assert (reads, writes) == cache_io(name, N, d, P, M, heads=H, causal=causal,
                                           backward=True), (N, d, P, M, H, causal)
        assert err < 1e-10 and peak <= M
        got = parallel.cost(name, N, d, P, heads=H, causal=causal, backward=True, M=M)
        assert got.cache_reads.tolist() == reads and got.cache_writes.tolist() == writes


def test_usp_backward_at_every_shape_equals_the_closed_form():
    checked = 0
    for name in ("usp", "usp_zigzag"):
        for N, d, M, H, causal in itertools.product((13, 24), (1, 3), (11, 40, 400), (2, 3, 4),
                                                    (False, True)):
            if M < min_M(d, backward=True):
                continue
            for P, grid in ((4, (2, 2)), (4, (4, 1)), (4, (1, 4)), (2, (2, 1)), (6, (2, 3)),
                            (6, (3, 2))):
                if H < grid[0]:
                    continue
                reads, writes, err, peak = _simulate_backward(name, N, d, P, M, H, causal,
                                                              seed=N + M, grid=grid)
                assert (reads, writes) == cache_io(name, N, d, P, M, heads=H, causal=causal,
                                                   grid=grid, backward=True), \
                    (name, N, d, P, M, H, grid)
                c = parallel.cost(name, N, d, P, heads=H, causal=causal, grid=grid,
                                  backward=True, M=M)
                assert (c.cache_reads.tolist(), c.cache_writes.tolist()) == (reads, writes)
                assert err < 1e-10 and peak <= M
                checked += 1
    assert checked >= 150


def test_usp_backward_limits_are_the_ring_and_one_step_per_head():
    # P_u = 1: the ring's backward steps, with D received (2 d n_p reads and n_p writes
    # fewer per head); P_r = 1 is all-to-all's backward: one step of all N rows per head
    N, d, P, M, H = 24, 3, 4, 60, 2
    for causal in (False, True):
        r, w = cache_io("usp", N, d, P, M, heads=H, causal=causal, grid=(1, P), backward=True)
        rr, rw = cache_io("ring", N, d, P, M, heads=H, causal=causal, backward=True)
        n = N // P
        assert r == [x - H * 2 * d * n for x in rr] and w == [x - H * n for x in rw]
        a_r, a_w = cache_io("all_to_all", N, d, P, M, heads=P + 1, causal=causal, backward=True)
        u_r, u_w = cache_io("usp", N, d, P, M, heads=P + 1, causal=causal, grid=(P, 1),
                            backward=True)
        assert (a_r, a_w) == (u_r, u_w)
        one_r, one_w = cache_io("ring", N, d, 1, M, causal=causal, backward=True)  # one step
        per_head = ([one_r[0] - 2 * d * N], [one_w[0] - N])
        assert (a_r[1:], a_w[1:]) == (per_head[0] * (P - 1), per_head[1] * (P - 1))
        assert (a_r[0], a_w[0]) == (2 * per_head[0][0], 2 * per_head[1][0])   # 2 heads


def test_the_reduce_scatter_adds_rows_through_the_cache():
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((2, 7, 3))
    for M in (6, 13, 100):
        mem = TwoLevelMemory(M)
        T = mem.load("total", X)
        add(mem, T, mem.load("part", Y))
        assert np.array_equal(mem.fetch(T), X + Y)
        assert (mem.reads, mem.writes) == add_io(7, 3) == (42, 21) and mem.io.peak <= M
    with pytest.raises(ValueError, match="M >= 2d = 6"):
        add(TwoLevelMemory(5), TwoLevelMemory(5).load("t", X), None)


def test_all_gather_backward_is_one_step_and_the_additions():
    # dense: every processor's n_p rows against all N keys in one step, then P - 1 additions
    # of a block of dK, dV (all blocks but that of p - 1)
    N, d, P, M, H = 24, 3, 4, 90, 2
    r, w = cache_io("all_gather", N, d, P, M, heads=H, backward=True)
    n = N // P
    p = ioattn.plan("flash", n, d, M, N_k=N, backward=True)
    T_c = -(-N // p.B_c)                                   # every key block, every query row
    step_r = H * (2 * d * n + 4 * d * N + (3 * d + 2) * n * T_c)
    step_w = H * ((d + 1) * n + 2 * d * N + d * n * T_c)
    add_r, add_w = add_io(N - n, d)                        # the blocks but that of p - 1
    assert (r, w) == ([step_r + 2 * H * add_r] * P, [step_w + 2 * H * add_w] * P)
    # at P = 1 nothing is added: the ring's one step
    assert cache_io("all_gather", N, d, 1, M, heads=H, backward=True) == \
        cache_io("ring", N, d, 1, M, heads=H, backward=True)


def test_backward_processor_takes_O_or_D():
    Q = np.zeros((1, 4, 2))
    for O, D in ((None, None), (Q, np.zeros((1, 4)))):
        with pytest.raises(ValueError, match="takes O .* or D"):
            BackwardProcessor(60, Q, O, Q, np.zeros((1, 4)), np.arange(4), [np.arange(4)],
                              False, 1.0, D=D)


def test_backward_closed_form_by_hand():
    # ring, dense, P = 2, N = 16: each processor's 8 rows against 8 keys at each of 2 steps
    N, d, P, M = 16, 2, 2, 40
    p = ioattn.plan("flash", 8, d, M, N_k=8, backward=True)
    T_r, T_c = -(-8 // p.B_r), -(-8 // p.B_c)
    assert T_r * T_c > 1                               # several blocks: the sums matter
    reads = 2 * d * 8 + 2 * (4 * d * 8 + (3 * d + 2) * 8 * T_c)
    writes = (d + 1) * 8 + 2 * (2 * d * 8 + d * 8 * T_c)
    assert cache_io("ring", N, d, P, M, backward=True) == ([reads] * 2, [writes] * 2)
    # causal: processor 0 skips the step whose keys are all in its future
    r, w = cache_io("ring", N, d, P, M, causal=True, backward=True)
    assert r[0] < r[1] and w[0] < w[1]


def test_backward_processor_skips_what_the_mask_empties():
    # processor 0 of a causal ring never sees a key of processor 1: its step 1 moves nothing
    reads, writes, err, _ = _simulate_backward("ring", 12, 2, 2, 60, 1, True)
    n = 6
    pre_r, pre_w = 2 * 2 * n, 3 * n
    one_r, one_w = cache_io("ring", 6, 2, 1, 60, causal=True, backward=True)   # one step
    assert (reads[0], writes[0]) == (one_r[0], one_w[0])
    assert reads[0] > pre_r and writes[0] > pre_w and err < 1e-10


def test_grid_backward_at_every_shape_equals_the_closed_form():
    # one step per processor on its N_a x N^b block (D received), then the additions: P_c - 1
    # partials dQ and P_r - 1 partials dK, dV of its own rows
    checked = 0
    for (name, P, grid), N, d, M, causal in itertools.product(
            (("grid", 4, (2, 2)), ("grid", 4, (1, 4)), ("grid", 4, (4, 1)), ("grid", 6, (2, 3)),
             ("grid", 6, (3, 2)), ("usp_grid", 4, (2, 1, 2)), ("usp_grid", 4, (1, 2, 2)),
             ("usp_grid", 4, (2, 2, 1)), ("usp_grid", 8, (2, 2, 2))),
            (13, 24), (1, 3), (11, 40, 400), (False, True)):
        if M < min_M(d, backward=True):
            continue
        H = 3
        reads, writes, err, peak = _simulate_backward(name, N, d, P, M, H, causal, seed=N + M,
                                                      grid=grid)
        assert (reads, writes) == cache_io(name, N, d, P, M, heads=H, causal=causal, grid=grid,
                                           backward=True), (name, N, d, P, M, grid)
        c = parallel.cost(name, N, d, P, heads=H, causal=causal, grid=grid, backward=True, M=M)
        assert (c.cache_reads.tolist(), c.cache_writes.tolist()) == (reads, writes)
        assert err < 1e-10 and peak <= M
        checked += 1
    assert checked >= 100


def test_grid_backward_by_hand():
    # grid 2 x 2, N = 16, d = 2, one head, no mask: each processor runs 8 x 8 in one step with
    # D received (d N_a = 16 writes to zero dQ), then adds one dQ and one dK, dV partial of its
    # 4 rows: 3 additions of 2 d 4 = 16 reads and d 4 = 8 writes
    N, d, M = 16, 2, 400
    p = ioattn.plan("flash", 8, d, M, N_k=8, backward=True)
    assert p.B_r >= 8 and p.B_c >= 8                   # one block: C = 8, V = 8
    r, w = cache_io("grid", N, d, 4, M, grid=(2, 2), backward=True)
    assert r == [4 * d * 8 + (3 * d + 2) * 8 + 3 * 16] * 4
    assert w == [d * 8 + 2 * d * 8 + d * 8 + 3 * 8] * 4
