"""The algorithms as real MPI processes (mpiexec with 2 and 4 ranks), forward and backward: every
counted word, message, buffer and score equals the closed form, and the outputs (the gradients
for a backward pass) equal the reference."""

import numpy as np
import pytest

from ioattn import parallel
from ioattn.parallel import bounds
from ioattn.parallel.costs import BACKWARD
from ioattn.parallel.launch import as_cost, launch

#: (N, d, H, causal): shares equal and unequal, one head and several, dense and causal.
SHAPES = [(48, 8, 4, False), (37, 5, 4, True), (13, 3, 6, True), (64, 16, 4, False)]
CASES = [(name, backward, grid, shape)
         for name, backward, grid in [("ring", False, None), ("ring", True, None),
                                      ("striped", False, None), ("striped", True, None),
                                      ("all_to_all", False, None), ("grid", False, None),
                                      ("grid", False, "rows"), ("grid", False, "columns"),
                                      ("all_to_all", True, None), ("grid", True, None),
                                      ("grid", True, "rows"), ("grid", True, "columns")]
         for shape in SHAPES]


def _jobs(P):
    jobs = []
    for i, (name, backward, grid, (N, d, H, causal)) in enumerate(CASES):
        g = {None: None, "rows": [1, P], "columns": [P, 1]}[grid]
        jobs.append({"id": i, "name": name, "N": N, "d": d, "heads": H, "causal": causal,
                     "backward": backward, "grid": g, "seed": 100 + i})
    return jobs


@pytest.fixture(scope="module", params=[2, 4], ids=["P=2", "P=4"])
def results(request):
    assert parallel.available(), "mpi4py and mpiexec are installed by `make` (parallel extra)"
    P = request.param
    return P, launch(_jobs(P), P, timeout=600)


def test_every_case_ran(results):
    P, got = results
    assert [r["id"] for r in got] == list(range(len(CASES)))
    assert all(r["P"] == P for r in got)


def test_counted_equals_closed_form(results):
    P, got = results
    for r in got:
        counted = as_cost(r)
        closed = parallel.cost(r["name"], r["N"], r["d"], P, heads=r["heads"],
                               causal=r["causal"], backward=r["backward"],
                               grid=r["grid"] and tuple(r["grid"]))
        for field in ("sent", "received", "messages", "memory", "work"):
            assert np.array_equal(getattr(counted, field), getattr(closed, field)), \
                (r["name"], r["backward"], r["grid"], r["N"], field)
        assert counted == closed
        assert counted.max_traffic > 0 and counted.total_work == closed.total_work


def test_outputs_equal_the_reference(results):
    _, got = results
    for r in got:
        assert r["error"] < 1e-10, (r["name"], r["backward"], r["N"], r["error"])


def test_counted_words_respect_the_lower_bounds(results):
    P, got = results
    positive = 0
    for r in got:
        c = as_cost(r)
        bound = bounds.lower_bound(r["N"], r["d"], P, c.max_memory, heads=r["heads"],
                                   causal=r["causal"])
        assert c.max_received >= bound, r["name"]
        positive += bound > 0
    assert positive >= len(got) // 2            # not a vacuous check


def test_run_returns_outputs_shaped_like_the_input():
    rng = np.random.default_rng(7)
    Q, K, V, dO = rng.standard_normal((4, 30, 6))
    r = parallel.run("striped", Q, K, V, P=2, causal=True)
    assert r.output.shape == (30, 6) and r.error < 1e-10 and r.counted == r.cost
    from ioattn.parallel.reference import attention
    assert np.allclose(r.output, attention(Q[None], K[None], V[None], causal=True,
                                           scale=6 ** -0.5)[0][0], atol=1e-12)
    b = parallel.run("ring", Q, K, V, P=2, backward=True, dO=dO, scale=0.3)
    assert [x.shape for x in b.output] == [(30, 6)] * 3 and b.error < 1e-10
    assert b.counted == b.cost and b.cost.backward


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "ring", "P": 8}, "N = 5 < P = 8"),
    ({"name": "grid", "P": 2, "backward": True}, "backward=True needs"),
    ({"name": "ring", "P": 2, "dO": np.zeros((5, 2))}, "pass backward=True"),
    ({"name": "all_to_all", "P": 2}, "heads >= P"),
])
def test_bad_input_is_named_before_anything_starts(kwargs, message):
    Q = np.ones((5, 2))
    with pytest.raises(ValueError, match=message):
        parallel.run(Q=Q, K=Q, V=Q, **kwargs)


def test_bad_arrays_are_named():
    Q = np.ones((5, 2))
    with pytest.raises(ValueError, match="V has shape"):
        parallel.run("ring", Q, Q, np.ones((6, 2)), P=2)
    with pytest.raises(ValueError, match="K has 10 non-finite"):
        parallel.run("ring", Q, np.full((5, 2), np.nan), Q, P=2)
    with pytest.raises(TypeError, match="floating-point"):
        parallel.run("ring", np.ones((5, 2), int), Q, Q, P=2)


def test_a_failing_rank_is_reported_not_hung():
    with pytest.raises(RuntimeError, match=r"rank \d: ValueError: all_to_all .* heads >= P"):
        launch([{"name": "all_to_all", "N": 8, "d": 2, "heads": 1, "seed": 0}], 2, timeout=120)


def test_missing_mpi_is_a_clear_error(monkeypatch):
    import ioattn.parallel.launch as L
    monkeypatch.setattr(L, "find_spec", lambda name: None)
    assert not L.available()
    with pytest.raises(parallel.MPIUnavailable, match="mpi4py is not installed"):
        parallel.run("ring", np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 2)), P=2)


def test_every_algorithm_has_its_backward_pass():
    assert set(BACKWARD) == {"ring", "striped", "all_to_all", "grid"}


def test_grid_backward_moves_less_than_the_ring_backward(results):
    # the grid (default 2 x 1 at P = 2, 2 x 2 at P = 4) against the ring, both backward
    P, got = results
    by = {(r["name"], r["backward"], r["grid"] and tuple(r["grid"]), r["N"]): as_cost(r)
          for r in got}
    grid, ring = by["grid", True, (2, 2) if P == 4 else (2, 1), 64], by["ring", True, None, 64]
    # even on 2 x 1 the grid's sums of dK, dV take the place of the ring's dK, dV sent home
    assert grid.max_traffic < ring.max_traffic


def test_the_engine_command_prints_counts_equal_to_the_closed_form():
    import subprocess
    import sys

    from ioattn.parallel.launch import mpiexec
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "ioattn.parallel.engine",
                           "ring", "--N", "21", "--d", "4", "--heads", "2", "--backward",
                           "--causal"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ring on 2 processes, N=21, d=4, H=2, causal, backward"
    assert [line.split()[-1] for line in lines[2:4]] == ["True", "True"]
    assert float(lines[-1].split()[-1]) < 1e-10
