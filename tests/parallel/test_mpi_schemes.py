"""The schemes run in practice as real MPI processes (2 and 4 ranks, USP at 4 as 2 x 2, 4 x 1
and 1 x 4, and with the zigzag ring as 1 x 2 and 2 x 2; head groups x grid at 4 as 2 x (2 x 1),
2 x (1 x 2), 1 x (2 x 2), 4 x (1 x 1) and 1 x (4 x 1); the backward passes of the zigzag ring,
the all-gather, USP and head groups x grid, on the same shapes): every counted word, message,
buffer and score equals the closed form, and the outputs (the gradients for a backward pass)
equal the reference."""

import subprocess
import sys

import numpy as np
import pytest

from ioattn import parallel
from ioattn.parallel import bounds
from ioattn.parallel.launch import as_cost, launch, mpiexec

#: (name, backward, grid, N, d, H, causal): unequal chunks and shares, both masks.
CASES = {2: [("zigzag", False, None, 37, 5, 3, True), ("zigzag", False, None, 32, 4, 2, False),
             ("zigzag", True, None, 29, 4, 2, True), ("all_gather", False, None, 37, 5, 3, True),
             ("all_gather", False, None, 32, 4, 2, False), ("usp", False, None, 30, 4, 3, True),
             ("usp_zigzag", False, [1, 2], 29, 4, 2, True),
             ("usp_grid", False, [1, 1, 2], 29, 4, 2, True),
             ("usp_grid", False, [2, 1, 1], 30, 4, 3, False),
             ("all_gather", True, None, 37, 5, 3, True),
             ("all_gather", True, None, 32, 4, 2, False),
             ("usp", True, [2, 1], 30, 4, 3, True), ("usp", True, [1, 2], 29, 4, 2, False),
             ("usp_zigzag", True, [1, 2], 29, 4, 2, True),
             ("usp_grid", True, [1, 1, 2], 29, 4, 2, True),
             ("usp_grid", True, [2, 1, 1], 30, 4, 3, False)],
         4: [("zigzag", False, None, 37, 5, 3, True), ("zigzag", False, None, 40, 4, 2, False),
             ("zigzag", True, None, 29, 4, 2, True), ("zigzag", True, None, 24, 3, 1, False),
             ("all_gather", False, None, 37, 5, 3, True),
             ("all_gather", False, None, 40, 4, 2, False),
             ("usp", False, [2, 2], 37, 5, 3, True), ("usp", False, [2, 2], 32, 4, 4, False),
             ("usp", False, [4, 1], 30, 4, 5, True), ("usp", False, [1, 4], 30, 4, 2, True),
             ("usp_zigzag", False, [2, 2], 37, 5, 3, True),
             ("usp_zigzag", False, [2, 2], 32, 4, 4, False),
             ("usp_grid", False, [2, 2, 1], 37, 5, 3, True),
             ("usp_grid", False, [2, 1, 2], 37, 5, 3, True),
             ("usp_grid", False, [2, 1, 2], 32, 4, 2, False),
             ("usp_grid", False, [1, 2, 2], 30, 4, 1, True),
             ("usp_grid", False, [4, 1, 1], 30, 4, 5, True),
             ("usp_grid", False, [1, 4, 1], 29, 3, 2, True),
             ("usp_grid", False, None, 40, 4, 2, True),
             ("all_gather", True, None, 37, 5, 3, True),
             ("all_gather", True, None, 40, 4, 2, False),
             ("usp", True, [2, 2], 37, 5, 3, True), ("usp", True, [2, 2], 32, 4, 4, False),
             ("usp", True, [4, 1], 30, 4, 5, True), ("usp", True, [1, 4], 30, 4, 2, True),
             ("usp_zigzag", True, [2, 2], 37, 5, 3, True),
             ("usp_zigzag", True, [2, 2], 32, 4, 4, False),
             ("usp_grid", True, [2, 2, 1], 37, 5, 3, True),
             ("usp_grid", True, [2, 1, 2], 32, 4, 2, False),
             ("usp_grid", True, [1, 2, 2], 30, 4, 1, True),
             ("usp_grid", True, [4, 1, 1], 30, 4, 5, True),
             ("usp_grid", True, [1, 4, 1], 29, 3, 2, False),
             ("usp_grid", True, None, 40, 4, 2, True)]}


@pytest.fixture(scope="module")
def results():
    """P -> rank 0's results of the cases of CASES[P], one mpiexec for each P."""
    assert parallel.available(), "mpi4py and mpiexec are installed by `make` (parallel extra)"
    out = {}
    for P, cases in CASES.items():
        jobs = [{"id": i, "name": name, "N": N, "d": d, "heads": H, "causal": causal,
                 "backward": backward, "grid": grid, "seed": 300 + i}
                for i, (name, backward, grid, N, d, H, causal) in enumerate(cases)]
        out[P] = launch(jobs, P, timeout=600)
    return out


