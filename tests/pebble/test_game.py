"""The game: every rule enforced, with the rule named; I/O counted; move lists replay."""

import pytest

from ioattn.pebble import Graph, IllegalMove, PebbleGame, matmul_graph
from ioattn.pebble.game import without_idle_computes

G = Graph([("a", "c"), ("b", "c"), ("c", "d")])


def test_a_complete_game():
    game = PebbleGame.replay(G, 3, [("read", "a"), ("read", "b"), ("compute", "c"),
                                    ("delete", "a"), ("compute", "d"), ("write", "d")])
    assert (game.reads, game.writes, game.io, game.peak) == (2, 1, 3, 3)
    assert game.is_complete() and game.red == {"b", "c", "d"} and "d" in game.blue
    again = PebbleGame.replay(G, 3, game.moves)
    assert again.io == game.io and again.moves == game.moves


def test_not_complete_until_outputs_are_blue():
    game = PebbleGame.replay(G, 3, [("read", "a"), ("read", "b"), ("compute", "c"),
                                    ("delete", "b"), ("compute", "d")])
    assert not game.is_complete()


@pytest.mark.parametrize("moves, rule", [
    ([("read", "c")], "a read needs a blue pebble"),
    ([("write", "a")], "a write needs a red pebble"),
    ([("read", "a"), ("compute", "c")], "a compute needs a red pebble on every parent"),
    ([("delete", "a")], "a delete needs a red pebble"),
    ([("compute", "a")], "inputs are read, never computed"),
    ([("read", "a"), ("read", "b"), ("compute", "c"), ("compute", "d")], "at most M red pebbles"),
    ([("read", "a"), ("read", "a")], "one pebble of a colour per vertex"),
    ([("read", "zz")], "unknown vertex"),
    ([("compute", ["c"])], "unknown vertex"),
])
def test_each_rule(moves, rule):
    game = PebbleGame(G, 3)
    *legal, last = moves
    for move in legal:
        game.play(*move)
    before = (set(game.red), set(game.blue), game.io, len(game.moves))
    with pytest.raises(IllegalMove) as err:
        game.play(*last)
    assert err.value.rule.startswith(rule) and isinstance(err.value, ValueError)
    assert err.value.move[1] == last[1] and repr(last[1]) in str(err.value)
    assert (game.red, game.blue, game.io, len(game.moves)) == before     # nothing changed


def test_missing_parents_are_named():
    game = PebbleGame(matmul_graph(1, 1, 1), 3)
    game.read(("A", 0, 0))
    with pytest.raises(IllegalMove, match=r"no red pebble on \[\('B', 0, 0\)\]"):
        game.compute(("mul", 0, 0, 0))


def test_unknown_move_and_bad_arguments():
    with pytest.raises(ValueError, match="unknown move 'jump'"):
        PebbleGame(G, 2).play("jump", "a")
    with pytest.raises(ValueError, match="M must be at least 1"):
        PebbleGame(G, 0)
    with pytest.raises(TypeError, match="ioattn.pebble.Graph"):
        PebbleGame([("a", "b")], 2)


def test_writes_count_and_blue_stays():
    game = PebbleGame.replay(G, 3, [("read", "a"), ("read", "b"), ("compute", "c"),
                                    ("write", "c"), ("delete", "c"), ("read", "c")])
    assert (game.reads, game.writes) == (3, 1)


def test_idle_computes_are_dropped_in_cascade():
    g = Graph([("a", "b"), ("b", "c"), ("a", "d")], outputs=["d"])
    moves = [("read", "a"), ("compute", "b"), ("compute", "c"), ("delete", "c"),
             ("delete", "b"), ("compute", "d"), ("write", "d"), ("compute", "b")]
    kept = without_idle_computes(g, moves)
    assert kept == [("read", "a"), ("compute", "d"), ("write", "d")]
    before, after = PebbleGame.replay(g, 3, moves), PebbleGame.replay(g, 3, kept)
    assert after.is_complete() and (after.reads, after.writes) == (before.reads, before.writes)
    assert after.peak <= before.peak
