"""M-partitions: dominator and minimum sets against brute force, the partition checker's every
reason, and Hong and Kung's construction on complete games."""

import itertools
import random

import pytest

from ioattn.pebble import (
    Graph,
    PebbleGame,
    attention_graph,
    check_partition,
    dominator_set,
    dominator_size,
    hong_kung_partition,
    is_partition_of,
    matmul_graph,
    minimum_set,
)


# ---------------------------------------------------------------------- independent references
def reaches(graph, removed, S):
    """Whether some input reaches a vertex of S when the vertices ``removed`` are taken out."""
    seen = {v for v in graph.inputs if v not in removed}
    stack = list(seen)
    while stack:
        for c in graph.children(stack.pop()):
            if c not in removed and c not in seen:
                seen.add(c)
                stack.append(c)
    return bool(seen & set(S))


def paths_to(graph, S):
    """Every path from an input to a vertex of S, as a tuple of vertices."""
    S = set(S)
    out = []

    def walk(path):
        if path[-1] in S:
            out.append(tuple(path))
        for c in graph.children(path[-1]):
            walk(path + [c])

    for v in graph.inputs:
        walk([v])
    return out


def brute_dominator_size(graph, S):
    """The least k such that some k vertices hit every input -> S path (tries every subset)."""
    paths = paths_to(graph, S)
    for k in range(len(graph) + 1):
        for D in itertools.combinations(graph.order, k):
            if all(set(p) & set(D) for p in paths):
                return k
    raise AssertionError("unreachable: all vertices always dominate")


def assert_dominates(graph, D, S):
    assert D <= set(graph.order)
    assert not reaches(graph, D, S), f"{D} leaves a path to {S}"
    for p in paths_to(graph, S):
        assert set(p) & D, f"path {p} avoids {D}"


DIAMOND = Graph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
TWO_INPUT_DIAMOND = Graph([("x", "b"), ("y", "b"), ("x", "c"), ("y", "c"), ("b", "d"),
                           ("c", "d")])
TREE = Graph([("l0", "n01"), ("l1", "n01"), ("l2", "n23"), ("l3", "n23"), ("n01", "r"),
              ("n23", "r")])
CHAINS = Graph([("a0", "a1"), ("a1", "a2"), ("b0", "b1"), ("b1", "b2")])
MM121 = matmul_graph(1, 2, 1)            # c = a0 b0 + a1 b1
MUL0, MUL1, SUM = ("mul", 0, 0, 0), ("mul", 0, 1, 0), ("sum", 0, 0, 1)

# (graph, S, the least dominator size, the only least dominator set or None if several)
KNOWN = [
    (DIAMOND, {"d"}, 1, None),                          # {a} or {d}
    (DIAMOND, {"b", "c"}, 1, {"a"}),
    (DIAMOND, {"b", "d"}, 1, {"a"}),
    (DIAMOND, {"a"}, 1, {"a"}),                          # an input in S dominates itself
    (TWO_INPUT_DIAMOND, {"d"}, 1, {"d"}),
    (TWO_INPUT_DIAMOND, {"b", "c"}, 2, None),            # {x, y} or {b, c}
    (TWO_INPUT_DIAMOND, {"b", "c", "d"}, 2, None),
    (TREE, {"r"}, 1, {"r"}),
    (TREE, {"n01", "n23"}, 2, {"n01", "n23"}),
    (TREE, {"l0", "n23"}, 2, {"l0", "n23"}),
    (TREE, {"l0", "l1", "l2", "l3"}, 4, {"l0", "l1", "l2", "l3"}),
    (TREE, {"n01", "r"}, 2, None),                       # {n01, n23} or {n01, r}
    (CHAINS, {"a2", "b2"}, 2, None),
    (CHAINS, {"a2"}, 1, None),
    (CHAINS, {"a1", "a2", "b0"}, 2, None),
    (CHAINS, set(), 0, set()),
    (MM121, set(MM121.outputs), 1, {SUM}),
    (MM121, {MUL0, MUL1}, 2, {MUL0, MUL1}),
    (MM121, {MUL0, MUL1, SUM}, 2, {MUL0, MUL1}),
    (MM121, {MUL0, ("A", 0, 1)}, 2, None),
]


