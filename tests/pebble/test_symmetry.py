"""Automorphisms of a pebble game (ioattn.pebble.symmetry) and the exact search that merges mirror
images (rule 9 of ioattn.pebble.search): the permutations are automorphisms, the canonical form
is one per orbit, and merging keeps the optimum (against the search without it and a plain
search over every move)."""

import itertools
import random

import pytest

from ioattn.pebble import Graph, PebbleGame, attention_graph, matmul_graph, min_io
from ioattn.pebble.search import _Search
from ioattn.pebble.symmetry import Symmetry

from .test_search import binary_tree, brute_force, narrow_dag, random_dag


def is_automorphism(graph: Graph, perm) -> bool:
    order, index = graph.order, graph.index
    edges = {(index[p], index[v]) for v in order for p in graph.parents(v)}
    mapped = {(perm[a], perm[b]) for a, b in edges}
    inputs = {index[v] for v in graph.inputs}
    outputs = {index[v] for v in graph.outputs}
    return (sorted(perm) == list(range(len(order))) and mapped == edges
            and {perm[i] for i in inputs} == inputs and {perm[i] for i in outputs} == outputs)


def mirrored(graph: Graph, share_inputs: bool) -> Graph:
    """Two copies of ``graph`` (vertices ``("a", v)`` and ``("b", v)``), sharing its inputs or
    not: swapping the copies is an automorphism."""
    def copy(c, v):
        return v if share_inputs and graph.is_input(v) else (c, v)
    edges = [(copy(c, p), (c, v)) for v in graph.order for p in graph.parents(v) for c in "ab"]
    return Graph(edges, nodes=[copy(c, v) for v in graph.order for c in "ab"])


@pytest.mark.parametrize("g, count", [(attention_graph(2, 2), 16), (attention_graph(2, 1), 4),
                                      (attention_graph(1, 1), 2), (binary_tree(4), 8),
                                      (matmul_graph(2, 2, 2), 16),
                                      (Graph([("a", "b"), ("b", "c")]), 1)])
def test_the_automorphisms_are_found_and_are_automorphisms(g, count):
    s = Symmetry(g)
    assert len(s) == count
    assert s.perms[0] == tuple(range(len(g)))
    assert len(set(s.perms)) == count
    assert all(is_automorphism(g, perm) for perm in s.perms)


def test_limit_and_keep():
    g = binary_tree(8)                          # 2**7 = 128 automorphisms; 16 fix a leaf
    assert len(Symmetry(g, limit=10**6)) == 128
    assert len(Symmetry(g)) == 16               # MAX_SYMMETRIES
    assert len(Symmetry(g, limit=1)) == 1
    leaf = g.index["l0"]
    fixed = Symmetry(g, keep=lambda perm: perm[leaf] == leaf, limit=10**6)
    assert len(fixed) == 16 and all(perm[leaf] == leaf for perm in fixed.perms)


def test_images_and_canonical_forms():
    g = attention_graph(2, 1)
    s = Symmetry(g)
    n, rng = len(g), random.Random(3)
    for _ in range(300):
        red, blue = rng.getrandbits(n), rng.getrandbits(n)
        for k, perm in enumerate(s.perms):
            by_bits = sum(1 << perm[i] for i in range(n) if red >> i & 1)
            assert s.image(k, red) == by_bits
            inverse = s.inverse(k)
            assert sum(1 << inverse[i] for i in range(n) if by_bits >> i & 1) == red
        # one canonical form per orbit: the least image, named by the first automorphism
        images = [(s.image(k, blue), s.image(k, red), k) for k in range(len(s))]
        low_blue, low_red, first = min(images)
        assert s.canonical(red, blue) == (low_red, low_blue, first)
        for k in range(len(s)):
            assert s.canonical(s.image(k, red), s.image(k, blue))[:2] == (low_red, low_blue)


def test_more_than_64_vertices_map_without_tables():
    g = Graph([(i, i + 2) for i in range(68)] + [(68, 70), (69, 70)])    # two chains, joined
    s = Symmetry(g)
    assert s.tables is None and len(s) == 2
    swap = s.perms[1]
    assert s.image(1, 1 << g.index[0]) == 1 << swap[g.index[0]] == 1 << g.index[1]


