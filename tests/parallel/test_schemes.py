"""The schemes run in practice (zigzag ring attention, the all-gather of K, V, Ulysses x ring,
Ulysses x zigzag ring and head groups x grid):
their closed forms against the definitions over every small case, their reductions to the ring
and to all-to-all, and the causal balance that is the point of the zigzag layout."""

import itertools

import numpy as np
import pytest

from ioattn.parallel import cost, layout
from ioattn.parallel.bounds import scores
from ioattn.parallel.costs import SCHEMES, pairs

SMALL = [(N, P) for N in range(1, 21) for P in range(1, N + 1)]


def _usp_shapes(P, H):
    return [(P_u, P // P_u) for P_u in range(1, min(P, H) + 1) if P % P_u == 0]


def test_zigzag_layout_holds_chunk_p_and_chunk_2P_minus_1_minus_p():
    assert [r.tolist() for r in layout.rows(8, 2, "zigzag")] == [[0, 1, 6, 7], [2, 3, 4, 5]]
    assert [r.tolist() for r in layout.rows(10, 2, "zigzag")] == [[0, 1, 2, 8, 9],
                                                                   [3, 4, 5, 6, 7]]
    for N, P in SMALL:
        o = layout.offsets(N, 2 * P)
        for p, r in enumerate(layout.rows(N, P, "zigzag")):
            a, b = layout.chunks(p, P)
            assert r.tolist() == list(range(o[a], o[a + 1])) + list(range(o[b], o[b + 1]))
    with pytest.raises(ValueError, match="layout must be one of contiguous, striped, zigzag"):
        layout.sizes(8, 2, "spiral")


@pytest.mark.parametrize("causal", [False, True])
def test_work_of_every_step_is_the_definition(causal):
    # work[p, s]: the pairs between the rows processor p holds and the rows of the block it holds
    for (N, P), H in itertools.product(SMALL, (1, 2)):
        zig = layout.rows(N, P, "zigzag")
        c = cost("zigzag", N, 2, P, heads=H, causal=causal)
        want = [[H * pairs(zig[p], zig[(p - s) % P], causal) for s in range(P)]
                for p in range(P)]
        assert c.work.tolist() == want, (N, P)
        g = cost("all_gather", N, 2, P, heads=H, causal=causal)
        assert g.work.tolist() == [[H * pairs(zig[p], np.arange(N), causal)] for p in range(P)]
        con = layout.rows(N, P)
        for P_u, P_r in _usp_shapes(P, H):
            u = cost("usp", N, 2, P, heads=H, causal=causal, grid=(P_u, P_r))
            h = layout.shares(H, P_u)
            block = [np.concatenate(con[g * P_u:(g + 1) * P_u]) for g in range(P_r)]
            assert u.work.tolist() == [[int(h[p % P_u]) * pairs(block[p // P_u],
                                                                 block[(p // P_u - s) % P_r],
                                                                 causal)
                                        for s in range(P_r)] for p in range(P)], (N, P, P_u)
            assert u.total_work == H * scores(N, causal)
            z = cost("usp_zigzag", N, 2, P, heads=H, causal=causal, grid=(P_u, P_r))
            mine = layout.group_rows(N, (P_u, P_r))
            zblock = [np.concatenate(mine[g * P_u:(g + 1) * P_u]) for g in range(P_r)]
            assert z.work.tolist() == [[int(h[p % P_u]) * pairs(zblock[p // P_u],
                                                                 zblock[(p // P_u - s) % P_r],
                                                                 causal)
                                        for s in range(P_r)] for p in range(P)], (N, P, P_u)


def test_group_rows_share_the_rows_and_reduce_to_the_contiguous_and_zigzag_layouts():
    for N, P in SMALL:
        for P_u in (u for u in range(1, P + 1) if P % u == 0):
            got = layout.group_rows(N, (P_u, P // P_u))
            assert sorted(np.concatenate(got).tolist()) == list(range(N))
            assert [len(x) for x in got] == layout.group_sizes(N, (P_u, P // P_u)).tolist()
            assert max(len(x) for x in got) <= -(-N // P) and min(len(x) for x in got) >= 1
        as_list = [[r.tolist() for r in rs] for rs in (layout.group_rows(N, (P, 1)),
                                                        layout.rows(N, P),
                                                        layout.group_rows(N, (1, P)),
                                                        layout.rows(N, P, "zigzag"))]
        assert as_list[0] == as_list[1] and as_list[2] == as_list[3], (N, P)


def test_zigzag_moves_the_ring_words_on_its_shares():
    n = layout.sizes(10, 4, "zigzag").tolist()            # chunks 2,2,1,1,1,1,1,1: 3,3,2,2
    assert n == [3, 3, 2, 2]
    c = cost("zigzag", 10, 3, 4, heads=2)
    nxt = n[1:] + n[:1]
    assert c.sent.tolist() == [2 * 3 * 2 * (10 - x) for x in nxt]
    assert c.received.tolist() == [2 * 3 * 2 * (10 - x) for x in n]
    assert c.messages.tolist() == [3] * 4
    b = cost("zigzag", 10, 3, 4, heads=2, backward=True)
    assert b.received.tolist() == [4 * 6 * (10 - x) + 2 * 6 * x for x in n]
    assert b.messages.tolist() == [4] * 4
    # where the zigzag shares are the contiguous ones, every word, message and buffer is the ring's
    for N, P in SMALL:
        if layout.sizes(N, P, "zigzag").tolist() == layout.shares(N, P).tolist():
            for backward in (False, True):
                z, r = (cost(name, N, 3, P, backward=backward) for name in ("zigzag", "ring"))
                for f in ("sent", "received", "messages", "memory"):
                    assert np.array_equal(getattr(z, f), getattr(r, f)), (N, P, f)


@pytest.mark.parametrize("P, ring_balance, critical_ratio", [(4, 0.571, 1.75), (8, 0.533, 1.875)])
def test_zigzag_balances_the_causal_ring(P, ring_balance, critical_ratio):
    # N a multiple of 2P: every step of every processor computes exactly as many scores
    N, d = 4096, 64
    ring, zig = (cost(name, N, d, P, causal=True) for name in ("ring", "zigzag"))
    assert (ring.traffic == zig.traffic).all() and (ring.memory == zig.memory).all()
    c = N // (2 * P)
    steps = zig.work
    assert (steps[:, 1:] == 2 * c * c).all()                       # every other block: n^2 / 2
    assert (steps[:, 0] == 2 * c * c + c).all()                    # its own: two triangles, c^2
    assert zig.balance == 1.0
    assert round(ring.balance, 3) == ring_balance
    assert ring.critical_work / zig.critical_work == pytest.approx(critical_ratio, rel=2e-3)
    # the ring's last processor computes 2P - 1 times as many scores as its first
    assert ring.work.sum(axis=1)[-1] / ring.work.sum(axis=1)[0] == pytest.approx(
        2 * P - 1, rel=1e-2)


def test_all_gather_formulas_and_memory():
    N, d, P, H = 37, 5, 4, 3
    n = layout.sizes(N, P, "zigzag").tolist()
    c = cost("all_gather", N, d, P, heads=H, causal=True)
    assert c.sent.tolist() == [2 * d * H * x * (P - 1) for x in n]
    assert c.received.tolist() == [2 * d * H * (N - x) for x in n]
    assert c.messages.tolist() == [P - 1] * P
    assert c.memory.tolist() == [(4 * d + 2) * H * x + 2 * d * H * (N - x) for x in n]
    # it holds the whole K, V where the ring holds two blocks: 2dH n (P - 3) words more from
    # P = 3 on; with equal shares its traffic is the ring's, in one round of messages
    for P in (2, 3, 4, 8, 16, 64):
        N = 64 * P
        g, r = cost("all_gather", N, 64, P), cost("ring", N, 64, P)
        assert g.max_memory - r.max_memory == 2 * 64 * 64 * (P - 1 - min(P - 1, 2)), P
        assert g.max_traffic == r.max_traffic and g.max_memory > 2 * 64 * N


def test_usp_formulas():
    N, d, H = 23, 3, 5
    P_u, P_r = 2, 3
    n = layout.shares(N, 6).tolist()
    h = layout.shares(H, P_u).tolist()
    c = cost("usp", N, d, 6, heads=H, grid=(P_u, P_r))
    assert c.grid == (P_u, P_r)
    for p in range(6):
        r, u = divmod(p, P_u)
        N_r = n[2 * r] + n[2 * r + 1]
        N_next = n[2 * ((r + 1) % 3)] + n[2 * ((r + 1) % 3) + 1]
        assert c.sent[p] == 3 * d * n[p] * (H - h[u]) + d * h[u] * (N_r - n[p]) \
            + 2 * d * h[u] * (N - N_next)
        assert c.received[p] == 3 * d * h[u] * (N_r - n[p]) + d * n[p] * (H - h[u]) \
            + 2 * d * h[u] * (N - N_r)
        assert c.messages[p] == 2 * (P_u - 1) + (P_r - 1)


def test_usp_reduces_to_all_to_all_and_to_the_ring():
    for (N, P), H, causal in itertools.product(SMALL, (1, 3, 20), (False, True)):
        if H >= P:
            a = cost("all_to_all", N, 4, P, heads=H, causal=causal)
            u = cost("usp", N, 4, P, heads=H, causal=causal, grid=(P, 1))
            for f in ("sent", "received", "messages", "memory", "work"):
                assert np.array_equal(getattr(a, f), getattr(u, f)), (N, P, H, f)
        r = cost("ring", N, 4, P, heads=H, causal=causal)
        u = cost("usp", N, 4, P, heads=H, causal=causal, grid=(1, P))
        for f in ("sent", "received", "messages", "work"):
            assert np.array_equal(getattr(r, f), getattr(u, f)), (N, P, H, f)
        # its memory is the ring's and the copy of its block of K, V out of the packed Q, K, V
        # (at P = 1, 1 x 1 is all-to-all's, checked above)
        if P > 1:
            assert np.array_equal(u.memory, r.memory + 2 * 4 * H * layout.shares(N, P)), (N, P)


def test_usp_with_the_zigzag_ring_reduces_to_all_to_all_and_to_zigzag():
    for (N, P), H, causal in itertools.product(SMALL, (1, 3, 20), (False, True)):
        if H >= P:
            a = cost("all_to_all", N, 4, P, heads=H, causal=causal)
            u = cost("usp_zigzag", N, 4, P, heads=H, causal=causal, grid=(P, 1))
            for f in ("sent", "received", "messages", "memory", "work"):
                assert np.array_equal(getattr(a, f), getattr(u, f)), (N, P, H, f)
        z = cost("zigzag", N, 4, P, heads=H, causal=causal)
        u = cost("usp_zigzag", N, 4, P, heads=H, causal=causal, grid=(1, P))
        for f in ("sent", "received", "messages", "work"):
            assert np.array_equal(getattr(z, f), getattr(u, f)), (N, P, H, f)


@pytest.mark.parametrize("P, plain, critical_ratio", [(32, 0.667, 1.5), (64, 0.571, 1.75)])
def test_usp_with_the_zigzag_ring_balances_the_causal_mask(P, plain, critical_ratio):
    # H = 16 heads: 16 x 2 and 16 x 4; the same words, and the zigzag ring keeps every step even
    N, d, H = 4096, 64, 16
    u, z = (cost(name, N, d, P, heads=H, causal=True) for name in ("usp", "usp_zigzag"))
    assert u.grid == z.grid == (16, P // 16)
    assert (u.traffic == z.traffic).all() and (u.memory == z.memory).all()
    assert z.balance == 1.0 and round(u.balance, 3) == plain
    assert u.critical_work / z.critical_work == pytest.approx(critical_ratio, rel=1e-3)


def test_usp_lifts_the_head_limit_of_all_to_all():
    # 16 heads on 64 processors: all-to-all cannot run; USP 16 x 4 moves fewer words than the ring
    # and than the grid
    N, d, H, P = 4096, 64, 16, 64
    u = cost("usp", N, d, P, heads=H)
    assert u.grid == (16, 4)
    with pytest.raises(ValueError, match="heads >= P"):
        cost("all_to_all", N, d, P, heads=H)
    assert u.max_traffic < cost("grid", N, d, P, heads=H).max_traffic \
        < cost("ring", N, d, P, heads=H).max_traffic
    # every shape at N = 4096: more head groups, fewer words (until the heads run out)
    shapes = _usp_shapes(P, H)
    traffic = [cost("usp", N, d, P, heads=H, grid=g).max_traffic for g in shapes]
    assert traffic == sorted(traffic, reverse=True) and shapes[-1] == (16, 4)


def test_schemes_do_not_overflow():
    N, d, H = 10 ** 9, 64, 16
    for name in SCHEMES:
        for P in (1, 2, 3, 4, 16):
            for causal in (False, True):
                c = cost(name, N, d, P, heads=H, causal=causal)
                assert c.total_work == H * scores(N, causal), (name, P, causal)
                assert c.sent.sum() == c.received.sum()
                assert all(isinstance(int(x), int) for x in c.work.ravel())
    c = cost("zigzag", N, d, 4, heads=H, causal=True)
    q = N // 8
    assert c.critical_work == H * ((2 * q * q + q) + 3 * 2 * q * q)


def test_all_gather_backward_closed_form():
    # N = 10, P = 4: zigzag shares 3, 3, 2, 2; d = 3, H = 2 (2dH = 12)
    n, N = [3, 3, 2, 2], 10
    b = cost("all_gather", N, 3, 4, heads=2, backward=True)
    f = cost("all_gather", N, 3, 4, heads=2)
    assert b.sent.tolist() == [12 * x * 3 + 12 * (N - x) for x in n]       # gather + ring RS
    assert b.received.tolist() == [12 * (N - n[p]) + 12 * (N - n[p - 1]) for p in range(4)]
    assert b.messages.tolist() == [6] * 4 and np.array_equal(b.work, f.work)
    # Q, K, V, O, dO, dQ; L, D; K, V of the others; dK, dV of all N rows; the larger of the
    # gathered blocks and the sum arriving
    assert b.memory.tolist() == [20 * 2 * x + 12 * N + 12 * (N - x) for x in n]
    assert b.sent.sum() == b.received.sum()
    one = cost("all_gather", 7, 2, 1, backward=True)
    assert (one.sent.tolist(), one.messages.tolist()) == ([0], [0])
    assert one.memory.tolist() == [14 * 7 + 4 * 7]
    # P = 2 with unequal shares: the sum arriving (block p itself) can exceed N - n_p
    two = cost("all_gather", 37, 1, 2, backward=True)            # chunks 10, 9, 9, 9: 19, 18
    assert two.memory.tolist() == [8 * 19 + 2 * 37 + 2 * 19, 8 * 18 + 2 * 37 + 2 * 19]


def test_usp_backward_closed_form_and_its_limits():
    N, d, H = 30, 4, 6
    for name, ring in (("usp", "ring"), ("usp_zigzag", "zigzag")):
        for P in (2, 3, 4, 6):
            f = cost(name, N, d, P, heads=H, grid=(1, P), causal=True)
            b = cost(name, N, d, P, heads=H, grid=(1, P), causal=True, backward=True)
            r = cost(ring, N, d, P, heads=H, causal=True, backward=True)
            for field in ("sent", "received", "messages", "work"):      # P_u = 1: the ring's
                assert np.array_equal(getattr(b, field), getattr(r, field)), (name, P, field)
            assert np.array_equal(b.work, f.work)
            assert b.sent.sum() == b.received.sum()
    # P_r = 1: two all-to-alls of 4d + 2 and 3d words a row and head, no ring
    b = cost("usp", 12, 2, 2, heads=2, grid=(2, 1), backward=True)
    assert b.sent.tolist() == [10 * 6 + 6 * 6] * 2 and b.messages.tolist() == [2, 2]
    # 2 x 2: all-to-all in, the ring's 4d h_u (N - N_{r+1}) + 2d h_u N_{r+1}, all-to-all back
    b = cost("usp", 16, 2, 4, heads=2, grid=(2, 2), backward=True)
    assert b.sent.tolist() == [10 * 4 + 8 * 8 + 4 * 8 + 6 * 4] * 4
    assert b.messages.tolist() == [2 * 1 + 2] * 4


def test_usp_grid_backward_reduces_to_the_grid_and_to_all_to_all():
    for N, d, P, H in [(37, 5, 4, 4), (48, 4, 6, 6), (50, 3, 8, 8)]:
        for causal in (False, True):
            for P_a in (a for a in range(1, P + 1) if P % a == 0):
                u = cost("usp_grid", N, d, P, heads=H, causal=causal, grid=(1, P_a, P // P_a),
                         backward=True)
                g = cost("grid", N, d, P, heads=H, causal=causal, grid=(P_a, P // P_a),
                         backward=True)
                for field in ("sent", "received", "messages", "work"):
                    assert np.array_equal(getattr(u, field), getattr(g, field)), (P_a, field)
            u = cost("usp_grid", N, d, P, heads=H, causal=causal, grid=(P, 1, 1), backward=True)
            a = cost("all_to_all", N, d, P, heads=H, causal=causal, backward=True)
            for field in ("sent", "received", "messages", "work"):
                assert np.array_equal(getattr(u, field), getattr(a, field)), field
            f = cost("usp_grid", N, d, P, heads=H, causal=causal, backward=True)
            assert np.array_equal(f.work, cost("usp_grid", N, d, P, heads=H,
                                               causal=causal).work)


def test_usp_grid_backward_formulas():
    # equal shares n = 6, h_u = 2 heads, groups of N_r = 12 rows in a 2 x 2 grid (N_a = N^b = 24)
    c = cost("usp_grid", 48, 4, 8, heads=4, grid=(2, 2, 2), backward=True)
    n, h, Nr, d, H = 6, 2, 12, 4, 4
    words = ((4 * d + 2) * n * (H - h) + 3 * d * h * (Nr - n) + (2 * d + 2) * h * Nr
             + 2 * d * h * Nr + d * h * Nr + 2 * d * h * Nr)
    assert c.sent.tolist() == [words] * 8 == c.received.tolist() == [1080] * 8
    assert c.messages.tolist() == [2 + 2 + 2] * 8
    for P in (2, 4, 6, 8):
        for P_u, P_r in _usp_shapes(P, 4):
            b = cost("usp_grid", 48, 4, P, heads=4, grid=(P_u, P_r), backward=True)
            assert b.sent.sum() == b.received.sum() and (b.memory > 0).all()


def test_backward_schemes_do_not_overflow():
    N, d, H = 10 ** 9, 64, 16
    for name in ("zigzag", "all_gather", "usp", "usp_zigzag", "usp_grid"):
        for P in (1, 2, 4, 16):
            c = cost(name, N, d, P, heads=H, causal=True, backward=True)
            assert c.total_work == H * scores(N, True) and c.sent.sum() == c.received.sum()
            assert all(isinstance(int(x), int) for x in c.memory.ravel())


def test_sweep_takes_the_schemes():
    from ioattn.parallel import NAMES, sweep

    s = sweep(4096, 64, [4, 64], heads=16, causal=True, names=NAMES)
    assert list(s) == list(NAMES)
    assert s["all_to_all"][1] is None and s["usp"][1].grid == (16, 4)
    assert s["usp"][1].max_traffic == s["usp_zigzag"][1].max_traffic
    assert list(sweep(64, 4, [2])) == ["ring", "striped", "all_to_all", "grid"]


def _usp_grid_shapes(P, H):
    return [(P_u, P_a, P_r // P_a) for P_u, P_r in _usp_shapes(P, H)
            for P_a in range(1, P_r + 1) if P_r % P_a == 0]


@pytest.mark.parametrize("causal", [False, True])
def test_usp_grid_work_is_the_definition(causal):
    for (N, P), H in itertools.product(SMALL[::3], (1, 2, 3)):
        con = layout.rows(N, P)
        for P_u, P_a, P_b in _usp_grid_shapes(P, H):
            c = cost("usp_grid", N, 2, P, heads=H, causal=causal, grid=(P_u, P_a, P_b))
            h = layout.shares(H, P_u)
            group = [np.concatenate(con[g * P_u:(g + 1) * P_u]) for g in range(P_a * P_b)]
            want = []
            for p in range(P):
                a, b = divmod(p // P_u, P_b)
                qrows = np.concatenate([group[a * P_b + x] for x in range(P_b)])
                krows = np.sort(np.concatenate([group[y * P_b + b] for y in range(P_a)]))
                want.append([int(h[p % P_u]) * pairs(qrows, krows, causal)])
            assert c.work.tolist() == want, (N, P, P_u, P_a)
            assert c.total_work == H * scores(N, causal)
            assert c.sent.sum() == c.received.sum()


def test_usp_grid_reduces_to_the_grid_and_to_all_to_all():
    for N, d, P, H in [(37, 5, 4, 4), (48, 4, 6, 6), (50, 3, 8, 8)]:
        for causal in (False, True):
            for P_a in (a for a in range(1, P + 1) if P % a == 0):
                u = cost("usp_grid", N, d, P, heads=H, causal=causal, grid=(1, P_a, P // P_a))
                g = cost("grid", N, d, P, heads=H, causal=causal, grid=(P_a, P // P_a))
                for field in ("sent", "received", "messages", "work"):
                    assert np.array_equal(getattr(u, field), getattr(g, field)), (P_a, field)
            u = cost("usp_grid", N, d, P, heads=H, causal=causal, grid=(P, 1, 1))
            a = cost("all_to_all", N, d, P, heads=H, causal=causal)
            for field in ("sent", "received", "messages", "work"):
                assert np.array_equal(getattr(u, field), getattr(a, field)), field


def test_usp_grid_formulas_and_shapes():
    # equal shares n = 6, h_u = 2 heads, groups of N_r = 12 rows in a 2 x 2 grid
    c = cost("usp_grid", 48, 4, 8, heads=4, grid=(2, 2, 2))
    n, h, Nr, d, H = 6, 2, 12, 4, 4
    words = 3 * d * n * (H - h) + d * h * (Nr - n) + d * h * Nr + 2 * d * h * Nr + (d + 1) * h * Nr
    assert c.sent.tolist() == [words] * 8 == c.received.tolist() == [600] * 8
    assert c.messages.tolist() == [2 + 2 + 1] * 8
    assert cost("usp_grid", 48, 4, 8, heads=4).grid == (4, 2, 1)        # USP's 4 x 2, then 2 x 1
    assert cost("usp_grid", 48, 4, 8, heads=2, grid=(2, 4)).grid == (2, 2, 2)
    with pytest.raises(ValueError, match="2 x 2 x 3 shape has 12 processors, not P = 8"):
        cost("usp_grid", 48, 4, 8, heads=4, grid=(2, 2, 3))
    with pytest.raises(ValueError, match="heads >= P_u"):
        cost("usp_grid", 48, 4, 8, heads=2, grid=(4, 2, 1))
    with pytest.raises(ValueError, match=r"\(P_u, P_r\) or \(P_u, P_a, P_b\)"):
        cost("usp_grid", 48, 4, 8, heads=2, grid=(2, 2, 1, 2))
    with pytest.raises(TypeError, match=r"\(P_u, P_r\) or \(P_u, P_a, P_b\)"):
        cost("usp_grid", 48, 4, 8, heads=2, grid=4)
