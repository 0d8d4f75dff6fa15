"""The standard-attention kernels (``standard.cu``, S and P materialised): float32 output against
the float64 reference, and counted traffic equal to ``ioattn.io_cost("standard", ...)`` exactly,
per head, with the softmax in one pass (blocks of whole rows) and in two (strips); on the CPU
emulator at small sizes and on a real GPU at larger ones."""

import numpy as np
import pytest

import ioattn
from ioattn.gpu import run
from ioattn.gpu import standard as host

from .conftest import EMULATED, check_dense


def check(rng, shape, *, passes=None, **kw):
    r = check_dense(rng, "standard", shape, **kw)
    if passes is not None:
        assert r.plan.passes == passes
    return r


# (shape, M, save_lse, passes): several tiles of both products with ragged last ones, several
# strips per tile; the softmax in blocks of R rows (ragged last block, R = 1, R = N) or in strips
# of W (ragged, W = 1).
CASES = [
    ((2, 37, 8), 100, True, 1),         # R = 2, 19 row blocks, the last one row
    ((1, 45, 13), 400, False, 1),       # R = 8
    ((1, 45, 13), 47, True, 1),         # R = 1
    ((1, 45, 13), 900, False, 1),       # P V in 9 strips 5 wide; R = 19
    ((1, 40, 24), 2000, True, 1),       # Q K^T in 5 strips 5 wide (the last 4); R = N
    ((2, 30, 16), 3000, True, 1),       # R = N: one block; one tile per product
    ((1, 45, 13), 30, True, 2),         # W = 28: two strips per row, the last ragged
    ((2, 20, 6), 3, False, 2),          # W = 1, 1x1 tiles
    ((1, 1, 4), 20, True, 1),           # N = 1
]


@pytest.mark.parametrize("shape, M, save_lse, passes", CASES)
def test_emulator_output_and_count(rng, shape, M, save_lse, passes):
    check(rng, shape, M=M, save_lse=save_lse, passes=passes)


def test_emulator_heads_and_scale(rng):
    check(rng, (2, 2, 21, 6), M=150, save_lse=True, scale=0.3)


def test_plan_rules():
    p = host.plan(64, 16, budget=EMULATED)
    assert p.M == EMULATED // 4                                    # the default: the device
    assert p == ioattn.plan("standard", 64, 16, EMULATED // 4)
    assert host.plan(64, 16, M=40, budget=EMULATED).passes == 2


def test_plan_errors():
    with pytest.raises(ValueError, match="block"):
        host.plan(64, 16, block=(8, 8), budget=EMULATED)
    with pytest.raises(ValueError, match="float32"):
        host.plan(64, 16, dtype="float16", budget=EMULATED)
    with pytest.raises(TypeError, match="schedule"):
        host.plan(64, 16, M=100, schedule="outer", budget=EMULATED)
    with pytest.raises(ValueError, match="at least M"):
        host.plan(64, 16, M=2, budget=EMULATED)
    with pytest.raises(ValueError, match=r"shared memory.*use M <= (\d+)") as err:
        host.plan(64, 16, M=5000, budget=4096)
    largest = int(err.value.args[0].rsplit(" ", 1)[1])
    assert 4 * host.plan(64, 16, M=largest, budget=4096).footprint <= 4096
    with pytest.raises(ValueError, match="shared memory"):
        host.plan(64, 16, M=largest + 1, budget=4096)


def test_causal_is_rejected(rng):
    Q = rng.standard_normal((8, 4)).astype(np.float32)
    with pytest.raises(ValueError, match="causal"):
        run("standard", Q, Q, Q, M=100, causal=True, backend="emulator")


@pytest.mark.gpu
@pytest.mark.parametrize("N, d", [(1, 16), (257, 64), (1024, 128)])
def test_gpu_output_and_count(rng, N, d):
    check(rng, (3, N, d), save_lse=True, backend="cuda", passes=1)          # default M
    check(rng, (2, N, d), M=3 + 40 * d, backend="cuda")                     # many small tiles
    if N > 1:
        check(rng, (2, N, d), M=N // 3 + 2, save_lse=True, backend="cuda", passes=2)