@pytest.mark.parametrize("P", [2, 4])
def test_counted_equals_closed_form_and_outputs_equal_the_reference(results, P):
    got = results[P]
    assert [r["id"] for r in got] == list(range(len(CASES[P])))
    for r in got:
        counted = as_cost(r)
        closed = parallel.cost(r["name"], r["N"], r["d"], P, heads=r["heads"],
                               causal=r["causal"], backward=r["backward"],
                               grid=r["grid"] and tuple(r["grid"]))
        for field in ("sent", "received", "messages", "memory", "work"):
            assert np.array_equal(getattr(counted, field), getattr(closed, field)), \
                (r["name"], r["backward"], r["grid"], r["N"], field)
        assert counted == closed and counted.max_traffic > 0
        assert r["error"] < 1e-10, (r["name"], r["backward"], r["N"], r["error"])
        assert counted.max_received >= bounds.lower_bound(r["N"], r["d"], P,
                                                          counted.max_memory,
                                                          heads=r["heads"], causal=r["causal"])


def test_usp_runs_reduce_to_all_to_all_and_the_ring(results):
    by = {(r["name"], tuple(r["grid"] or ())): as_cost(r) for r in results[4]
          if not r["backward"]}
    a2a = parallel.cost("all_to_all", 30, 4, 4, heads=5, causal=True)
    ring = parallel.cost("ring", 30, 4, 4, heads=2, causal=True)
    for field in ("sent", "received", "messages", "memory", "work"):
        assert np.array_equal(getattr(by["usp", (4, 1)], field), getattr(a2a, field)), field
    for field in ("sent", "received", "messages", "work"):
        assert np.array_equal(getattr(by["usp", (1, 4)], field), getattr(ring, field)), field


def test_usp_backward_runs_reduce_to_the_ring_backward(results):
    by = {(r["name"], tuple(r["grid"] or ()), r["backward"]): as_cost(r) for r in results[4]}
    ring = parallel.cost("ring", 30, 4, 4, heads=2, causal=True, backward=True)
    for field in ("sent", "received", "messages", "work"):
        assert np.array_equal(getattr(by["usp", (1, 4), True], field), getattr(ring, field))
    # the backward moves more than the forward: (4d + 2) and 3d words a row and head in the
    # all-to-alls, 4d and 2d in the ring, against 3d, d and 2d
    for key in (("usp", (2, 2)), ("usp_zigzag", (2, 2)), ("usp", (4, 1))):
        assert (by[key + (True,)].sent > by[key + (False,)].sent).all(), key


def test_usp_grid_backward_runs_reduce_to_the_grid_and_all_to_all(results):
    by = {(r["name"], tuple(r["grid"] or ()), r["backward"]): as_cost(r) for r in results[4]}
    a2a = parallel.cost("all_to_all", 30, 4, 4, heads=5, causal=True, backward=True)
    grid = parallel.cost("grid", 30, 4, 4, heads=1, causal=True, grid=(2, 2), backward=True)
    for field in ("sent", "received", "messages", "work"):
        assert np.array_equal(getattr(by["usp_grid", (4, 1, 1), True], field),
                              getattr(a2a, field)), field
        assert np.array_equal(getattr(by["usp_grid", (1, 2, 2), True], field),
                              getattr(grid, field)), field
    # the backward sends more than the forward on every shape
    for key in (("usp_grid", (2, 2, 1)), ("usp_grid", (4, 1, 1)), ("usp_grid", (1, 2, 2))):
        assert (by[key + (True,)].sent > by[key + (False,)].sent).all(), key


def test_the_engine_command_takes_the_usp_shape():
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "ioattn.parallel.engine",
                           "usp", "--N", "21", "--d", "4", "--heads", "2", "--grid", "1x2",
                           "--causal"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "usp on 2 processes, N=21, d=4, H=2, causal"
    assert [line.split()[-1] for line in lines[2:4]] == ["True", "True"]
    assert float(lines[-1].split()[-1]) < 1e-10


def test_run_takes_the_schemes_and_the_usp_shape():
    rng = np.random.default_rng(11)
    Q, K, V, dO = rng.standard_normal((4, 2, 30, 6))
    r = parallel.run("usp", Q, K, V, P=2, grid=(2, 1), causal=True)
    assert r.cost.grid == (2, 1) and r.counted == r.cost and r.error < 1e-10
    b = parallel.run("zigzag", Q, K, V, P=2, backward=True, dO=dO, causal=True)
    assert [x.shape for x in b.output] == [(2, 30, 6)] * 3
    assert b.counted == b.cost and b.cost.backward and b.error < 1e-10
    with pytest.raises(ValueError, match="heads >= P_u"):
        parallel.run("usp", Q, K, V, P=4, grid=(4, 1))
    for name, grid in (("all_gather", None), ("usp", (2, 1)), ("usp_grid", (1, 1, 2)),
                       ("grid", (1, 2)), ("all_to_all", None)):
        b = parallel.run(name, Q, K, V, P=2, backward=True, dO=dO, grid=grid, causal=True)
        assert [x.shape for x in b.output] == [(2, 30, 6)] * 3
        assert b.counted == b.cost and b.cost.backward and b.error < 1e-10


def test_the_engine_command_takes_the_usp_grid_shape():
    done = subprocess.run([mpiexec(), "-n", "4", sys.executable, "-m", "ioattn.parallel.engine",
                           "usp_grid", "--N", "22", "--d", "4", "--heads", "2", "--grid",
                           "2x1x2", "--causal"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "usp_grid on 4 processes, N=22, d=4, H=2, causal"
    assert [line.split()[-1] for line in lines[2:6]] == ["True"] * 4
    assert float(lines[-1].split()[-1]) < 1e-10
