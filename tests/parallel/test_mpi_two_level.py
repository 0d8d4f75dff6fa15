"""Both levels counted on real MPI processes (2 and 4 ranks; USP, the grid and head groups x
grid also at the shapes of 4):
every rank runs FlashAttention through its own cache of ``M`` entries; the words between
processes and the entries between each process's memory and its cache both equal their closed
forms, and the outputs the reference."""

import itertools

import numpy as np
import pytest

from ioattn import parallel
from ioattn.parallel.launch import as_cost, launch
from ioattn.parallel.two_level import BACKWARD_TWO_LEVEL, TWO_LEVEL

#: (N, d, H, causal, M): one query block per rank and several, one head and two, dense and
#: causal, the smallest cache and larger ones.
SHAPES = [(40, 4, 1, False, 20), (40, 4, 1, True, 60), (37, 3, 2, True, 40),
          (64, 8, 1, True, 600), (29, 2, 1, False, 12), (48, 4, 2, False, 400)]
CASES = list(itertools.product(TWO_LEVEL, SHAPES))


def _jobs(P):
    # all_to_all gives each rank whole heads: H + P of them (at least P, shared unevenly)
    return [{"id": i, "name": name, "N": N, "d": d, "heads": H + P * (name == "all_to_all"),
             "causal": causal, "M": M, "grid": None, "seed": 300 + i}
            for i, (name, (N, d, H, causal, M)) in enumerate(CASES)]


@pytest.fixture(scope="module", params=[2, 4], ids=["P=2", "P=4"])
def results(request):
    assert parallel.available(), "mpi4py and mpiexec are installed by `make` (parallel extra)"
    P = request.param
    return P, launch(_jobs(P), P, timeout=600)


def test_both_levels_counted_equal_the_closed_form(results):
    P, got = results
    assert [r["id"] for r in got] == list(range(len(CASES)))
    for r in got:
        counted = as_cost(r)
        closed = parallel.cost(r["name"], r["N"], r["d"], P, heads=r["heads"],
                               causal=r["causal"], M=r["M"])
        assert np.array_equal(counted.cache_reads, closed.cache_reads), r
        assert np.array_equal(counted.cache_writes, closed.cache_writes), r
        assert counted == closed
        assert counted.max_cache_io > 0


def test_outputs_equal_the_reference(results):
    _, got = results
    for r in got:
        assert r["error"] < 1e-10, (r["name"], r["N"], r["M"], r["error"])


def test_run_with_a_cache():
    rng = np.random.default_rng(3)
    Q, K, V = rng.standard_normal((3, 30, 4))
    r = parallel.run("zigzag", Q, K, V, P=2, causal=True, M=40)
    assert r.output.shape == (30, 4) and r.error < 1e-10 and r.counted == r.cost
    assert r.cost.M == 40 and r.counted.cache_reads.sum() > 0


#: USP, the grid and head groups x grid at the shapes of 4 ranks (the default ones are in
#: CASES: the grid 2 x 2 at 4 ranks, 2 x 1 at 2): (name, grid, N, d, H, causal, M).
USP_SHAPES = [("usp", [2, 2], 37, 3, 4, False, 40), ("usp", [2, 2], 40, 4, 2, True, 60),
              ("usp", [4, 1], 30, 4, 5, True, 600), ("usp", [1, 4], 40, 4, 1, True, 20),
              ("usp_zigzag", [2, 2], 37, 3, 2, True, 40),
              ("usp_zigzag", [2, 2], 64, 8, 3, True, 600),
              ("grid", [2, 2], 37, 3, 2, True, 16), ("grid", [1, 4], 40, 4, 1, True, 60),
              ("grid", [4, 1], 30, 4, 2, False, 600),
              ("usp_grid", [2, 1, 2], 37, 3, 2, True, 40),
              ("usp_grid", [1, 2, 2], 40, 4, 3, True, 20),
              ("usp_grid", [2, 2, 1], 30, 4, 2, False, 600)]
#: The shaped backward passes at the shapes of 4 ranks (the default ones are in BACKWARD_CASES).
USP_BACKWARD_SHAPES = [("usp", [2, 2], 37, 3, 4, False, 40), ("usp", [2, 2], 40, 4, 2, True, 60),
                       ("usp", [4, 1], 30, 4, 5, True, 600), ("usp", [1, 4], 40, 4, 1, True, 32),
                       ("usp_zigzag", [2, 2], 37, 3, 2, True, 40),
                       ("usp_zigzag", [2, 2], 64, 8, 3, True, 600),
                       ("grid", [2, 2], 37, 3, 2, True, 32), ("grid", [1, 4], 40, 4, 1, True, 60),
                       ("grid", [4, 1], 30, 4, 2, False, 600),
                       ("usp_grid", [2, 1, 2], 37, 3, 2, True, 40),
                       ("usp_grid", [1, 2, 2], 40, 4, 3, True, 32),
                       ("usp_grid", [2, 2, 1], 30, 4, 2, False, 600)]