@pytest.mark.parametrize("graph, S, size, unique", KNOWN)
def test_dominator_set_known(graph, S, size, unique):
    D = dominator_set(graph, S)
    assert isinstance(D, set)
    assert len(D) == size == dominator_size(graph, S) == brute_dominator_size(graph, S)
    assert_dominates(graph, D, S)
    if unique is not None:
        assert D == unique
    assert {v for v in S if graph.is_input(v)} <= D


def random_dag(rng, n):
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.35]
    return Graph(edges, nodes=range(n))


def test_dominator_set_matches_brute_force_on_random_dags():
    rng = random.Random(1981)
    for _ in range(60):
        graph = random_dag(rng, rng.randint(2, 9))
        S = set(rng.sample(graph.order, rng.randint(1, len(graph))))
        D = dominator_set(graph, S)
        assert len(D) == brute_dominator_size(graph, S), (graph, S, D)
        assert_dominates(graph, D, S)


def test_dominator_set_of_real_graphs_dominates():
    graph = attention_graph(2, 1)
    non_inputs = [v for v in graph.order if not graph.is_input(v)]
    for S in [set(graph.outputs), set(non_inputs), {("exp", 0, 1), ("V", 1, 0)}]:
        D = dominator_set(graph, S)
        assert not reaches(graph, D, S)
        # Minimal: no proper subset dominates (removing any one vertex opens a path).
        assert all(reaches(graph, D - {v}, S) for v in D)
    # The rows share no vertex but inputs, and no input lies on every path to an output of a row:
    # no single vertex dominates both outputs, which dominate themselves.
    assert dominator_size(graph, set(graph.outputs)) == 2


def test_unknown_vertices_are_a_clear_error():
    with pytest.raises(ValueError, match=r"does not have: 'z'"):
        dominator_set(DIAMOND, {"a", "z"})
    with pytest.raises(ValueError, match="does not have"):
        minimum_set(DIAMOND, {"zz"})
    with pytest.raises(TypeError, match="Graph"):
        dominator_set([("a", "b")], {"a"})


def test_minimum_set():
    assert minimum_set(DIAMOND, {"a", "b", "c", "d"}) == {"d"}
    assert minimum_set(DIAMOND, {"a", "b", "c"}) == {"b", "c"}
    assert minimum_set(DIAMOND, {"a", "d"}) == {"a", "d"}      # no edge a -> d
    assert minimum_set(TREE, {"n01", "n23", "l0"}) == {"n01", "n23"}
    assert minimum_set(CHAINS, {"a0", "a1", "b1"}) == {"a1", "b1"}
    assert minimum_set(MM121, set(MM121.order)) == {SUM}
    assert minimum_set(DIAMOND, set()) == set()
    # Against the definition on a real graph.
    graph = attention_graph(2, 1)
    S = set(graph.order[::2])
    assert minimum_set(graph, S) == {v for v in S if not set(graph.children(v)) & S}


# ---------------------------------------------------------------------- check_partition
def test_valid_partitions_pass():
    for parts, M in [([{MUL0}, {MUL1}, {SUM}], 1), ([{MUL0, MUL1, SUM}], 2),
                     ([{MUL0, MUL1}, {SUM}], 2)]:
        check = check_partition(MM121, parts, M)
        assert check.ok and check and check.reasons == [], check.reasons
        assert len(check.dominator_sizes) == len(check.minimum_sizes) == len(parts)
    check = check_partition(MM121, [{MUL0}, {MUL1}, {SUM}], 1)
    assert check.dominator_sizes == [1, 1, 1] and check.minimum_sizes == [1, 1, 1]
    check = check_partition(MM121, [{MUL0, MUL1, SUM}], 2)
    assert check.dominator_sizes == [2] and check.minimum_sizes == [1]
    assert is_partition_of(MM121, [{MUL0}, {MUL1, SUM}])


def only_reason(check, *words):
    """The check failed for exactly one reason, which mentions every word."""
    assert not check and not check.ok
    assert len(check.reasons) == 1, check.reasons
    for w in words:
        assert w in check.reasons[0], (w, check.reasons[0])
    return check.reasons[0]


