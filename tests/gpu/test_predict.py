"""The three-level prediction (ioattn.gpu.predict): its counts scaled from small N equal the
emulator's direct counts, its occupancy follows from ptxas's registers, and the issue's target
for the fast kernel, as predicted."""

import math
from fractions import Fraction

import pytest

from ioattn.gpu import predict as P
from ioattn.gpus import GPUS


def direct(label, N, d, dtype, block):
    """(sectors, wavefronts, fma) of one head, counted by the emulator at N itself."""
    rows = P._emulate(P.KERNELS[label], N, d, dtype, block)
    return (sum(c.sectors for c in rows if c.space == "global"),
            sum(c.wavefronts for c in rows if c.space == "shared"),
            sum(c.accesses for c in rows if c.space == "tensor"))


@pytest.mark.parametrize("label, d, dtype, block", [
    ("flash_fa2", 64, "bfloat16", (32, 64)),
    ("flash", 32, "float16", (16, 32)),
    ("flash", 16, "float32", (16, 32)),
    ("flash backward", 16, "float32", (16, 16)),
])
def test_the_scaled_counts_equal_direct_counts(label, d, dtype, block):
    # fitted a k + b k^2 from N = L and 2 L, checked at 3 L and 4 L, where L = lcm(B_r, B_c)
    L = math.lcm(*block)
    for k in (3, 4):
        c = P.counts(label, k * L, d, dtype=dtype, block=block)
        assert (c.sectors, c.wavefronts, c.fma) == direct(label, k * L, d, dtype, block)
    two = P.counts(label, 4 * L, d, heads=2, dtype=dtype, block=block)
    assert two == P.Counts(*(2 * v for v in vars(c).values()))       # heads are independent


def test_a_ragged_N_is_refused():
    with pytest.raises(ValueError, match="multiple of lcm"):
        P.counts("flash_fa2", 100, 64, block=(32, 64))


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="gpu must be one of"):
        P.launches("flash_fa2", 128, 64, gpu="V100")
    with pytest.raises(ValueError, match="kernel must be one of"):
        P.predict("flash_fa3", 128, 64)
    with pytest.raises(ValueError, match="no bfloat16 peak"):
        P.predict("flash_fa2", 128, 64, gpu="T4")


def test_the_launches_are_the_host_codes():
    plan, runs = P.launches("flash_fa2", 8192, 128, heads=16, dtype="bfloat16", gpu="H100")
    (run,) = runs
    assert (plan.B_r, plan.B_c) == (128, 16)
    assert run.grid == (8192 // 128, 16) and run.threads == 4 * 32
    assert run.shared == 2 * max(128, 4 * 16) * (128 + 8)
    Q = 16 * 8192 * 128 * 2                            # bytes of Q, K, V (bfloat16), O float32
    assert run.arrays == (Q, Q, Q, 2 * Q, 4, 16)       # Q, K, V, O, L (unused), the counter
    plan, runs = P.launches("flash backward", 8192, 128, heads=16, gpu="H100", dtype="float32")
    assert [r.kernel for r in runs] == ["flash_backward_preprocess", "flash_backward"]
    assert runs[1].blocks == 16                        # one block per head


def test_occupancy_follows_from_the_registers(nvcc):
    _, (run,) = P.launches("flash_fa2", 8192, 128, heads=16, dtype="bfloat16", gpu="H100")
    occ = P.occupancy(run, "H100")
    per_warp = -(-occ.registers * 32 // 256) * 256
    assert occ.blocks_per_sm == min(65536 // per_warp // 4, 228 * 1024 // (run.shared + 1024),
                                    2048 // 128, 32)
    assert occ.registers > 0 and occ.warps_per_sm == 4 * occ.blocks_per_sm


def test_a_kernel_registers_and_is_predicted():
    kernel = P.Kernel("flash float32 (test)", "flash")
    try:
        P.register(kernel)
        assert P.KERNELS["flash float32 (test)"] is kernel
    finally:
        del P.KERNELS["flash float32 (test)"]


@pytest.fixture(scope="module")
def target(nvcc):
    return P.predict("flash_fa2", 8192, 128, heads=16, dtype="bfloat16", gpu="H100")


def test_the_fast_kernels_main_loop_is_conflict_free(target):
    # the main loop's wavefronts (the per-pair part of the count) within 1.1x of the fewest its
    # requests could take, ceil(bytes / 128) each
    c = target.counts
    assert c.loop_minimum > 0 and c.loop_wavefronts <= 1.1 * c.loop_minimum


def test_the_prediction_is_the_largest_level(target):
    g = GPUS["H100"]
    c = target.counts
    (run,) = target.launches
    assert target.l2_resident == (True,)
    # HBM: each array once (fewer sectors than counted: K and V are re-read per query block)
    assert run.compulsory < c.sectors
    assert target.times["HBM"] == Fraction(32 * run.compulsory, g.bandwidth)
    assert target.times["L2"] == Fraction(32 * c.sectors) / g.l2_bandwidth()
    assert target.hbm_only == Fraction(32 * c.sectors, g.bandwidth)
    assert target.times["compute"] == Fraction(2 * c.fma, g.peak["bfloat16"])
    assert c.fma == 2 * 8192 ** 2 * 128 * 16                # Q K^T and P V, every head
    assert target.time == max(target.times.values()) <= target.pessimistic
    assert target.sms_used == 132 and target.waves >= 1


def test_the_l2_level_needs_the_reread_arrays_to_fit(target):
    # 2 blocks an SM, 264 resident, 64 a head: 6 heads' K and V (4 MiB each) in flight
    (run,), (occ,) = target.launches, target.occupancy
    kernel, g = P.KERNELS["flash_fa2"], GPUS["H100"]
    assert occ.blocks_per_sm == 2 and P.l2_span(run, occ, "H100", 16) == 6
    with pytest.raises(ValueError, match="do not split"):
        P.l2_span(run, occ, "H100", 3)
    assert P._l2_holds(kernel, run, occ, g, 16)
    assert P._l2_holds(kernel, run, occ, g._replace(l2=6 * 4 * 2 ** 20), 16)
    assert not P._l2_holds(kernel, run, occ, g._replace(l2=6 * 4 * 2 ** 20 - 1), 16)
    assert not P._l2_holds(P.KERNELS["flash backward"], run, occ, g, 16)   # nothing declared


def test_the_t4_has_no_l2_level():
    p = P.predict("flash_fa2", 128, 64, dtype="float16", gpu="T4")
    assert "L2" not in p.times and p.l2_resident == (False,)
    assert p.times["HBM"] == p.hbm_only


def test_the_fast_kernel_reaches_half_the_dense_peak(target):
    # the target, as a prediction: the shared level binds (1.25 wavefronts per mma)
    assert target.tflops >= 0.5 * GPUS["H100"].peak["bfloat16"] / 1e12
    assert target.bound == "shared"