def test_shaped_both_levels_at_every_shape_of_four_ranks():
    shapes = [(s, False) for s in USP_SHAPES] + [(s, True) for s in USP_BACKWARD_SHAPES]
    jobs = [{"id": i, "name": name, "N": N, "d": d, "heads": H, "causal": causal, "M": M,
             "grid": grid, "backward": backward, "seed": 700 + i}
            for i, ((name, grid, N, d, H, causal, M), backward) in enumerate(shapes)]
    got = launch(jobs, 4, timeout=600)
    assert [r["id"] for r in got] == list(range(len(shapes)))
    assert sum(r["backward"] for r in got) == len(USP_BACKWARD_SHAPES)
    for r in got:
        counted = as_cost(r)
        closed = parallel.cost(r["name"], r["N"], r["d"], 4, heads=r["heads"],
                               causal=r["causal"], backward=r["backward"],
                               grid=tuple(r["grid"]), M=r["M"])
        assert np.array_equal(counted.cache_reads, closed.cache_reads), r["grid"]
        assert np.array_equal(counted.cache_writes, closed.cache_writes), r["grid"]
        assert counted == closed and counted.max_cache_io > 0
        assert r["error"] < 1e-10


#: The backward passes counted at both levels: (N, d, H, causal, M), the smallest cache (7d + 4)
#: and larger.
BACKWARD_SHAPES = [(40, 4, 1, True, 32), (37, 3, 2, True, 60), (29, 2, 1, False, 18),
                   (48, 4, 2, False, 400), (64, 8, 1, True, 600)]
BACKWARD_CASES = list(itertools.product(BACKWARD_TWO_LEVEL, BACKWARD_SHAPES))


@pytest.fixture(scope="module", params=[2, 4], ids=["P=2", "P=4"])
def backward_results(request):
    assert parallel.available(), "mpi4py and mpiexec are installed by `make` (parallel extra)"
    P = request.param
    # all_to_all gives each rank whole heads: H + P of them
    jobs = [{"id": i, "name": name, "N": N, "d": d, "heads": H + P * (name == "all_to_all"),
             "causal": causal, "M": M, "backward": True, "grid": None, "seed": 900 + i}
            for i, (name, (N, d, H, causal, M)) in enumerate(BACKWARD_CASES)]
    return P, launch(jobs, P, timeout=600)


def test_backward_both_levels_counted_equal_the_closed_form(backward_results):
    P, got = backward_results
    assert [r["id"] for r in got] == list(range(len(BACKWARD_CASES)))
    for r in got:
        assert r["backward"]
        counted = as_cost(r)
        closed = parallel.cost(r["name"], r["N"], r["d"], P, heads=r["heads"],
                               causal=r["causal"], backward=True, M=r["M"])
        assert np.array_equal(counted.cache_reads, closed.cache_reads), r
        assert np.array_equal(counted.cache_writes, closed.cache_writes), r
        assert counted == closed
        assert counted.max_cache_io > 0
        # the words between processors are those of the backward without a cache
        plain = parallel.cost(r["name"], r["N"], r["d"], P, heads=r["heads"],
                              causal=r["causal"], backward=True)
        assert np.array_equal(counted.sent, plain.sent)
        assert np.array_equal(counted.work, plain.work)


def test_backward_gradients_equal_the_reference(backward_results):
    _, got = backward_results
    for r in got:
        assert r["error"] < 1e-10, (r["name"], r["N"], r["M"], r["error"])


def test_run_backward_with_a_cache():
    rng = np.random.default_rng(5)
    Q, K, V, dO = rng.standard_normal((4, 30, 4))
    r = parallel.run("zigzag", Q, K, V, P=2, causal=True, backward=True, dO=dO, M=40)
    assert r.error < 1e-10 and r.counted == r.cost and r.cost.backward
    assert r.cost.M == 40 and r.counted.cache_reads.sum() > 0


def test_run_rejects_a_cache_it_cannot_count():
    Q = np.zeros((8, 4))
    for name in ("ring", "grid", "usp_grid"):
        with pytest.raises(ValueError, match="at least 7d \\+ 4 = 32"):
            parallel.run(name, Q, Q, Q, P=2, backward=True, dO=Q, M=31)
    for name in ("ring", "grid", "usp_grid"):
        with pytest.raises(ValueError, match="at least 4d \\+ 4 = 20"):
            parallel.run(name, Q, Q, Q, P=2, M=19)


def test_the_engine_command_takes_a_cache():
    import subprocess
    import sys

    from ioattn.parallel.launch import mpiexec

    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "ioattn.parallel.engine",
                           "grid", "--N", "21", "--d", "4", "--causal", "--grid", "1x2",
                           "--M", "40"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    cache = [line for line in lines if "cache reads" in line]
    assert len(cache) == 2 and all(line.endswith("closed form equal True") for line in cache)
    assert float(lines[-1].split()[-1]) < 1e-10
