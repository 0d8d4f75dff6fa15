"""The exact search: optima worked out by hand, properties every optimum has, a cross-check
against a plain search over every move on random small DAGs, and the errors."""

import random
import re
from collections import deque

import pytest

from ioattn.pebble import (
    Graph,
    IllegalMove,
    Optimum,
    PebbleGame,
    SearchLimitError,
    attention_graph,
    matmul_graph,
    min_io,
)
from ioattn.pebble.search import _Search
from ioattn.pebble.upper import good_game


def solve(graph, M, **options):
    """min_io, checked: the moves replay legally to a complete game of exactly that I/O."""
    opt = min_io(graph, M, progress=False, **options)
    game = PebbleGame.replay(graph, M, opt.moves)
    assert game.is_complete()
    assert game.io == opt.io == opt.reads + opt.writes
    assert (game.reads, game.writes) == (opt.reads, opt.writes)
    assert game.peak <= M
    return opt


def brute_force(graph, M):
    """Q(G, M) by a plain 0-1 breadth-first search over every state (red, blue) and every legal
    move (reads and writes cost 1, computes and deletes 0): no heuristic, no pruning."""
    n = len(graph)
    parents = [graph.mask(graph.parents(v)) for v in graph.order]
    inputs, outputs = graph.mask(graph.inputs), graph.mask(graph.outputs)
    start = (0, inputs)
    dist = {start: 0}
    queue = deque([(0, start)])
    while queue:
        d, (red, blue) = queue.popleft()
        if d > dist[red, blue]:
            continue
        if not outputs & ~blue:
            return d
        room = bin(red).count("1") < M
        for i in range(n):
            bit = 1 << i
            moves = []
            if red & bit:
                moves.append((red & ~bit, blue, 0))                    # delete
                if not blue & bit:
                    moves.append((red, blue | bit, 1))                 # write
            elif room:
                if blue & bit:
                    moves.append((red | bit, blue, 1))                 # read
                if not inputs & bit and not parents[i] & ~red:
                    moves.append((red | bit, blue, 0))                 # compute
            for r, b, cost in moves:
                if d + cost < dist.get((r, b), 1 << 30):
                    dist[r, b] = d + cost
                    if cost:
                        queue.append((d + cost, (r, b)))
                    else:
                        queue.appendleft((d, (r, b)))
    raise AssertionError("no complete game")


def random_dag(rng, n):
    """A random DAG on n vertices (in-degree at most 3), sometimes with extra outputs."""
    p = rng.choice([0.25, 0.4, 0.6])
    edges = []
    for v in range(1, n):
        ops = [u for u in range(v) if rng.random() < p]
        rng.shuffle(ops)
        edges += [(u, v) for u in ops[:3]]
    g = Graph(edges, nodes=range(n))
    if rng.random() < 0.4:                  # outputs with children, inputs that are outputs
        outputs = [v for v in g.order if rng.random() < 0.35] or [g.order[-1]]
        g = Graph(edges, nodes=range(n), outputs=outputs)
    return g


def narrow_dag(rng, n):
    """A random DAG with 1-3 inputs and mostly 1 or 2 operands per vertex: long dependencies
    through computed values, where the heuristic's terms for reads of computed values act."""
    k = rng.randint(1, 3)
    edges = []
    for v in range(k, n):
        ops = rng.sample(range(v), min(v, rng.randint(1, 2 if rng.random() < 0.7 else 3)))
        edges += [(u, v) for u in ops]
    g = Graph(edges, nodes=range(n))
    if rng.random() < 0.4:
        outputs = [v for v in g.order if rng.random() < 0.3] or [g.order[-1]]
        g = Graph(edges, nodes=range(n), outputs=outputs)
    return g


def binary_tree(leaves):
    """A complete binary in-tree: leaves l0, l1, ... (the inputs), internal vertices t0, t1, ..."""
    edges, level, k = [], [f"l{i}" for i in range(leaves)], 0
    while len(level) > 1:
        up = []
        for a, b in zip(level[::2], level[1::2]):
            edges += [(a, f"t{k}"), (b, f"t{k}")]
            up.append(f"t{k}")
            k += 1
        level = up
    return Graph(edges)


# ---------------------------------------------------------------------------- optima by hand
def test_chain():
    # read a, compute b, c, d (each evicting the one before last), write d
    g = Graph([("a", "b"), ("b", "c"), ("c", "d")])
    for M in (2, 3, 4):
        opt = solve(g, M)
        assert (opt.io, opt.reads, opt.writes) == (2, 1, 1)
    assert isinstance(opt, Optimum) and opt.M == 4 and opt.states >= 1 and opt.seconds >= 0


