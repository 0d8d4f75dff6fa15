"""The square-tiling kernels (``square_tiling.cu``, Saha-Ye Algorithm 1): float32 output against
the float64 reference, and counted traffic equal to ``ioattn.io_cost("square_tiling", ...)``
exactly, per head, for both schedules; on the CPU emulator at small sizes and on a real GPU at
larger ones."""

import numpy as np
import pytest

import ioattn
from ioattn.gpu import run
from ioattn.gpu import square_tiling as host

from .conftest import EMULATED, check_dense


def check(rng, shape, *, schedule="blocked", **kw):
    r = check_dense(rng, "square_tiling", shape, schedule=schedule, **kw)
    assert r.plan.schedule == schedule
    return r


# (shape, M, schedule, save_lse): several row blocks and column tiles with ragged last ones,
# several strips per tile, several output tiles (l accumulated in the first only), one tile.
CASES = [
    ((2, 37, 8), 100, "blocked", True),       # B = 5: 8 row blocks, strips of 5 over d = 8
    ((1, 45, 13), 400, "blocked", False),     # B = 10: two output tiles (10 + 3 columns of O)
    ((1, 45, 13), 64, "outer", True),         # strips one column wide
    ((2, 40, 12), 600, "outer", False),
    ((2, 30, 16), 3000, "outer", True),       # one tile each: S_i and O_i whole
    ((1, 33, 5), 17, "blocked", True),        # B = 2
    ((1, 1, 4), 20, "blocked", True),         # N = 1
]


@pytest.mark.parametrize("shape, M, schedule, save_lse", CASES)
def test_emulator_output_and_count(rng, shape, M, schedule, save_lse):
    check(rng, shape, M=M, schedule=schedule, save_lse=save_lse)


def test_emulator_heads_and_scale(rng):
    check(rng, (2, 2, 21, 6), M=150, schedule="outer", save_lse=True, scale=0.3)


def test_plan_rules():
    p = host.plan(64, 16, budget=EMULATED)
    assert p.M == EMULATED // 4 and p.schedule == "blocked"        # the default: the device
    assert p == ioattn.plan("square_tiling", 64, 16, EMULATED // 4)
    q = host.plan(64, 16, M=300, schedule="outer", budget=EMULATED)
    assert q == ioattn.plan("square_tiling", 64, 16, 300, schedule="outer")


def test_plan_errors():
    with pytest.raises(ValueError, match="block"):
        host.plan(64, 16, block=(8, 8), budget=EMULATED)
    with pytest.raises(ValueError, match="float32"):
        host.plan(64, 16, dtype="float16", budget=EMULATED)
    with pytest.raises(ValueError, match="schedule"):
        host.plan(64, 16, M=100, schedule="diagonal", budget=EMULATED)
    with pytest.raises(ValueError, match="at least M"):
        host.plan(64, 16, M=4, budget=EMULATED)
    for schedule in ("blocked", "outer"):
        with pytest.raises(ValueError, match=r"shared memory.*use M <= (\d+)") as err:
            host.plan(64, 16, M=5000, schedule=schedule, budget=4096)
        largest = int(err.value.args[0].rsplit(" ", 1)[1])
        assert 4 * host.plan(64, 16, M=largest, schedule=schedule, budget=4096).footprint <= 4096
        with pytest.raises(ValueError, match="shared memory"):
            host.plan(64, 16, M=largest + 1, schedule=schedule, budget=4096)


def test_causal_is_rejected(rng):
    Q = rng.standard_normal((8, 4)).astype(np.float32)
    with pytest.raises(ValueError, match="causal"):
        run("square_tiling", Q, Q, Q, M=100, causal=True, backend="emulator")


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", ["blocked", "outer"])
@pytest.mark.parametrize("N, d", [(1, 16), (257, 64), (1024, 128)])
def test_gpu_output_and_count(rng, schedule, N, d):
    check(rng, (3, N, d), schedule=schedule, save_lse=True, backend="cuda")   # default M
    M = ioattn.min_M("square_tiling", d, schedule=schedule) + 40 * d
    check(rng, (2, N, d), M=M, schedule=schedule, backend="cuda")           # many small tiles