def test_overlap_is_reported():
    check = check_partition(MM121, [{MUL0, MUL1}, {MUL1, SUM}], 3)
    only_reason(check, repr(MUL1), "more than one part", "parts 0, 1")
    assert not is_partition_of(MM121, [{MUL0, MUL1}, {MUL1, SUM}])


def test_missing_vertex_is_reported():
    only_reason(check_partition(MM121, [{MUL0}, {SUM}], 3), repr(MUL1), "in no part")
    assert not is_partition_of(MM121, [{MUL0}, {SUM}])


def test_input_in_a_part_is_reported():
    check = check_partition(MM121, [{MUL0}, {("A", 0, 0), MUL1}, {SUM}], 3)
    only_reason(check, "part 1", "input", repr(("A", 0, 0)))
    assert not is_partition_of(MM121, [{MUL0}, {("A", 0, 0), MUL1}, {SUM}])


def test_unknown_vertex_and_empty_part_are_reported():
    only_reason(check_partition(MM121, [{MUL0, MUL1, SUM, "ghost"}], 3), "part 0", "'ghost'")
    only_reason(check_partition(MM121, [{MUL0, MUL1, SUM}, set()], 3), "part 1 is empty")


def test_dominator_too_large_is_reported():
    check = check_partition(MM121, [{MUL0, MUL1, SUM}], 1)
    only_reason(check, "part 0", "dominator", "2 vertices", "M = 1")
    assert check.dominator_sizes == [2] and check.minimum_sizes == [1]


def test_minimum_set_too_large_is_reported():
    graph = Graph([("a", "b"), ("a", "c")])
    check = check_partition(graph, [{"b", "c"}], 1)
    only_reason(check, "part 0", "minimum set", "2 vertices", "M = 1")
    assert check.dominator_sizes == [1] and check.minimum_sizes == [2]
    assert check_partition(graph, [{"b"}, {"c"}], 1)


def test_cyclic_parts_are_reported():
    graph = Graph([("a", "b"), ("b", "c"), ("c", "d")])
    check = check_partition(graph, [{"b", "d"}, {"c"}], 2)
    reason = only_reason(check, "cycle", "part 0", "part 1", "'b' -> 'c'", "'c' -> 'd'")
    assert reason.count("->") == 4                        # part 0 -> part 1 -> part 0, 2 edges
    assert check_partition(graph, [{"b"}, {"c", "d"}], 2)
    assert is_partition_of(graph, [{"b", "d"}, {"c"}])    # a partition, but not an M-partition


def test_every_violation_is_reported_at_once():
    check = check_partition(MM121, [{MUL0, ("B", 0, 0)}, {MUL0}, set()], 1)
    text = "\n".join(check.reasons)
    assert len(check.reasons) == 5, check.reasons
    for words in ["input", "more than one part", "in no part", "part 2 is empty",
                  "part 0: its smallest dominator set has 2 vertices"]:
        assert words in text


# ---------------------------------------------------------------------- Hong-Kung on games
def greedy_game(graph, M):
    """A complete game that computes the outputs one after another, depth first, without ever
    recomputing: a red vertex evicted while still needed is written first and read back later.
    """
    game = PebbleGame(graph, M)
    computed = set()

    def needed(v):
        return (v in graph.outputs and v not in game.blue) or \
            any(c not in computed for c in graph.children(v))

    def room(pinned):
        while len(game.red) >= M:
            victims = [v for v in graph.order if v in game.red and v not in pinned]
            assert victims, "M too small for this schedule"
            idle = [v for v in victims if not needed(v)]
            victim = (idle or victims)[0]
            if victim not in game.blue and needed(victim):
                game.write(victim)
            game.delete(victim)

    def make_red(v, pinned):
        if v in game.red:
            return
        if v in game.blue:
            room(pinned)
            game.read(v)
            return
        parents = graph.parents(v)
        for p in parents:                  # depth first; may evict (and spill) earlier parents
            make_red(p, set())
        for p in parents:                  # so bring them back; each is an input or written now
            make_red(p, set(parents))
        room(set(parents))
        game.compute(v)
        computed.add(v)

    for out in graph.outputs:
        make_red(out, set())
        if out not in game.blue:
            game.write(out)
    assert game.is_complete()
    return game