def test_nothing_to_do_when_the_outputs_are_inputs():
    opt = solve(Graph([("a", "b")], outputs=["a"]), 2)
    assert (opt.io, opt.moves) == (0, [])


def test_binary_tree_of_four_leaves():
    # t2 = t0(l0, l1) + t1(l2, l3). With M = 4: read l0, l1, compute t0 (3 pebbles), read l2
    # into the fourth and l3 over l0, compute t1 over l1 and t2 over l2: 4 reads + 1 write.
    # With M = 3 that fails: t1 needs l2, l3 and itself red, 3 pebbles, while t0 must wait
    # for t2 -- a fourth. So t0 is written and read back (or recomputed from 2 leaves read
    # again): 2 more I/O, 7.
    g = binary_tree(4)
    assert solve(g, 3).io == 7
    assert solve(g, 4).io == solve(g, len(g)).io == 5


def test_binary_tree_of_eight_leaves_spills():
    # The root's halves are 4-leaf trees. With M = 5 one half is done with 4 pebbles (as above)
    # and its root held while the other half takes the other 4: 8 reads + 1 write = 9. With
    # M = 4, holding a half's root leaves 3 pebbles for the other half, which (as above) costs
    # 2 more I/O; so does writing the root and reading it back: 11. With M = 3 every internal
    # vertex with internal children has one of them written and read back (3 of them): 15.
    g = binary_tree(8)
    assert [solve(g, M).io for M in (3, 4, 5, 15)] == [15, 11, 9, 9]


def test_matmul_one_by_two_by_one():
    # c = a0 b0 + a1 b1 (7 vertices). M = 4: read all 4 inputs once, write c: 5. M = 3: the sum
    # needs both products red, but the second product needs its 2 operands and itself while
    # the first waits: the first is written and read back, 7.
    g = matmul_graph(1, 2, 1)
    assert solve(g, 3).io == 7
    assert solve(g, 4).io == 5


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (1, 2, 1), (2, 1, 2), (1, 3, 1), (2, 2, 2),
                                     (1, 2, 3)])
def test_matmul_with_ample_cache_reads_and_writes_once(m, k, n):
    g = matmul_graph(m, k, n)
    assert solve(g, len(g)).io == m * k + k * n + m * n


def test_matmul_small_caches():
    assert solve(matmul_graph(1, 3, 1), 3).io == 11   # 6 reads, 2 spills read back, 1 write
    assert solve(matmul_graph(2, 2, 2), 3).io == 25


@pytest.mark.parametrize("N, d, Ms", [(1, 1, [3, 4, 7]), (2, 1, [8, 24])])
def test_attention_graphs(N, d, Ms):
    g = attention_graph(N, d)
    inputs_outputs = len(g.inputs) + len(g.outputs)
    for M in Ms:
        opt = solve(g, M)
        assert opt.io >= inputs_outputs
    assert opt.io == inputs_outputs                   # the largest M: everything fits


# ------------------------------------------------------------------------------- properties
@pytest.mark.parametrize("g", [binary_tree(4), matmul_graph(1, 2, 2), attention_graph(1, 2)],
                         ids=["tree", "matmul", "attention"])
def test_optimum_is_non_increasing_in_M_and_at_least_inputs_plus_outputs(g):
    trivial = len(g.inputs) + len(g.outputs)
    optima = [solve(g, M).io for M in range(g.max_in_degree + 1, len(g) + 1)]
    assert all(a >= b for a, b in zip(optima, optima[1:]))
    assert min(optima) >= trivial
    assert optima[-1] == trivial
    assert solve(g, g.max_in_degree + 1).lower_bound <= optima[0]


#: Graphs on which an earlier, wrong version of a pruning rule lost the optimum.
REGRESSIONS = [
    # placing 3 over 6 right after computing 6 over 3 must stay possible when 6 is written
    (Graph([(1, 2), (0, 2), (2, 3), (1, 3), (0, 3), (2, 6), (1, 6), (0, 6), (3, 4), (2, 4),
            (0, 4), (2, 5), (3, 5), (4, 5), (1, 7), (4, 7), (6, 7)]), 4),
    # (wrong variants of the search, which these graphs tell apart from the right one)
    # a read of a vertex whose operands are red, evicting one of them, must stay possible
    (Graph([(0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 4), (3, 4)], outputs=[3, 4]), 3),
    # the heuristic's term for a tight vertex with a blue operand is 1, not 2
    (Graph([(0, 3), (0, 2), (1, 2), (1, 4), (3, 4), (3, 5), (2, 6), (0, 6), (3, 6), (4, 7),
            (6, 7), (2, 7)], outputs=[5, 7]), 4),
]


