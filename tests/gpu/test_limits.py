"""Launch limits a GPU enforces and the emulator would not: gridDim.y (batch x heads) at most
65,535, and the shared memory reserved per resident block (1 KiB on compute capability 8.x and
9.0), which decides whether the default flash plan gets two blocks per multiprocessor."""

import numpy as np
import pytest

import ioattn.gpu as gpu
from ioattn.gpu.plans import MAX_GRID_Y, RESERVED, per_block_for, resident_blocks

# opt-in shared memory per block (bytes): H100/H200 (9.0), A100 (8.0), RTX 30/40 (8.6, 8.9)
BUDGETS = {"sm_90": 227 * 1024, "sm_80": 163 * 1024, "sm_86": 99 * 1024}


def test_resident_blocks_counts_the_reserved_kilobyte():
    h100 = BUDGETS["sm_90"]                       # 228 KiB per SM
    assert per_block_for(h100, 2) == 113 * 1024
    assert resident_blocks(h100, 113 * 1024) == 2
    assert resident_blocks(h100, 113 * 1024 + 1) == 1
    assert resident_blocks(h100, h100 // 2) == 1  # half the opt-in maximum: one block, not two
    assert resident_blocks(BUDGETS["sm_80"], 81 * 1024) == 2
    assert resident_blocks(BUDGETS["sm_80"], 81 * 1024 + 1) == 1
    assert RESERVED == 1024


@pytest.mark.parametrize("arch", sorted(BUDGETS))
def test_default_float32_flash_plan_gets_two_blocks_per_multiprocessor(arch):
    budget = BUDGETS[arch]
    for d in range(1, 257):
        p = gpu.gpu_plan("flash", 8192, d, budget=budget)
        assert resident_blocks(budget, 4 * p.footprint) >= 2, d
        bigger = gpu.flash.footprint(d, p.B_r + 1, p.B_r + 1)
        assert resident_blocks(budget, 4 * bigger) < 2, d          # and the largest such


@pytest.mark.parametrize("arch", sorted(BUDGETS))
def test_default_tensor_core_plan_gets_two_blocks_per_multiprocessor(arch):
    budget = BUDGETS[arch]
    for d in range(16, 257, 16):
        try:
            p = gpu.gpu_plan("flash", 8192, d, dtype="float16", budget=budget)
        except ValueError:
            continue                              # no 16 x 16 block fits at all
        need = gpu.flash_tc.shared_bytes(p.B_r, p.B_c, d)
        if p.B_r > 16:                            # a larger block than the least was chosen
            assert resident_blocks(budget, need) >= 2, d


def _qkv(BH, dtype=np.float32):
    return [np.zeros((BH, 1, 16), dtype) for _ in range(3)]


@pytest.mark.parametrize("name", ["flash", "standard", "square_tiling"])
def test_forward_launches_refuse_more_heads_than_grid_y(name):
    with pytest.raises(ValueError, match=f"at most {MAX_GRID_Y} batch x heads"):
        gpu.prepare(name, *_qkv(MAX_GRID_Y + 1), backend="emulator")
    gpu.prepare(name, *_qkv(MAX_GRID_Y), backend="emulator")       # the limit itself launches


def test_tensor_core_forward_refuses_more_heads_than_grid_y():
    with pytest.raises(ValueError, match=f"at most {MAX_GRID_Y} batch x heads"):
        gpu.prepare("flash", *_qkv(MAX_GRID_Y + 1), dtype="float16", backend="emulator")
