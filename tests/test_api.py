"""The public entry points and their errors on bad input."""

import numpy as np
import pytest

import ioattn

from .conftest import random_qkv

Q, K, V = random_qkv(8, 4)


#: The book's three algorithms: both registries hold them, forward and backward (others may
#: join them; see CONTRIBUTING.md).
BOOK = ["flash", "square_tiling", "standard"]


def test_algorithms_lists_the_registry():
    from ioattn.algorithms import BACKWARD, REGISTRY

    assert ioattn.algorithms() == sorted(REGISTRY)
    assert ioattn.algorithms(backward=True) == sorted(BACKWARD)
    for backward in (False, True):
        names = ioattn.algorithms(backward=backward)
        assert set(BOOK) <= set(names), names


def test_variants_are_every_choice_of_every_algorithm():
    from ioattn.algorithms import variants

    assert [v for v in variants() if v[0] in BOOK] == [
        ("flash", {}), ("flash", {"variant": "fa1"}),
        ("square_tiling", {}), ("square_tiling", {"schedule": "outer"}), ("standard", {})]
    assert [v for v in variants(backward=True) if v[0] in BOOK] == [
        ("flash", {}), ("square_tiling", {}), ("square_tiling", {"schedule": "outer"}),
        ("standard", {})]
    assert sorted({name for name, _ in variants()}) == ioattn.algorithms()


def test_run_accepts_float32_and_lists():
    out32 = ioattn.run("flash", Q.astype(np.float32), K, V, 100).output
    assert out32.dtype == np.float64
    out_list = ioattn.run("flash", Q.tolist(), K.tolist(), V.tolist(), 100).output
    np.testing.assert_allclose(out_list, ioattn.run("flash", Q, K, V, 100).output, rtol=1e-15)


def test_io_cost_ignores_scale_and_matches_run():
    assert ioattn.io_cost("standard", 8, 4, 50, scale=2.0) == \
        ioattn.run("standard", Q, K, V, 50, scale=2.0).io


@pytest.mark.parametrize("args, error, message", [
    ((Q, K[:5], V), ValueError, r"V has shape \(8, 4\) but K has shape \(5, 4\): K and V"),
    ((Q, K[:, :3], V[:, :3]), ValueError, r"K has shape \(8, 3\) but Q has shape \(8, 4\)"),
    ((Q, K, V[:, :3]), ValueError, r"V has shape \(8, 3\)"),
    ((Q[0], K, V), ValueError, r"Q must be 2-D .* got 1-D"),
    ((Q[None], K, V), ValueError, r"Q must be 2-D .* got 3-D"),
    ((Q.astype(int), K, V), TypeError, "Q must hold floating-point values, got dtype int"),
    ((Q, K.astype(complex), V), TypeError, "K must hold floating-point values, got dtype complex"),
    ((Q, K, np.where(V > 0, np.nan, V)), ValueError, r"V has \d+ non-finite value"),
    ((Q, np.full_like(K, np.inf), V), ValueError, "K has 32 non-finite value"),
    ((np.empty((0, 4)), K, V), ValueError, "Q is empty"),
    (([[1.0, 2.0], [3.0]], K, V), TypeError, "Q must be a 2-D array"),
])
def test_bad_arrays(args, error, message):
    with pytest.raises(error, match=message):
        ioattn.run("flash", *args, 100)


@pytest.mark.parametrize("M, error, message", [
    (100.0, TypeError, "M must be an integer"),
    ("100", TypeError, "M must be an integer"),
    (None, TypeError, "M must be an integer"),
    (0, ValueError, "M must be at least 1"),
    (10, ValueError, r"'flash' needs a cache of at least M = 20 entries at d = 4"),
])
def test_bad_M(M, error, message):
    with pytest.raises(error, match=message):
        ioattn.run("flash", Q, K, V, M)
    with pytest.raises(error, match=message):
        ioattn.io_cost("flash", 8, 4, M)


def test_numpy_integers_are_integers():
    assert ioattn.io_cost("flash", np.int64(8), np.int32(4), np.int64(100)) == \
        ioattn.io_cost("flash", 8, 4, 100)


def test_unknown_algorithm_lists_the_known_ones():
    for call in (lambda: ioattn.run("flsh", Q, K, V, 100),
                 lambda: ioattn.io_cost("flsh", 8, 4, 100),
                 lambda: ioattn.plan(["flash"], 8, 4, 100)):
        with pytest.raises(ValueError, match="unknown algorithm .*; known algorithms: "
                                             "flash, square_tiling, standard"):
            call()


