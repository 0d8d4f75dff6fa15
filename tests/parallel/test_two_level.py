"""The two-level counts of every processor: each processor's FlashAttention, simulated through
its own TwoLevelMemory step by step, moves exactly ``cache_io``'s entries and computes the
reference's output (no MPI here; tests/parallel/test_mpi_two_level.py runs it on MPI)."""

import itertools

import numpy as np
import pytest

import ioattn
from ioattn import parallel
from ioattn.parallel.reference import attention
from ioattn.parallel.two_level import TWO_LEVEL, Processor, cache_io, key_steps


def _simulate(name, N, d, P, M, H, causal, seed=0):
    rng = np.random.default_rng(seed)
    Q, K, V = rng.standard_normal((3, H, N, d))
    rows_of, ks = key_steps(name, N, P)
    O = np.empty_like(Q)
    reads, writes = [], []
    for p in range(P):
        proc = Processor(M, Q[:, rows_of[p]], rows_of[p], ks[p], causal, 1 / np.sqrt(d))
        for t, krows in enumerate(ks[p]):
            proc.step(t, K[:, krows], V[:, krows])
        O[:, rows_of[p]] = proc.output()
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
    ({"name": "usp", "heads": 2}, "only, not for 'usp'"),
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
