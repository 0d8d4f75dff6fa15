"""Graphs: structure, orders, masks, and clear errors."""

import pytest

from ioattn.pebble import Graph


def test_defaults_and_structure():
    g = Graph([("a", "c"), ("b", "c"), ("c", "d"), ("a", "d")])
    assert g.inputs == ("a", "b") and g.outputs == ("d",)
    assert g.parents("d") == ("c", "a") and g.children("a") == ("c", "d")
    assert g.max_in_degree == 2 and len(g) == 4 and "c" in g and "z" not in g
    pos = {v: i for i, v in enumerate(g.order)}
    assert all(pos[u] < pos[v] for v in g for u in g.parents(v))
    assert g.nodes == g.order and list(g) == list(g.order)
    assert repr(g) == "Graph(4 vertices, 4 edges, 2 inputs, 1 outputs)"


def test_explicit_inputs_outputs_and_isolated_nodes():
    g = Graph([("a", "b"), ("b", "c")], outputs=["b", "c"])
    assert g.outputs == ("b", "c")
    single = Graph([], nodes=["x"])
    assert single.inputs == ("x",) and single.outputs == ("x",)


def test_masks_round_trip():
    g = Graph([(1, 3), (2, 3), (3, 4)])
    assert g.unmask(g.mask([4, 1])) == [1, 4]
    assert g.parent_masks[g.index[3]] == g.mask([1, 2])


@pytest.mark.parametrize("edges, kwargs, error, message", [
    ([(1, 2), (2, 3), (3, 1), (0, 1)], {}, ValueError, "cycle: 1 -> 2 -> 3 -> 1"),
    ([(1, 1)], {}, ValueError, "self-loop on 1"),
    ([(1, 2)], {"inputs": [5]}, ValueError, "unknown input vertex 5"),
    ([(1, 2)], {"outputs": ["x"]}, ValueError, "unknown output vertex 'x'"),
    ([(1, 2), (2, 3)], {"inputs": [2]}, ValueError, "input 2 has parents"),
    ([(1, 3), (2, 3)], {"inputs": [1]}, ValueError, r"vertices \[2\] have no parents"),
    ([(1, 2, 3)], {}, ValueError, "an edge is a pair"),
    ([([1], 2)], {}, TypeError, "hashable"),
    ([], {}, ValueError, "no vertices"),
])
def test_bad_graphs(edges, kwargs, error, message):
    with pytest.raises(error, match=message):
        Graph(edges, **kwargs)


def test_unknown_vertex_lookups():
    g = Graph([("a", "b")])
    with pytest.raises(KeyError, match="unknown vertex 'z'"):
        g.parents("z")
