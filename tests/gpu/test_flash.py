"""The float32 FlashAttention kernel (kernels/flash.cu), run by the CPU emulator: the output
against float64, and the traffic it counts against ioattn.io_cost for its plan."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
import ioattn.gpu as gpu
from ioattn.masks import Mask

from ioattn.gpu.plans import per_block_for

from .conftest import reference, rel_error


def expected_io(result, N, d, causal=False, save_lse=False):
    """``heads * io_cost`` for the result's plan."""
    p = result.plan
    c = ioattn.io_cost("flash", N, d, p.M, block=(p.B_r, p.B_c),
                       mask=Mask.causal(N) if causal else None, save_lse=save_lse)
    return result.heads * c.reads, result.heads * c.writes


def check(rng, shape, causal=False, scale=None, logits=1.0, **kw):
    *lead, N, d = shape
    Q, K, V = (rng.standard_normal(shape) for _ in range(3))
    Q *= logits
    r = gpu.run("flash", Q, K, V, causal=causal, scale=scale, count_io=True, save_lse=True,
                backend="emulator", **kw)
    O, L = reference(Q, K, V, scale=scale, causal=causal)
    assert r.output.shape == tuple(shape) and r.lse.shape == tuple(shape[:-1])
    assert rel_error(r.output, O) <= 1e-5
    assert rel_error(r.lse, L) <= 1e-5
    assert (r.io.reads, r.io.writes) == expected_io(r, N, d, causal, save_lse=True)
    assert r.io.peak == r.plan.footprint
    return r


@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
@pytest.mark.parametrize("N, d, M", [(1, 16, 100), (7, 16, 2000), (37, 16, 300),
                                     (70, 32, 2000), (65, 80, 4000)])
def test_budget_M_follows_the_reference_rule(rng, N, d, M, causal):
    r = check(rng, (N, d), causal=causal, M=M)
    assert r.plan == ioattn.plan("flash", N, d, M, mask=r.plan.mask, save_lse=True)


def test_batch_heads_blocks_and_large_logits(rng):
    r = check(rng, (2, 3, 45, 16), causal=True, block=(8, 12), logits=50.0)
    assert r.heads == 6 and (r.plan.B_r, r.plan.B_c) == (8, 12)
    assert r.io.reads > 0


def test_default_plan_comes_from_the_shared_memory(rng):
    r = check(rng, (20, 32))
    budget = gpu.backend.get_backend("emulator").shared_memory_per_block
    assert 4 * r.plan.footprint <= per_block_for(budget, 2)
    assert r.plan.M == per_block_for(budget, 2) // 4


@given(N=st.integers(1, 60), d=st.sampled_from([1, 8, 16, 24]), B_r=st.integers(1, 20),
       B_c=st.integers(1, 20), causal=st.booleans(), seed=st.integers(0, 2**16))
def test_any_shape_and_block(N, d, B_r, B_c, causal, seed):
    check(np.random.default_rng(seed), (N, d), causal=causal, block=(B_r, B_c), scale=0.3)


def test_threads_in_reverse_order_give_the_same_result(rng, monkeypatch):
    Q, K, V = (rng.standard_normal((50, 16)) for _ in range(3))
    first = gpu.run("flash", Q, K, V, M=600, causal=True, backend="emulator").output
    monkeypatch.setenv("IOATTN_EMULATOR_REVERSE", "1")
    second = gpu.run("flash", Q, K, V, M=600, causal=True, backend="emulator").output
    np.testing.assert_array_equal(first, second)


def test_launch_reruns_and_counts_each_launch(rng):
    Q, K, V = (rng.standard_normal((30, 16)) for _ in range(3))
    launch = gpu.prepare("flash", Q, K, V, M=500, count_io=True, backend="emulator")
    launch()
    first = launch.result()
    launch()
    again = launch.result()
    assert first.io == again.io and first.io.total > 0