# ------------------------------------------------------------------------ the merged search
def test_the_search_keeps_the_optimum_on_symmetric_graphs():
    """Mirrored random DAGs (the copies sharing their inputs or not): the same optimum with and
    without merging, equal to a plain search over every move where that one is feasible; the
    merged search's moves replay to a complete game of that I/O."""
    rng, merged = random.Random(11), 0
    for case in range(80):
        g = (random_dag if case % 2 else narrow_dag)(rng, rng.randint(3, 6))
        m = mirrored(g, share_inputs=case % 4 < 2)
        if len(m) > 14:
            continue
        for M in range(m.max_in_degree + 1, m.max_in_degree + 3):
            with_it = min_io(m, M, progress=False, engine="python")
            without = min_io(m, M, progress=False, engine="python", symmetry=False)
            assert with_it.io == without.io, (list(m.order), M)
            assert with_it.symmetries >= 2 and without.symmetries == 1
            game = PebbleGame.replay(m, M, with_it.moves)
            assert game.is_complete() and game.io == with_it.io and game.peak <= M
            if len(m) <= 10:
                assert with_it.io == brute_force(m, M), (list(m.order), M)
            merged += 1
    assert merged >= 60


@pytest.mark.parametrize("g, Ms", [(attention_graph(1, 2), range(3, 15)),
                                   (attention_graph(2, 1), range(5, 12)),
                                   (matmul_graph(2, 2, 2), range(3, 9)),
                                   (binary_tree(8), range(3, 6))],
                         ids=["attention12", "attention21", "matmul222", "tree8"])
def test_merged_search_on_attention_matmul_and_trees(g, Ms):
    for M in Ms:
        with_it = min_io(g, M, progress=False)
        without = min_io(g, M, progress=False, symmetry=False)
        assert with_it.io == without.io
        assert with_it.symmetries > 1


def test_the_heuristic_is_equal_on_mirror_images():
    """The search checks, for every successor, that the heuristic of the state equals that of
    its canonical form (``checking``)."""
    for g, M in [(attention_graph(1, 2), 3), (attention_graph(2, 1), 5), (binary_tree(8), 4),
                 (matmul_graph(2, 2, 1), 3)]:
        search = _Search(g, M)
        assert len(search.symmetry) > 1
        search.checking = True
        assert search.run(10**6, None, False).io == min_io(g, M, symmetry=False).io


def test_automorphisms_that_break_the_heuristics_family_are_not_used():
    """``v1 = f(a, b)`` and ``v2 = f(a, c)`` mirror each other (``b`` and ``c`` swap), and both
    are tight at M = 3, but the tight family takes ``v1`` alone (their operands overlap): an
    automorphism swapping ``b`` and ``c`` would change ``h``, so the search leaves it out."""
    edges = [("i1", "a"), ("i2", "a"), ("i3", "b"), ("i4", "b"), ("i5", "c"), ("i6", "c"),
             ("a", "v1"), ("b", "v1"), ("a", "v2"), ("c", "v2")]
    g = Graph(edges)
    search = _Search(g, 3)
    index = g.index
    assert [v for v, _ in search.tight] == [1 << index["v1"]]
    assert len(Symmetry(g)) == 16
    kept = search.symmetry.perms
    assert len(kept) == 8 and all(perm[index["b"]] == index["b"] for perm in kept)
    search.checking = True
    assert search.run(10**6, None, False).io == brute_force(g, 3) == \
        min_io(g, 3, symmetry=False).io


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_attention_2_2_has_sixteen(engine):
    opt = min_io(attention_graph(2, 2), 12, progress=False, engine=engine)
    assert opt.symmetries == 16 and opt.io == 16


def test_bad_symmetry_flag():
    with pytest.raises(TypeError, match="symmetry must be True or False"):
        min_io(binary_tree(4), 3, symmetry="yes")


def test_every_permutation_of_a_small_graph_is_checked():
    """On a 7-vertex graph, the automorphisms found are exactly the permutations that are
    automorphisms (all 5040 tried)."""
    g = Graph([("a", "c"), ("b", "c"), ("a", "d"), ("b", "d"), ("c", "e"), ("d", "e"),
               ("x", "e")])
    every = {perm for perm in itertools.permutations(range(len(g))) if is_automorphism(g, perm)}
    assert set(Symmetry(g, limit=10**6).perms) == every and len(every) == 4
