"""Grouped heads: the per-head and stacked schedules, counted equal to their closed forms."""

import numpy as np
import pytest

import ioattn
from ioattn import bounds
from ioattn.inference import grouped_cost, grouped_plan, run_grouped, stack_group, unstack_group
from ioattn.masks import causal_chunk

from .conftest import least_M, reference_attention, relative_error

H_Q = 16
GROUPS = (1, 2, 8, H_Q)                       # g: multi-head, grouped, multi-query


def _heads(H_q, H_kv, N_q, N_k, d, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((H_q, N_q, d)), rng.standard_normal((H_kv, N_k, d)),
            rng.standard_normal((H_kv, N_k, d)))


@pytest.mark.parametrize("g", GROUPS)
@pytest.mark.parametrize("grouping", ["per_head", "stacked"])
def test_counted_equals_closed_form(variant, g, grouping):
    name, options = variant
    H_kv = H_Q // g
    for N_q, N_k, d, M in [(1, 64, 4, 300), (2, 5, 3, 100), (7, 64, 4, 1000)]:
        M = max(M, least_M(name, d, options))
        Q, K, V = _heads(H_Q, H_kv, N_q, N_k, d, seed=g + N_q)
        for mask in (None, causal_chunk(N_q, N_k)):
            r = run_grouped(name, Q, K, V, M, grouping=grouping, mask=mask, **options)
            assert r.io == grouped_cost(name, H_Q, H_kv, N_q, d, M, N_k=N_k, grouping=grouping,
                                        mask=mask, **options)
            assert r.io.peak <= M
            for h in range(H_Q):
                ref = reference_attention(Q[h], K[h // g], V[h // g], mask=mask)
                assert relative_error(r.output[h], ref) <= 1e-12


def test_closed_forms_are_multiples_of_one_run(variant):
    name, options = variant
    M = max(500, least_M(name, 8, options))
    for g in GROUPS:
        H_kv = H_Q // g
        one = ioattn.io_cost(name, 3, 8, M, N_k=200, **options)
        stacked = ioattn.io_cost(name, 3 * g, 8, M, N_k=200, **options)
        a = grouped_cost(name, H_Q, H_kv, 3, 8, M, N_k=200, grouping="per_head", **options)
        b = grouped_cost(name, H_Q, H_kv, 3, 8, M, N_k=200, grouping="stacked", **options)
        assert (a.reads, a.writes) == (H_Q * one.reads, H_Q * one.writes)
        assert (b.reads, b.writes) == (H_kv * stacked.reads, H_kv * stacked.writes)


def test_stacked_flash_decoding_meets_the_grouped_trivial_bound():
    d, M, N_k = 128, 2 ** 16, 8192
    for g in (1, 2, 4, 8, 32):
        H_q, H_kv = 32, 32 // g
        b = grouped_cost("flash", H_q, H_kv, 1, d, M, N_k=N_k, grouping="stacked")
        a = grouped_cost("flash", H_q, H_kv, 1, d, M, N_k=N_k, grouping="per_head")
        assert b.total == 2 * H_q * d + 2 * H_kv * N_k * d
        assert b.total == bounds.grouped_lower(H_q, H_kv, 1, d, M, N_k=N_k, program=True)
        assert a.total == H_q * (2 * d + 2 * N_k * d)
        # the per-head schedule reads the cache g times: about g times the I/O
        assert g * b.total * 0.99 <= a.total <= g * b.total


def test_stacking_is_position_major():
    Qg = np.arange(2 * 3 * 1, dtype=float).reshape(2, 3, 1)       # g = 2 heads, N_q = 3
    rows = stack_group(Qg)
    assert rows[:, 0].tolist() == [0, 3, 1, 4, 2, 5]               # row i g + j: position i
    assert np.array_equal(unstack_group(rows, 2), Qg)
    p = grouped_plan("flash", 4, 2, 3, 1, 100, N_k=5, mask=causal_chunk(3, 5))
    assert p.mask.array.tolist() == np.repeat(causal_chunk(3, 5), 2, axis=0).tolist()


def test_errors():
    Q, K, V = _heads(6, 4, 1, 5, 3)
    with pytest.raises(ValueError, match="H_kv must divide H_q"):
        run_grouped("flash", Q, K, V, 100)
    with pytest.raises(ValueError, match="H_kv must divide H_q"):
        grouped_cost("flash", 6, 4, 1, 3, 100)
    Q, K, V = _heads(4, 2, 1, 5, 3)
    with pytest.raises(ValueError, match="grouping must be one of per_head, stacked"):
        run_grouped("flash", Q, K, V, 100, grouping="fused")
    with pytest.raises(ValueError, match="Q must be 3-D"):
        run_grouped("flash", Q[0], K, V, 100)
    with pytest.raises(ValueError, match="V has shape .* but K has shape"):
        run_grouped("flash", Q, K, V[:, :3], 100)
    with pytest.raises(ValueError, match="same head dimension d"):
        run_grouped("flash", Q[:, :, :2], K, V, 100)
    with pytest.raises(ValueError, match=r"mask must have shape \(N_q, N_k\) = \(1, 5\)"):
        run_grouped("flash", Q, K, V, 100, mask=causal_chunk(2, 5))
    with pytest.raises(ValueError, match="V\\[0\\] has 1 non-finite"):
        V[0, 0, 0] = np.nan
        run_grouped("flash", Q, K, V, 100)
    with pytest.raises(ValueError, match="H_q must be at least 1"):
        grouped_cost("flash", 0, 1, 1, 3, 100)