@pytest.mark.parametrize("g, M", REGRESSIONS)
def test_regressions(g, M):
    assert solve(g, M).io == brute_force(g, M)


@pytest.mark.parametrize("g", [binary_tree(4), matmul_graph(1, 2, 1), attention_graph(1, 1),
                               Graph([("a", "c"), ("b", "c"), ("a", "d"), ("c", "d"),
                                      ("b", "e"), ("d", "e"), ("c", "e")])],
                         ids=["tree", "matmul", "attention", "braid"])
def test_equals_a_plain_search_on_small_graphs(g):
    for M in range(g.max_in_degree + 1, len(g) + 1):
        assert solve(g, M).io == brute_force(g, M), M


def test_equals_a_plain_search_on_random_small_dags():
    rng = random.Random(20240601)
    checked = 0
    while checked < 40:
        g = random_dag(rng, rng.randint(3, 9))
        low = g.max_in_degree + 1
        for M in range(low, low + 3):
            assert solve(g, M).io == brute_force(g, M), (list(g.order), M)
        checked += 1


@pytest.mark.parametrize("g, M", [(matmul_graph(2, 2, 1), 3), (matmul_graph(1, 3, 1), 3),
                                  (attention_graph(1, 2), 3), (attention_graph(1, 2), 4),
                                  (binary_tree(8), 3), (binary_tree(8), 4),
                                  (REGRESSIONS[0][0], 4)])
def test_heuristic_shortcut_agrees_with_a_full_count(g, M):
    """The search finds most successors' heuristic from their parent's; here it checks each."""
    search = _Search(g, M)
    search.checking = True
    assert search.run(10**6, None, False).io == solve(g, M).io


def test_equals_a_plain_search_where_operands_need_reads():
    """Random DAGs at cache sizes where the heuristic counts reads of computed operands (its
    "deep" term: some vertex's operands cannot all be red at once without such a read)."""
    rng = random.Random(7)
    checked = 0
    while checked < 15:
        g = narrow_dag(rng, rng.randint(5, 10))
        for M in (g.max_in_degree + 1, g.max_in_degree + 2):
            search = _Search(g, M)
            if search.deep:
                search.checking = True
                assert search.run(10**6, None, False).io == brute_force(g, M), (list(g.order), M)
                checked += 1


# ------------------------------------------------------------------------------- incumbent
def wasteful(graph, moves, extra):
    """``moves`` with ``extra`` more I/O: an input read and deleted at the start, again and
    again."""
    x = graph.inputs[0]
    return [("read", x), ("delete", x)] * extra + list(moves)


def test_incumbent_keeps_the_optimum_on_random_small_dags():
    """With a good game known (I/O U), the search skips the states of f >= U: the same optimum
    as without it and as a plain search, the incumbent's own moves when it is optimal, and
    never more states expanded or reached."""
    rng = random.Random(5)
    proved = found = 0
    for k in range(60):
        g = (random_dag if k % 2 else narrow_dag)(rng, rng.randint(3, 9))
        low = g.max_in_degree + 1
        for M in range(low, min(low + 2, len(g)) + 1):
            plain = solve(g, M)
            assert plain.io == brute_force(g, M)
            for extra in (0, 1, 3):
                incumbent = wasteful(g, good_game(g, M, iterations=20), extra)
                U = PebbleGame.replay(g, M, incumbent).io
                opt = solve(g, M, incumbent=incumbent)
                assert opt.io == plain.io
                assert opt.states <= plain.states and opt.generated <= plain.generated
                if U == plain.io:
                    assert opt.moves == incumbent
                    proved += 1
                else:
                    found += 1
    assert proved > 50 and found > 50


def test_incumbent_proved_optimal_saves_the_last_layer():
    g = attention_graph(2, 1)
    plain = solve(g, 3)
    opt = solve(g, 3, incumbent=good_game(g, 3))
    assert opt.io == plain.io == 24
    assert opt.states < plain.states and 2 * opt.generated < plain.generated


def test_incumbent_must_be_a_complete_legal_game():
    g = matmul_graph(1, 2, 1)
    game = good_game(g, 3)
    with pytest.raises(ValueError, match="not a complete game"):
        min_io(g, 3, incumbent=game[:-1])
    with pytest.raises(IllegalMove, match="red pebble"):
        min_io(g, 3, incumbent=[("write", g.outputs[0])] + game)
    with pytest.raises(IllegalMove, match="all M = 3 red pebbles"):
        min_io(g, 3, incumbent=[("read", v) for v in g.inputs] + game)
    for bad in ("read a", 7, [("read",)], [3], [None]):
        with pytest.raises((TypeError, ValueError), match="incumbent must be"):
            min_io(g, 3, incumbent=bad)