def red_sets(game):
    """``red[t]``: the red vertices before move t (and after the last move, ``red[len]``)."""
    replay = PebbleGame(game.graph, game.M)
    red = [set()]
    for kind, v in game.moves:
        replay.play(kind, v)
        red.append(set(replay.red))
    return red


def assert_hong_kung(game):
    """The construction's parts form a 2M-partition whose per-part witnesses are as the proof
    says, and the segments are cut as documented."""
    graph, M = game.graph, game.M
    hk = hong_kung_partition(game)
    io_moves = [t for t, (kind, _) in enumerate(game.moves) if kind in ("read", "write")]
    assert hk.io == game.io == len(io_moves) and hk.M == M

    # Segments tile the moves; each but the last holds exactly M I/O moves, the last 1..M.
    assert hk.segments[0][0] == 0 and hk.segments[-1][1] == len(game.moves)
    assert all(a[1] == b[0] for a, b in zip(hk.segments, hk.segments[1:]))
    per_segment = [sum(a <= t < b for t in io_moves) for a, b in hk.segments]
    assert all(n == M for n in per_segment[:-1]) and 1 <= per_segment[-1] <= M
    s = len(hk.segments)
    assert M * (s - 1) < hk.io <= M * s
    assert M * (hk.h - 1) <= hk.io

    # Parts: the non-input vertices, each in the segment of its last compute.
    non_inputs = {v for v in graph.order if not graph.is_input(v)}
    assert set().union(*hk.parts) == non_inputs and not hk.uncomputed
    assert sum(map(len, hk.parts)) == len(non_inputs)
    last = {v: t for t, (kind, v) in enumerate(game.moves) if kind == "compute"}
    for part, k in zip(hk.parts, hk.part_segments):
        a, b = hk.segments[k]
        assert part and all(a <= last[v] < b for v in part)

    check = check_partition(graph, hk.parts, 2 * M)
    assert check.ok, check.reasons

    # The proof's witnesses: red at the start plus reads dominate; the minimum set is red at the
    # end or written (true without recomputation).
    red = red_sets(game)
    for part, k in zip(hk.parts, hk.part_segments):
        a, b = hk.segments[k]
        reads = {v for kind, v in game.moves[a:b] if kind == "read"}
        writes = {v for kind, v in game.moves[a:b] if kind == "write"}
        assert not reaches(graph, red[a] | reads, part)
        assert minimum_set(graph, part) <= red[b] | writes
    return hk


def computes_once(game):
    computes = [v for kind, v in game.moves if kind == "compute"]
    return len(computes) == len(set(computes))


@pytest.mark.parametrize("graph, M", [(matmul_graph(2, 2, 2), M) for M in (3, 4, 5, 8, 40)]
                         + [(attention_graph(2, 1), M) for M in (4, 5, 7, 12, 60)]
                         + [(matmul_graph(1, 3, 2), 3), (attention_graph(3, 2), 6)])
def test_hong_kung_partition_of_greedy_games(graph, M):
    game = greedy_game(graph, M)
    assert computes_once(game)
    hk = assert_hong_kung(game)
    assert M * (hk.h - 1) <= hk.io
    # io <= M h too, unless a segment computes nothing (here: a last segment that only writes).
    assert (hk.io <= M * hk.h) == (hk.h == len(hk.segments)), (hk.io, hk.h, hk.segments)
    if hk.h < len(hk.segments):
        empty = set(range(len(hk.segments))) - set(hk.part_segments)
        assert all(kind != "compute" for s in empty
                   for kind, _ in game.moves[slice(*hk.segments[s])])


def test_hong_kung_partition_by_hand():
    # c = a0 b0 + a1 b1 with M = 3: the first product is spilled and read back.
    A0, A1, B0, B1 = ("A", 0, 0), ("A", 0, 1), ("B", 0, 0), ("B", 1, 0)
    moves = [("read", A0), ("read", B0), ("compute", MUL0), ("delete", A0), ("delete", B0),
             ("write", MUL0), ("delete", MUL0),                                   # io 1-3
             ("read", A1), ("read", B1), ("compute", MUL1), ("delete", A1), ("delete", B1),
             ("read", MUL0), ("compute", SUM),                                    # io 4-6
             ("write", SUM)]                                                      # io 7
    game = PebbleGame.replay(MM121, 3, moves)
    hk = assert_hong_kung(game)
    assert hk.parts == [{MUL0}, {MUL1, SUM}]
    assert hk.segments == [(0, 7), (7, 14), (14, 15)] and hk.part_segments == [0, 1]
    # The last segment only writes, so it gives no part: h = 2 < 3 segments, and io = 7 exceeds
    # M h = 6 while io >= M (h - 1) = 3 still holds.
    assert hk.io == 7 and hk.h == 2 and hk.io > hk.M * hk.h


