"""Good games (ioattn.pebble.upper): legal and complete on every graph and M tried, never below the
optimum, exact where nothing need be evicted, deterministic, and improved by the local search;
their errors."""

import random

import pytest

from ioattn.pebble import Graph, PebbleGame, attention_graph, matmul_graph
from ioattn.pebble.upper import good_game, greedy_game

from .test_search import binary_tree, brute_force, narrow_dag, random_dag


def played(graph, M, moves):
    """The game of ``moves``, checked legal, complete and within ``M`` red pebbles."""
    game = PebbleGame.replay(graph, M, moves)
    assert game.is_complete() and game.peak <= M
    return game


def test_legal_complete_and_never_below_the_optimum_on_random_small_dags():
    rng = random.Random(11)
    for k in range(80):
        g = (random_dag if k % 2 else narrow_dag)(rng, rng.randint(3, 9))
        low = g.max_in_degree + 1
        for M in range(low, min(low + 3, len(g)) + 1):
            assert played(g, M, good_game(g, M, iterations=50)).io >= brute_force(g, M)


def test_reads_each_needed_input_and_writes_each_output_once_when_nothing_is_evicted():
    rng = random.Random(3)
    for _ in range(40):
        g = random_dag(rng, rng.randint(3, 14))
        needed, stack = set(), list(g.outputs)
        while stack:
            v = stack.pop()
            if v not in needed:
                needed.add(v)
                stack += g.parents(v)
        computed = [v for v in g.outputs if not g.is_input(v)]
        inputs = [v for v in needed if g.is_input(v) and any(
            c in needed and not g.is_input(c) for c in g.children(v))]
        game = played(g, len(g), good_game(g, len(g), iterations=0))
        assert (game.reads, game.writes) == (len(inputs), len(computed))


def test_attention_graph_2_2_at_M_5_a_game_of_24():
    """The game ``min_io(..., incumbent=...)`` proves optimal (benchmarks/pebble.py)."""
    g = attention_graph(2, 2)
    assert played(g, 5, good_game(g, 5)).io == 24


@pytest.mark.parametrize("g, M", [(attention_graph(2, 2), 3), (matmul_graph(3, 2, 2), 3),
                                  (binary_tree(16), 4)])
def test_local_search_never_worsens_the_first_order(g, M):
    first = played(g, M, good_game(g, M, iterations=0)).io
    best = played(g, M, good_game(g, M, iterations=300)).io
    assert best <= first


def test_local_search_improves_on_depth_first():
    g = attention_graph(2, 2)
    assert played(g, 5, good_game(g, 5)).io < played(g, 5, good_game(g, 5, iterations=0)).io


def test_deterministic_for_a_seed():
    g = matmul_graph(2, 2, 2)
    assert good_game(g, 3, seed=4) == good_game(g, 3, seed=4)


def test_greedy_game_follows_the_order_given():
    g = matmul_graph(1, 2, 1)           # c = a0 b0 + a1 b1
    order = [v for v in g.order if not g.is_input(v)]
    for M, io in ((3, 7), (4, 5)):     # the optima (the first product spilled at M = 3)
        moves = greedy_game(g, M, order)
        assert [v for kind, v in moves if kind == "compute"] == order
        assert played(g, M, moves).io == io


def test_errors():
    g = matmul_graph(1, 2, 1)
    with pytest.raises(ValueError, match="at least 3"):
        good_game(g, 2)
    with pytest.raises(TypeError, match="Graph"):
        good_game([("a", "b")], 3)
    with pytest.raises(ValueError, match="iterations"):
        good_game(g, 3, iterations=-1)
    with pytest.raises(TypeError, match="M must be an integer"):
        good_game(g, 3.5)


def test_a_graph_with_one_vertex_to_compute():
    g = Graph([("a", "b")])
    assert good_game(g, 2) == [("read", "a"), ("compute", "b"), ("write", "b")]
