"""The two-level counts of every processor: each processor's FlashAttention, simulated through
its own TwoLevelMemory step by step, moves exactly ``cache_io``'s entries and computes the
reference's output (no MPI here; tests/parallel/test_mpi_two_level.py runs it on MPI)."""

import itertools

import numpy as np
import pytest

import ioattn
from ioattn import parallel
from ioattn.parallel.reference import attention
from ioattn.parallel.two_level import TWO_LEVEL, Processor, cache_io, local_runs


def _simulate(name, N, d, P, M, H, causal, seed=0, grid=None):
    """Every processor's local FlashAttention on its heads and rows (USP's: the group's rows of
    its heads, after the all-to-all), each through its own TwoLevelMemory."""
    rng = np.random.default_rng(seed)
    Q, K, V = rng.standard_normal((3, H, N, d))
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


GRID = list(itertools.product(TWO_LEVEL, (8, 13, 24), (2, 3), (1, 2, 3, 4), (20, 40, 90, 400),
                              (1, 2), (False, True)))


@pytest.mark.parametrize("name", TWO_LEVEL)
def test_simulated_equals_closed_form_over_a_grid(name):
    checked = 0
    for _, N, d, P, M, H, causal in (g for g in GRID if g[0] == name):
        if M < 4 * d + 4:
            continue
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
    ({"name": "grid"}, "only, not for 'grid'"),
    ({"name": "usp_grid", "heads": 2}, "only, not for 'usp_grid'"),
    ({"name": "all_to_all", "heads": 2}, "only, not for 'all_to_all'"),
    ({"M": 19}, "at least 4d \\+ 4 = 20"),
    ({"backward": True}, "forward pass only"),
])
def test_bad_cache_arguments(kwargs, match):
    args = {"name": "ring", "M": 100, **kwargs}
    name = args.pop("name")
    with pytest.raises(ValueError, match=match):
        parallel.cost(name, 16, 4, 2, **args)


def test_M_must_be_a_count():
    with pytest.raises(TypeError):
        parallel.cost("ring", 16, 4, 2, M=100.5)
