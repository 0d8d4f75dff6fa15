"""Bounds for rectangular attention and grouped heads: never above an exact count."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
from ioattn import bounds
from ioattn.inference import grouped_cost

from .conftest import VARIANT_IDS, VARIANTS, least_M

N_QS = (1, 2, 3, 7, 16, 64, 100, 257)
N_KS = (1, 2, 5, 17, 64, 300, 1000, 4096)
DS = (1, 2, 8, 32, 128)
MS = (8, 20, 64, 300, 1024, 4096, 2 ** 14, 2 ** 16, 2 ** 18)


def _bounds(N_q, N_k, d, M):
    """Every rectangular lower bound at one point, each by name."""
    return {
        "trivial": bounds.trivial_lower(N_q, d, N_k=N_k),
        "partition": bounds.partition_lower(N_q, d, M, N_k=N_k),
        "reduction": bounds.reduction_lower(N_q, d, M, N_k=N_k),
        "game": bounds.lower_bound(N_q, d, M, N_k=N_k),
        "program": bounds.lower_bound(N_q, d, M, N_k=N_k, program=True),
    }


@pytest.mark.parametrize("name, options", VARIANTS, ids=VARIANT_IDS)
def test_every_bound_below_every_count(name, options):
    checked = beyond_trivial = 0
    for N_q, N_k, d, M in itertools.product(N_QS, N_KS, DS, MS):
        if M < least_M(name, d, options):
            continue
        io = ioattn.io_cost(name, N_q, d, M, N_k=N_k, **options).total
        found = _bounds(N_q, N_k, d, M)
        for which, value in found.items():
            assert value <= io, (which, name, options, N_q, N_k, d, M, value, io)
        checked += 1
        beyond_trivial += found["program"] > found["trivial"]
    assert checked >= 1500                      # over the five variants, more than 10,000
    assert beyond_trivial >= 10                 # the partition and reduction terms bite


@pytest.mark.parametrize("name, options", VARIANTS, ids=VARIANT_IDS)
def test_grouped_bound_below_both_schedules(name, options):
    checked = 0
    for (H_q, H_kv), N_q, N_k, d, M in itertools.product(
            [(8, 8), (8, 4), (8, 1), (32, 4), (32, 1)], (1, 2, 7, 64), (1, 64, 1000),
            (1, 8, 128), (64, 1024, 2 ** 16)):
        if M < least_M(name, d, options):
            continue
        for grouping in ("per_head", "stacked"):
            io = grouped_cost(name, H_q, H_kv, N_q, d, M, N_k=N_k, grouping=grouping,
                              **options).total
            for program in (False, True):
                assert bounds.grouped_lower(H_q, H_kv, N_q, d, M, N_k=N_k,
                                            program=program) <= io
            checked += 1
    assert checked >= 500


def test_rectangular_bounds_reduce_to_the_square_ones():
    for N, d, M in itertools.product((1, 7, 300), (1, 16, 64), (64, 4096, 2 ** 16)):
        assert bounds.trivial_lower(N, d, N_k=N) == bounds.trivial_lower(N, d) == 4 * N * d
        assert bounds.partition_lower(N, d, M, N_k=N) == bounds.partition_lower(N, d, M)
        assert bounds.reduction_lower(N, d, M, N_k=N) == bounds.reduction_lower(N, d, M)
        assert bounds.lower_bound(N, d, M, N_k=N) == bounds.lower_bound(N, d, M)
        assert bounds.grouped_lower(1, 1, N, d, M, N_k=N) == bounds.lower_bound(N, d, M)


def test_rectangular_bounds_by_hand():
    # a decoding step: the query row and the output row, the cache read once
    assert bounds.trivial_lower(1, 128, N_k=8192) == 2 * 128 + 2 * 8192 * 128
    # N_q N_k = 2^18 trees, d = 64, M = d^2: ceil(2^18 / (5 M)) = ceil(64 / 5) = 13 parts
    assert bounds.partition_lower(64, 64, 4096, N_k=4096) == 4096 * (13 - 1)
    # grouped heads: a shared K, V counts once
    assert bounds.grouped_lower(32, 4, 1, 128, 2 ** 16, N_k=8192) == \
        2 * 32 * 128 + 2 * 4 * 8192 * 128


def test_rectangular_bound_errors():
    with pytest.raises(ValueError, match="forward pass only"):
        bounds.trivial_lower(3, 4, N_k=5, backward=True)
    with pytest.raises(ValueError, match="forward pass only"):
        bounds.partition_lower(3, 4, 100, N_k=5, backward=True)
    with pytest.raises(ValueError, match="matmul='standard' only"):
        bounds.lower_bound(3, 4, 100, "any", N_k=5)
    with pytest.raises(ValueError, match="N_k must be at least 1"):
        bounds.reduction_lower(3, 4, 100, N_k=0)
    with pytest.raises(ValueError, match="H_kv must divide H_q"):
        bounds.grouped_lower(6, 4, 1, 4, 100)


@given(N_q=st.integers(1, 5000), N_k=st.integers(1, 50000), d=st.integers(1, 300),
       M=st.integers(3, 10 ** 6), which=st.integers(0, len(VARIANTS) - 1))
def test_bounds_hold_on_drawn_sizes(N_q, N_k, d, M, which):
    name, options = VARIANTS[which]
    M = max(M, least_M(name, d, options))
    io = ioattn.io_cost(name, N_q, d, M, N_k=N_k, **options).total
    assert max(_bounds(N_q, N_k, d, M).values()) <= io


def test_grouped_trivial_lower_is_the_trivial_term_of_grouped_lower():
    for H_q, H_kv, N, N_k, d in itertools.product((1, 4, 32), (1, 2, 4), (1, 3), (1, 7, 8192),
                                                 (1, 64, 128)):
        if H_q % H_kv:
            with pytest.raises(ValueError, match="divide"):
                bounds.grouped_trivial_lower(H_q, H_kv, N, d, N_k=N_k)
            continue
        t = bounds.grouped_trivial_lower(H_q, H_kv, N, d, N_k=N_k)
        assert t == 2 * H_q * N * d + 2 * H_kv * N_k * d
        assert t <= bounds.grouped_lower(H_q, H_kv, N, d, 10 ** 6, N_k=N_k)
        assert bounds.grouped_lower(H_q, H_kv, N, d, 10 ** 12, N_k=N_k) == t   # a huge cache
    with pytest.raises(TypeError, match="H_q"):
        bounds.grouped_trivial_lower(True, 1, 1, 8)


def test_decoding_lower_treats_a_batch_as_more_heads():
    for batch, g, N_q, N_k, M in itertools.product((1, 2, 5), (1, 4), (1, 7), (64, 4096),
                                                   (64, 4096, 2 ** 16)):
        low = bounds.decoding_lower(8 * g, 8, N_q, N_k, 128, M, batch=batch)
        assert low == bounds.grouped_lower(batch * 8 * g, batch * 8, N_q, 128, M, N_k=N_k)
        assert low >= batch * bounds.grouped_trivial_lower(8 * g, 8, N_q, 128, N_k=N_k)
        if M >= 4 * 128 + 4:
            stacked = grouped_cost("flash", 8 * g, 8, N_q, 128, M, N_k=N_k)
            assert low <= batch * stacked.total
    assert (bounds.decoding_lower(32, 8, 1, 8192, 128, 2 ** 16, program=True)
            <= bounds.decoding_lower(32, 8, 1, 8192, 128, 2 ** 16))
    with pytest.raises(ValueError, match="batch"):
        bounds.decoding_lower(32, 8, 1, 8192, 128, 2 ** 16, batch=0)