def test_hong_kung_partition_of_one_segment():
    graph = Graph([("a", "c"), ("b", "c"), ("c", "d")])
    game = PebbleGame.replay(graph, 3, [("read", "a"), ("read", "b"), ("compute", "c"),
                                        ("delete", "a"), ("compute", "d"), ("write", "d")])
    hk = assert_hong_kung(game)
    assert hk.parts == [{"c", "d"}] and hk.segments == [(0, 6)] and hk.h == 1


def test_recomputation_can_make_the_parts_cyclic():
    # x -> u -> v -> w and u -> w. u is computed, used for v, written, then recomputed in the
    # next segment: by its last compute u joins w's part while v, its child, is in the first.
    graph = Graph([("x", "u"), ("u", "v"), ("v", "w"), ("u", "w")])
    moves = [("read", "x"), ("compute", "u"), ("compute", "v"), ("write", "u"), ("write", "v"),
             ("delete", "u"), ("delete", "v"),                                  # io 1-3
             ("read", "v"), ("compute", "u"), ("delete", "x"), ("compute", "w"),
             ("write", "w")]                                                    # io 4-5
    game = PebbleGame.replay(graph, 3, moves)
    hk = hong_kung_partition(game)
    assert hk.parts == [{"v"}, {"u", "w"}] and hk.segments == [(0, 7), (7, 12)]
    check = check_partition(graph, hk.parts, 2 * game.M)
    only_reason(check, "cycle", "part 0 -> part 1 -> part 0", "'u' -> 'v'", "'v' -> 'w'")
    assert max(check.dominator_sizes) <= 2 * game.M       # the dominator bound survives


def test_recomputation_can_make_a_minimum_set_too_large():
    # x -> a_i -> o_i for 7 i, M = 3: every o_i is computed and written, then every a_i is
    # recomputed at the end for nothing; by their last computes the a_i all join the last part,
    # where their children are not: a minimum set of 7 > 2M = 6.
    n = 7
    graph = Graph([("x", f"a{i}") for i in range(n)] + [(f"a{i}", f"o{i}") for i in range(n)])
    moves = [("read", "x")]
    for i in range(n):
        moves += [("compute", f"a{i}"), ("compute", f"o{i}"), ("write", f"o{i}"),
                  ("delete", f"o{i}"), ("delete", f"a{i}")]
    for i in range(n):
        moves += [("compute", f"a{i}"), ("delete", f"a{i}")]
    game = PebbleGame.replay(graph, 3, moves)
    hk = hong_kung_partition(game)
    assert hk.io == 8 and len(hk.segments) == 3
    assert hk.parts[-1] == {f"a{i}" for i in range(n)} | {"o6"}
    check = check_partition(graph, hk.parts, 2 * game.M)
    reason = only_reason(check, f"part {hk.h - 1}", "minimum set", "7 vertices", "M = 6")
    assert "cycle" not in reason
    assert check.minimum_sizes[-1] == 7


def test_hong_kung_partition_needs_a_complete_game():
    game = PebbleGame.replay(MM121, 3, [("read", ("A", 0, 0))])
    with pytest.raises(ValueError, match="not complete"):
        hong_kung_partition(game)
    with pytest.raises(TypeError, match="PebbleGame"):
        hong_kung_partition(MM121)


def test_uncomputed_vertices_are_named():
    # An explicit output list can leave a vertex no output needs; a game may skip it.
    graph = Graph([("a", "b"), ("a", "c")], outputs=["b"])
    game = PebbleGame.replay(graph, 2, [("read", "a"), ("compute", "b"), ("write", "b")])
    hk = hong_kung_partition(game)
    assert hk.parts == [{"b"}] and hk.uncomputed == {"c"}
    only_reason(check_partition(graph, hk.parts, 4), "'c'", "in no part")
