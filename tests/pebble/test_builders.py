"""The matmul and attention graphs have the shape of [SY]'s graphs."""

import pytest

from ioattn.pebble import attention_graph, matmul_graph


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (2, 3, 2), (3, 1, 4)])
def test_matmul_graph_counts(m, k, n):
    g = matmul_graph(m, k, n)
    kinds = {}
    for v in g:
        kinds[v[0]] = kinds.get(v[0], 0) + 1
    assert kinds.get("mul") == m * k * n and kinds.get("sum", 0) == m * n * (k - 1)
    assert kinds["A"] == m * k and kinds["B"] == k * n
    assert len(g.outputs) == m * n and len(g.inputs) == m * k + k * n
    assert g.max_in_degree == 2


def test_matmul_chain_order():
    g = matmul_graph(1, 3, 1)
    assert g.parents(("sum", 0, 0, 1)) == (("mul", 0, 0, 0), ("mul", 0, 1, 0))
    assert g.parents(("sum", 0, 0, 2)) == (("sum", 0, 0, 1), ("mul", 0, 2, 0))
    assert g.outputs == (("sum", 0, 0, 2),)


@pytest.mark.parametrize("N, d", [(1, 1), (2, 1), (2, 3), (3, 2)])
def test_attention_graph_counts(N, d):
    g = attention_graph(N, d)
    kinds = {}
    for v in g:
        kinds[v[0]] = kinds.get(v[0], 0) + 1
    expected = {"Q": N * d, "K": N * d, "V": N * d, "QK": N * N * d, "S": N * N * (d - 1),
                "exp": N * N, "rowsum": N * (N - 1), "AV": N * N * d, "num": N * d * (N - 1),
                "O": N * d}
    assert {k: kinds.get(k, 0) for k in expected} == expected
    assert len(g) == sum(expected.values())
    assert set(g.inputs) == {v for v in g if v[0] in "QKV" and len(v) == 3}
    assert g.outputs == tuple(("O", i, c) for i in range(N) for c in range(d))
    # level 1: the products Q_il K_jl and their sums; each exp feeds a row sum and d products
    assert g.parents(("QK", 0, N - 1, 0)) == (("Q", 0, 0), ("K", N - 1, 0))
    assert len(g.children(("exp", 0, N - 1))) == d + (1 if N > 1 else 1)
    last_sum = ("rowsum", 0, N - 1) if N > 1 else ("exp", 0, 0)
    assert last_sum in g.parents(("O", 0, 0))


def test_bad_sizes():
    with pytest.raises(ValueError, match="N must be at least 1"):
        attention_graph(0, 2)
    with pytest.raises(TypeError, match="k must be an integer"):
        matmul_graph(1, 1.5, 1)
