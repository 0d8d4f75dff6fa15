"""The exact optimum against the algorithms and the proven lower bounds, on tiny graphs.

Q(G, M) can never exceed what an algorithm's schedule achieves with M red pebbles, and never fall
below a bound that holds for every complete game (the trivial bound, and the M-partition bound of
Hong-Kung with the constants of ``ioattn.bounds``).
"""

import pytest

import ioattn
from ioattn import bounds
from ioattn.pebble import PebbleGame, attention_graph, matmul_graph, min_io
from ioattn.pebble.schedules import play_schedule


def best_schedule(name, sizes, pebbles, budgets, **options):
    """The least I/O of the algorithm's schedule over memory budgets whose game fits."""
    games = []
    for M in budgets:
        try:
            game = play_schedule(name, *sizes, M=M, **options)
        except ValueError:          # below the algorithm's smallest M
            continue
        if game.peak <= pebbles:
            games.append(game)
    return min((g.io for g in games), default=None)


@pytest.mark.parametrize("pebbles", [4, 8, 12])
def test_attention_2x1(pebbles):
    N, d = 2, 1
    g = attention_graph(N, d)
    opt = min_io(g, pebbles, progress=False)
    game = PebbleGame.replay(g, pebbles, opt.moves)
    assert game.is_complete() and game.io == opt.io and game.peak <= pebbles
    assert opt.io >= bounds.trivial_lower(N, d)
    assert opt.io >= bounds.partition_lower(N, d, pebbles)
    compared = 0
    for name, options in [("flash", {}), ("square_tiling", {}),
                          ("square_tiling", {"schedule": "outer"})]:
        best = best_schedule(name, (N, d), pebbles, range(3, 40), **options)
        if best is not None:
            assert opt.io <= best, name
            compared += 1
    assert pebbles < 8 or compared >= 2


@pytest.mark.parametrize("m, k, n, pebbles", [(2, 2, 2, 3), (2, 2, 2, 5), (1, 3, 2, 5),
                                              (2, 1, 2, 6)])
def test_matmul(m, k, n, pebbles):
    g = matmul_graph(m, k, n)
    opt = min_io(g, pebbles, progress=False)
    assert PebbleGame.replay(g, pebbles, opt.moves).io == opt.io
    assert opt.io >= m * k + k * n + m * n
    best = best_schedule("matmul", (m, k, n), pebbles, range(3, 30))
    if pebbles >= 3 + 2:           # the smallest schedule: M = 3 entries, 2 pebbles in flight
        assert best is not None and opt.io <= best
    else:
        assert best is None


def test_ample_cache_reads_inputs_once():
    g = attention_graph(2, 1)
    assert min_io(g, len(g), progress=False).io == bounds.trivial_lower(2, 1)


def test_the_algorithms_counts_are_real_games():
    """The I/O a schedule's game achieves is the memory model's count (not a lower figure)."""
    game = play_schedule("flash", 2, 1, M=8)
    assert game.io == ioattn.io_cost("flash", 2, 1, 8).total