# ----------------------------------------------------------------------------------- errors
def test_too_few_pebbles_names_the_minimum():
    g = matmul_graph(1, 2, 1)
    with pytest.raises(ValueError, match="smallest M that can compute every vertex is 3"):
        min_io(g, 2, progress=False)


def test_too_many_vertices_refused_up_front_unless_allowed():
    g = matmul_graph(2, 2, 2)                     # 20 vertices
    with pytest.raises(ValueError, match=r"20 vertices, more than max_vertices = 19"):
        min_io(g, 8, max_vertices=19, progress=False)
    big = matmul_graph(3, 3, 3)                   # 63 vertices: within the default limit of 64
    with pytest.raises(ValueError, match="more than max_vertices"):
        min_io(attention_graph(2, 3), 4, progress=False)  # 68 vertices
    assert solve(big, len(big)).io == 27


def test_state_budget_exhausted():
    with pytest.raises(SearchLimitError, match="too large for exact search") as info:
        min_io(matmul_graph(2, 2, 2), 4, max_states=50, progress=False)
    assert info.value.states == 50
    assert re.search(r"50 states explored", str(info.value))
    assert 12 <= info.value.bound <= 17           # a proven lower bound: Q = 17


def test_time_limit(ticking_clock):
    # the clock moves only when read (about every 1024 states): the search stops at the same
    # state on every machine, far from the 26,919 states it expands to the end
    with pytest.raises(SearchLimitError, match="time_limit") as info:
        min_io(attention_graph(2, 1), 4, time_limit=0.05, progress=False, engine="python")
    assert info.value.seconds > 0.05 and 0 < info.value.states < 26_919


def test_bad_arguments():
    g = matmul_graph(1, 1, 1)
    with pytest.raises(TypeError):
        min_io([("a", "b")], 3)
    with pytest.raises(ValueError):
        min_io(g, 3, time_limit=0)
    with pytest.raises(TypeError):
        min_io(g, 3, progress="yes")


def test_progress_false_prints_nothing_and_true_shows_a_bar(capsys):
    min_io(matmul_graph(1, 2, 1), 3, progress=False)
    out, err = capsys.readouterr()
    assert out == err == ""
    min_io(matmul_graph(1, 2, 1), 3, progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "min_io" in err


@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_M_above_the_vertex_count_is_the_game_at_the_vertex_count(engine):
    """Q(G, M) = Q(G, n) for M >= n (the proof is in min_io's Notes); the search runs at n, so
    M = 2 * 10**6 costs no more memory than M = n (it asked for 12 GiB before)."""
    g = matmul_graph(1, 2, 1)
    n = len(g)
    at_n = solve(g, n, engine=engine)
    for M in (n + 1, 2 * n, 2 * 10**6):
        opt = solve(g, M, engine=engine)
        assert opt.M == M and opt.io == at_n.io and opt.lower_bound == at_n.lower_bound
        assert opt.memory == at_n.memory and opt.states == at_n.states
        assert PebbleGame.replay(g, n, opt.moves).io == at_n.io    # legal with n pebbles
    assert at_n.M == n and solve(g, n - 1, engine=engine).M == n - 1


def test_threads_beyond_the_cores_are_cut_to_the_cores(monkeypatch):
    import ioattn._validate

    monkeypatch.setattr(ioattn._validate, "cores", lambda: 2)
    g = attention_graph(2, 1)
    with pytest.warns(RuntimeWarning, match="threads = 1000 is more than the 2 core"):
        opt = min_io(g, 4, progress=False, threads=1000)
    assert opt.io == min_io(g, 4, progress=False).io
    with pytest.warns(RuntimeWarning, match="running on 2"):
        from ioattn.pebble import compiled
        if compiled.available():
            compiled.run(_Search(g, 4), 10**6, None, False, threads=3)
        else:  # pragma: no cover - without Numba
            ioattn._validate.as_threads(3)


@pytest.mark.parametrize("time_limit, error, match", [
    ("5", TypeError, "time_limit .*must be a number, got '5' \\(str\\)"),
    (True, TypeError, "time_limit .*must be a number, got True"),
    (float("nan"), ValueError, "time_limit .*must be a finite number"),
    (-1, ValueError, "time_limit .*must be positive"),
])
def test_time_limit_must_be_a_positive_number(time_limit, error, match):
    with pytest.raises(error, match=match):
        min_io(matmul_graph(1, 1, 1), 3, time_limit=time_limit)
