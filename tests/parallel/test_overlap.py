"""The overlap model of the ring's transfers and compute (ioattn.parallel.overlap), and the
per-step words it reads (ioattn.parallel.costs.step_words)."""

from fractions import Fraction

import pytest

from ioattn.gpus import GPUS
from ioattn.interconnect import GPU_LINKS, LINKS
from ioattn.parallel import cost
from ioattn.parallel.costs import RINGS, step_words
from ioattn.parallel.layout import group_sizes, shares
from ioattn.parallel.overlap import closed_form, hides, peak, smallest, step_times


@pytest.mark.parametrize("N, d, P, H, grid", [(103, 3, 4, 1, None), (101, 2, 6, 4, None),
                                              (97, 3, 8, 4, (2, 4)), (64, 2, 8, 8, (4, 2)),
                                              (50, 1, 5, 2, None)])
def test_step_words_sum_to_the_words_sent(N, d, P, H, grid):
    for name in RINGS:
        g = grid if name.startswith("usp") else None
        if name.startswith("usp") and g is None and P % 2:
            continue
        w = step_words(name, N, d, P, heads=H, grid=g)
        c = cost(name, N, d, P, heads=H, grid=g)
        assert w.shape == c.work.shape and (w[:, -1] == 0).all()
        if not name.startswith("usp"):
            assert (w.sum(axis=1) == c.sent).all()
            continue
        P_u, P_r = c.grid             # the ring's part of USP's sent: all but the all-to-alls
        h = [int(x) for x in shares(H, P_u)]
        n = [int(x) for x in (shares(N, P) if name == "usp" else group_sizes(N, c.grid))]
        for p in range(P):
            r, u = divmod(p, P_u)
            N_r = sum(n[r * P_u:(r + 1) * P_u])
            a2a = 3 * d * n[p] * (H - h[u]) + d * h[u] * (N_r - n[p])
            assert int(w[p].sum()) + a2a == int(c.sent[p])


def test_step_words_bad_name():
    with pytest.raises(ValueError, match="no ring"):
        step_words("grid", 64, 4, 4)


def test_step_times_are_the_model():
    N, d, P, H = 8 * 1000, 64, 8, 4
    F = GPUS["A100"].peak["bfloat16"]
    B = LINKS["NVLink 3"].bandwidth
    t = step_times("ring", N, d, P, "A100", "NVLink 3", heads=H, alpha=Fraction(1, 10**6))
    assert len(t) == P
    for s, (c, x) in enumerate(t):
        assert c == Fraction(4 * d * H * 1000 * 1000, F)
        assert x == (Fraction(1, 10**6) + Fraction(2 * d * H * 1000 * 2, B) if s < P - 1 else 0)
    causal = step_times("ring", N, d, P, "A100", "NVLink 3", heads=H, causal=True)
    assert causal[0][0] == Fraction(4 * d * H * 1000 * 1001 // 2, F)       # the diagonal
    assert causal[1][0] == t[1][0]                  # the busiest holds a whole block
    assert peak("T4") == ("float16", 65 * 10**12) and peak("H100")[0] == "bfloat16"
    with pytest.raises(ValueError, match="no bfloat16 peak"):
        peak("T4", "bfloat16")
    with pytest.raises(ValueError, match="no ring"):
        step_times("all_gather", N, d, P, "A100", "NVLink 3")
    with pytest.raises(ValueError, match="alpha"):
        step_times("ring", N, d, P, "A100", "NVLink 3", alpha=-1)


@pytest.mark.parametrize("gpu", list(GPUS))
def test_closed_form_is_the_search_for_the_ring(gpu):
    for link in GPU_LINKS[gpu]:
        for d, H in ((64, 1), (128, 8)):
            for alpha in (None, 0):
                n = closed_form(gpu, link, d, heads=H, alpha=alpha)
                for P in (2, 8):
                    o = smallest("ring", gpu, link, d, P, heads=H, alpha=alpha)
                    assert o.n == n and o.N == n * P
                # the integers around it: n hides, n - 1 does not, nor any of the ten below
                for m in range(n - 10, n + 11):
                    assert hides("ring", 4 * m, d, 4, gpu, link, heads=H, alpha=alpha) == (m >= n)


def test_smallest_is_the_first_that_hides():
    # a slow made-up latency and few heads make the answers small enough to scan every n
    for name in RINGS:
        for causal in (False, True):
            P, grid = (4, (2, 2)) if name.startswith("usp") else (4, None)
            kw = dict(heads=2, causal=causal, grid=grid, alpha=Fraction(1, 10**8))
            o = smallest(name, "T4", "PCIe Gen3 x16", 1, P, dtype="float32", **kw)
            got = [hides(name, m * P, 1, P, "T4", "PCIe Gen3 x16", dtype="float32", **kw)
                   for m in range(1, o.n + 40)]
            assert got == [m >= o.n for m in range(1, o.n + 40)], (name, causal)
            assert o.buffers == 2 * 2 * int(step_words(name, o.N, 1, P, heads=2,
                                                       grid=grid).max())


def test_the_figures_the_book_quotes():
    # H100 over NVLink, d = 128, H = 8 heads: the causal mask halves the first step's compute,
    # so it needs about twice the rows; InfiniBand NDR, nine times slower, about 7.5 times more
    ring = smallest("ring", "H100", "NVLink 4", 128, 8, heads=8)
    causal = smallest("zigzag", "H100", "NVLink 4", 128, 8, heads=8, causal=True)
    ib = smallest("ring", "H100", "InfiniBand NDR", 128, 8, heads=8)
    assert ring.n == 2655 and causal.n == 4891 and ib.n == 19912
    assert ring.buffers == 2 * 2 * 128 * 8 * 2655 * 2
    assert smallest("ring", "H200", "NVLink 4", 128, 8, heads=8).n == ring.n   # same peak, link
    # USP's ring is a ring of H / P_u heads on N / P_r = P_u n rows (up to the rounding of N)
    usp = smallest("usp", "H100", "NVLink 4", 128, 8, heads=8, grid=(4, 2))
    assert 0 <= usp.n * 4 - closed_form("H100", "NVLink 4", 128, heads=2) < 4
    assert usp.n < ring.n / 2
    # one processor, or USP with no ring, sends nothing
    assert smallest("ring", "H100", "NVLink 4", 128, 1).n == 1
    assert smallest("usp", "H100", "NVLink 4", 128, 8, heads=8).buffers == 0
