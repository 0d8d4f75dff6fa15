"""Low-precision merges of partial attention outputs (ioattn.parallel.precision)."""

import math

import numpy as np
import pytest

from ioattn.parallel.precision import (FORMATS, ORDERS, UNIT_ROUNDOFF, bfloat16_bits, bound, depth,
                                       error, merge, order, partials, round_to)


def test_bfloat16_known_values():
    # 8 significant bits: near 1 the spacing is 2^-7; ties go to the even neighbour
    x = [1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, math.pi, -math.pi, 0.1, 65504.0,
         2.0**-100, 0.0, -0.0, 3.0, 255.0, 257.0, 259.0]
    want = [1.0, 1.0, 1 + 2**-6, 1 + 2**-7, 3.140625, -3.140625, 0.10009765625, 65536.0,
            2.0**-100, 0.0, -0.0, 3.0, 255.0, 256.0, 260.0]
    assert round_to(x, "bfloat16").tolist() == want


def test_bfloat16_rounding_agrees_with_the_bit_trick():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(20000), rng.standard_normal(2000) * 1e6,
                        rng.uniform(-20, 20, 2000)]).astype(np.float32)
    # exact ties of float32 values: a 1 in bit 15 and nothing below
    ties = (np.arange(1, 2001, dtype=np.uint32) << 16 | 0x3F800000 | 0x8000).view(np.float32)
    x = np.concatenate([x, ties, -ties])
    got = round_to(x.astype(np.float64), "bfloat16")
    assert np.array_equal(got, bfloat16_bits(x).astype(np.float64))
    assert (np.abs(got - x) <= UNIT_ROUNDOFF["bfloat16"] * np.abs(x)).all()
    assert np.array_equal(round_to(x, "float32"), x.astype(np.float64))
    assert not np.array_equal(round_to(x, "bfloat16"), x)


def test_float32_and_float64():
    x = np.array([1 + 2**-30, 1 / 3])
    assert round_to(x, "float64").tolist() == x.tolist()
    assert round_to(x, "float32").tolist() == [1.0, float(np.float32(1 / 3))]
    with pytest.raises(ValueError, match="unknown format"):
        round_to(x, "float16")


def test_orders_are_the_algorithms():
    assert order("ring", 4, 1) == ("sequential", [1, 0, 3, 2])
    assert order("zigzag", 3, 0) == ("sequential", [0, 2, 1])
    assert order("all_gather", 4, 2) == ("sequential", [0, 1, 2, 3])
    assert order("grid", 4) == ("flat", [0, 1, 2, 3])
    assert order("tree", 5)[0] == "tree"
    assert [depth("tree", P) for P in (1, 2, 3, 4, 5, 8, 9, 64)] == [0, 1, 2, 2, 3, 3, 4, 6]
    assert depth("sequential", 64) == depth("flat", 64) == 63
    with pytest.raises(ValueError, match="unknown algorithm"):
        order("cannon", 4)
    with pytest.raises(ValueError, match="processor"):
        order("ring", 4, 4)


def test_merge_in_float64_is_attention():
    O_parts, L_parts, O, L = partials(8, rows=5, block=7, d=4, seed=3)
    for how in ORDERS:
        O_hat, L_hat = merge(O_parts, L_parts, how, "float64", sequence=[3, 1, 0, 2, 7, 5, 6, 4])
        assert np.abs(O_hat - O).max() < 1e-13 and np.abs(L_hat - L).max() < 1e-13
    # the parts are attention to each block: one part is attention to the whole
    O1, L1, O_all, L_all = partials(1, rows=5, block=7, d=4)
    assert np.allclose(O1[0], O_all) and np.allclose(L1[0], L_all)


def test_merge_rounds_every_result():
    O_parts, L_parts, _, _ = partials(4, rows=6, block=8, d=8)
    for how in ORDERS:
        O_hat, L_hat = merge(O_parts, L_parts, how, "bfloat16")
        assert np.array_equal(round_to(O_hat, "bfloat16"), O_hat)
        assert np.array_equal(round_to(L_hat, "bfloat16"), L_hat)
        assert not np.array_equal(merge(O_parts, L_parts, how, "float32")[0], O_hat)


def test_bad_input():
    O_parts, L_parts, _, _ = partials(3, rows=2, block=2, d=2)
    with pytest.raises(ValueError, match="unknown merge order"):
        merge(O_parts, L_parts, "ring")
    with pytest.raises(ValueError, match="sequence"):
        merge(O_parts, L_parts, sequence=[0, 0, 1])
    with pytest.raises(ValueError, match="P x rows"):
        merge(O_parts, L_parts[:2])
    with pytest.raises(TypeError, match="P must be an integer"):
        partials(2.0)


@pytest.mark.parametrize("how", ORDERS)
@pytest.mark.parametrize("precision, outputs", [("bfloat16", None), ("float32", None),
                                                ("float32", "bfloat16")])
def test_the_bound_holds(how, precision, outputs):
    for P in (2, 3, 4, 7, 8, 16, 33, 64):
        for seed in (0, 1):
            e = error(P, how, precision, outputs=outputs, rows=16, block=32, d=16, seed=seed)
            assert 0 < e["O"] <= e["bound"]["O"], (P, seed, e)
            assert e["L"] <= e["bound"]["L"] and e["p"] <= e["bound"]["p"], (P, seed, e)


def test_bfloat16_sequential_error_grows_with_P():
    L = [error(P, "sequential", "bfloat16")["L"] for P in (2, 8, 64)]
    O = [error(P, "sequential", "bfloat16")["O"] for P in (2, 64)]
    assert L[0] < L[1] < L[2] and L[2] > 10 * L[0]
    assert O[1] > 3 * O[0]
    # the tree's grows far more slowly; float32 stays near its unit roundoff
    assert error(64, "tree", "bfloat16")["L"] < L[2] / 5
    assert error(64, "sequential", "float32")["L"] < 1e-4 < L[0]


def test_bound_shape():
    u = UNIT_ROUNDOFF["bfloat16"]
    b = bound("sequential", 64, 9.0, "bfloat16")
    assert b["L"] == u * (9 + 63 * 11)
    assert b["O"] == pytest.approx(u * (1 + 9 + 9 + 63 * 11 + math.log(64) + 3 * 63))
    assert bound("tree", 64, 9.0)["L"] == u * (9 + 6 * 11)
    assert bound("flat", 64, 9.0)["O"] == pytest.approx(b["L"] + u * (1 + 9 + math.log(64) + 65))
    # partials arriving in bfloat16, merged in float32: the outputs' rounding is one bf16 unit
    mixed = bound("sequential", 64, 9.0, "float32", outputs="bfloat16")
    assert u < mixed["O"] < 2 * u
    assert set(FORMATS) == set(UNIT_ROUNDOFF)