@pytest.mark.parametrize("N, d, message", [(0, 4, "N must be at least 1"),
                                           (8, -1, "d must be at least 1"),
                                           (8.5, 4, "N must be an integer")])
def test_bad_sizes(N, d, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ioattn.io_cost("square_tiling", N, d, 100)


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf"), "1"])
def test_bad_scale(scale):
    with pytest.raises(ValueError, match="scale must be a finite positive number"):
        ioattn.run("flash", Q, K, V, 100, scale=scale)


def test_result_carries_the_plan_and_optional_trace():
    r = ioattn.run("square_tiling", Q, K, V, 64)
    assert r.plan == ioattn.plan("square_tiling", 8, 4, 64) and r.trace is None
    assert ioattn.run("square_tiling", Q, K, V, 64, trace=True).trace


def test_backward_registry_and_names():
    known = ", ".join(ioattn.algorithms(backward=True))
    with pytest.raises(ValueError, match=f"unknown backward pass 'flsh'; known backward passes: "
                                         f"{known}$"):
        ioattn.io_cost("flsh", 8, 4, 100, backward=True)
    dO = random_qkv(8, 4, seed=9)[0]
    r = ioattn.run_backward("flash", Q, K, V, dO, 100)
    assert len(r.output) == 3 and r.io == ioattn.io_cost("flash", 8, 4, 100, backward=True)
    O, L = ioattn.saved_for_backward(Q, K, V)
    assert ioattn.run_backward("flash", Q, K, V, dO, 100, O=O, L=L).io == r.io


@pytest.mark.parametrize("name, options", [("flash", {}), ("flash", {"variant": "fa1"}),
                                           ("flash", {"block": (3, 5)}),
                                           ("square_tiling", {"schedule": "outer"}),
                                           ("standard", {})])
def test_min_M_is_public_and_exact(name, options):
    """ioattn.min_M is the registry's rule, for the forward and the backward: plan works at it
    and refuses one below it; the mask, save_lse and scale do not change it."""
    for backward in (False, True):
        if backward and "variant" in options:
            continue
        least = ioattn.min_M(name, 7, backward=backward, **options)
        assert least == ioattn.min_M(name, 7, backward=backward, mask=np.ones((3, 3), bool),
                                     scale=0.5, **options)
        ioattn.plan(name, 50, 7, least, backward=backward, **options)
        with pytest.raises(ValueError, match=f"at least M = {least} entries"):
            ioattn.plan(name, 50, 7, least - 1, backward=backward, **options)
    assert ioattn.min_M("flash", 64) == 4 * 64 + 4
    assert ioattn.min_M("flash", 64, backward=True) == 7 * 64 + 4


def test_min_M_errors():
    with pytest.raises(TypeError, match="unknown option.*schedule"):
        ioattn.min_M("flash", 8, schedule="outer")
    with pytest.raises(ValueError, match="unknown algorithm 'flsh'"):
        ioattn.min_M("flsh", 8)
    with pytest.raises(ValueError, match="d must be at least 1"):
        ioattn.min_M("flash", 0)
    with pytest.raises(TypeError, match="save_lse is an option of the forward pass"):
        ioattn.min_M("flash", 8, backward=True, save_lse=True)


def test_save_lse_and_mask_options():
    r = ioattn.run("flash", Q, K, V, 100, save_lse=True)
    assert r.lse.shape == (8,) and r.plan.save_lse and r.plan.mask is None
    assert ioattn.run("flash", Q, K, V, 100).lse is None
    _, L = ioattn.saved_for_backward(Q, K, V)
    np.testing.assert_allclose(r.lse, L, rtol=1e-13)
    with pytest.raises(TypeError, match="save_lse must be True or False, got 'yes'"):
        ioattn.run("flash", Q, K, V, 100, save_lse="yes")
    dO = random_qkv(8, 4, seed=9)[0]
    with pytest.raises(TypeError, match="save_lse is an option of the forward pass"):
        ioattn.run_backward("flash", Q, K, V, dO, 100, save_lse=True)
    with pytest.raises(TypeError, match="save_lse is an option of the forward pass"):
        ioattn.io_cost("flash", 8, 4, 100, backward=True, save_lse=True)
    with pytest.raises(TypeError, match=r"its options are: block, variant \(and mask, save_lse\)"):
        ioattn.io_cost("flash", 8, 4, 100, shedule="outer")
    causal = ioattn.masks.causal(8)
    assert ioattn.plan("flash", 8, 4, 100, mask=causal).mask.N == 8
    with pytest.raises(ValueError, match=r"mask must have shape \(N, N\) = \(8, 8\)"):
        ioattn.run("standard", Q, K, V, 100, mask=ioattn.masks.causal(9))


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("trace", [False, True])
def test_the_garbage_collector_is_off_during_a_run_and_restored(monkeypatch, backward, trace):
    """``run`` and ``run_backward`` simulate with Python's cyclic garbage collector off, and
    leave it as they found it: on if it was on (also when the simulation raises), off if it
    was off."""
    import gc

    from ioattn.algorithms import BACKWARD, REGISTRY

    algo = (BACKWARD if backward else REGISTRY)["flash"]
    seen = []
    simulate = algo.simulate

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return simulate(*args, **kwargs)

    monkeypatch.setattr(algo, "simulate", watched)

    def go():
        if backward:
            return ioattn.run_backward("flash", Q, K, V, Q, 100, trace=trace)
        return ioattn.run("flash", Q, K, V, 100, trace=trace)

    assert gc.isenabled()
    counted = go()
    assert seen == [False] and gc.isenabled()
    assert counted.io == ioattn.io_cost("flash", 8, 4, 100, backward=backward)
    gc.disable()
    try:
        go()
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()

    def fails(*args, **kwargs):
        seen.append(gc.isenabled())
        raise RuntimeError("the schedule failed")

    monkeypatch.setattr(algo, "simulate", fails)
    with pytest.raises(RuntimeError, match="the schedule failed"):
        go()
    assert seen[-1] is False and gc.isenabled()


@pytest.mark.parametrize("bad", ["yes", "no", 1, 0, None, [True]])
def test_booleans_must_be_booleans(bad):
    """A truthy string or number is not ``True``: every boolean flag of the public functions
    raises a TypeError naming it (a NumPy boolean is accepted)."""
    dO = np.ones_like(Q)
    calls = {
        "backward": [lambda: ioattn.algorithms(backward=bad),
                     lambda: ioattn.plan("flash", 8, 4, 100, backward=bad),
                     lambda: ioattn.min_M("flash", 4, backward=bad),
                     lambda: ioattn.io_cost("flash", 8, 4, 100, backward=bad),
                     lambda: ioattn.totals("flash", 8, 4, [100], backward=bad)],
        "save_lse": [lambda: ioattn.io_cost("flash", 8, 4, 100, save_lse=bad),
                     lambda: ioattn.run("flash", Q, K, V, 100, save_lse=bad)],
        "trace": [lambda: ioattn.run("flash", Q, K, V, 100, trace=bad),
                  lambda: ioattn.run_backward("flash", Q, K, V, dO, 100, trace=bad)],
    }
    for flag, fs in calls.items():
        for f in fs:
            with pytest.raises(TypeError, match=f"{flag} must be True or False"):
                f()
    assert ioattn.io_cost("flash", 8, 4, 100, backward=np.bool_(True)) == \
        ioattn.io_cost("flash", 8, 4, 100, backward=True)


def test_totals_at_N_1e6_and_1e9_are_python_ints_equal_to_io_cost():
    """Past 64 bits the costs are Python ints (an object array), equal to io_cost, and the FA2
    count equals its formula in Python ints."""
    from .conftest import BACKWARD_VARIANTS, VARIANTS

    for backward, variants in ((False, VARIANTS), (True, BACKWARD_VARIANTS)):
        for name, opts in variants:
            lo = ioattn.min_M(name, 64, backward=backward, **opts)
            Ms = np.array([lo, lo + 1, 4095, 4096, 65536, 10 ** 7])
            for N in (10 ** 6, 10 ** 9):
                got = ioattn.totals(name, N, 64, Ms, backward=backward, **opts)
                assert got.dtype == object and all(type(x) is int for x in got)
                assert got.tolist() == [ioattn.io_cost(name, N, 64, int(M), backward=backward,
                                                       **opts).total for M in Ms], (name, N)
    N, d = 10 ** 9, 64
    for M in (260, 4096, 10 ** 7):
        B_r = ioattn.plan("flash", N, d, M).B_r
        assert ioattn.totals("flash", N, d, [M])[0] == N * d + 2 * N * d * (-(-N // B_r)) + N * d
