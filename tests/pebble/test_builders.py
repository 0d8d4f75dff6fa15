"""The matmul and attention graphs have the shape of [SY]'s graphs."""

import pytest

from ioattn.pebble import attention_backward_graph, attention_graph, matmul_graph
from ioattn.pebble.builders import SOFTMAX


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


# ------------------------------------------------------------- the graphs of the other schedules
def _kinds(g):
    kinds = {}
    for v in g:
        kinds[v[0]] = kinds.get(v[0], 0) + 1
    return kinds


def _entry(g, v):
    """An input, or a one-parent vertex of one (such as tau K_jl)."""
    return g.is_input(v) or (len(g.parents(v)) == 1 and g.is_input(g.parents(v)[0]))


def _sum_of_products(g, total, product=None):
    """The products of the chain sum ending at ``total``, first term first; an AssertionError
    unless it is the standard tree: two-parent products of entries, added in a chain. With
    ``product`` (a kind), the terms are the vertices of that kind, whatever their operands."""
    def is_term(v):
        if product is not None:
            return v[0] == product
        return all(_entry(g, p) for p in g.parents(v))

    terms = []
    v = total
    while not is_term(v):
        previous, term = g.parents(v)                   # ((... + x_{t-1}) + x_t)
        terms.append(term)
        v = previous
    terms.append(v)
    for t in terms:
        assert len(g.parents(t)) == 2 and is_term(t), t
    return terms[::-1]


def _base(g, v):
    """The input under an entry."""
    return v if g.is_input(v) else g.parents(v)[0]


@pytest.mark.parametrize("N, d", [(1, 1), (2, 3), (3, 2)])
@pytest.mark.parametrize("scale", [False, True])
def test_scores_are_sums_of_products(N, d, scale):
    """Every S_ij (and every dP_ij) is d products of entries Q_il K_jl (dO_ic V_jc), one per
    l, added in a chain: the property the reduction and partition bounds rely on."""
    graphs = [attention_graph(N, d, softmax=s, scale=scale) for s in SOFTMAX]
    backward = attention_backward_graph(N, d, scale=scale)
    for g in graphs + [backward]:
        for i in range(N):
            for j in range(N):
                S_ij = ("S", i, j, d - 1) if d > 1 else ("QK", i, j, 0)
                operands = [tuple(_base(g, q) for q in g.parents(p))
                            for p in _sum_of_products(g, S_ij)]
                assert operands == [(("Q", i, l), ("K", j, l)) for l in range(d)]
    for i in range(N):
        for j in range(N):
            dP_ij = ("dP", i, j, d - 1) if d > 1 else ("dOV", i, j, 0)
            operands = [backward.parents(p) for p in _sum_of_products(backward, dP_ij)]
            assert operands == [(("dO", i, c), ("V", j, c)) for c in range(d)]


@pytest.mark.parametrize("N, d", [(1, 1), (2, 1), (3, 2)])
def test_default_attention_graph_is_unchanged_by_the_options(N, d):
    g, h = attention_graph(N, d), attention_graph(N, d, softmax=None, scale=False)
    assert g.order == h.order and g.outputs == h.outputs
    assert all(g.parents(v) == h.parents(v) for v in g)
    scaled = attention_graph(N, d, scale=True)
    assert len(scaled) == len(g) + N * d
    assert scaled.parents(("QK", 0, 0, 0)) == (("tauQ", 0, 0), ("K", 0, 0))
    assert scaled.parents(("tauQ", 0, 0)) == (("Q", 0, 0),)


@pytest.mark.parametrize("N, d", [(1, 1), (2, 3), (3, 2)])
def test_online_graph(N, d):
    """FlashAttention's online softmax key by key, from the inputs m = -inf, l = 0, O = 0."""
    g = attention_graph(N, d, softmax="online")
    NN = N * N
    expected = {"Q": N * d, "K": N * d, "V": N * d, "QK": NN * d, "S": NN * (d - 1),
                "m": NN + N, "alpha": NN, "exp": NN, "rescale": NN, "l": NN + N,
                "AV": NN * d, "rescaled": NN * d, "num": NN * d, "O": NN * d + N * d}
    assert _kinds(g) == {k: v for k, v in expected.items() if v}
    assert set(g.inputs) == {v for v in g if v[0] in ("Q", "K", "V")} | {
        ("m", i, -1) for i in range(N)} | {("l", i, -1) for i in range(N)} | {
        ("O", i, c, -1) for i in range(N) for c in range(d)}
    assert g.outputs == tuple(("O", i, c, N - 1) for i in range(N) for c in range(d))
    assert g.max_in_degree == 2
    S = ("S", 0, N - 1, d - 1) if d > 1 else ("QK", 0, N - 1, 0)
    j = N - 1
    assert g.parents(("m", 0, j)) == (("m", 0, j - 1), S)
    assert g.parents(("alpha", 0, j)) == (("m", 0, j - 1), ("m", 0, j))
    assert g.parents(("exp", 0, j)) == (S, ("m", 0, j))
    assert g.parents(("rescale", 0, j)) == (("alpha", 0, j), ("l", 0, j - 1))
    assert g.parents(("l", 0, j)) == (("rescale", 0, j), ("exp", 0, j))
    assert g.parents(("rescaled", 0, 0, j)) == (("rescale", 0, j), ("O", 0, 0, j - 1))
    assert g.parents(("num", 0, 0, j)) == (("rescaled", 0, 0, j), ("AV", 0, j, 0))
    assert g.parents(("O", 0, 0, j)) == (("num", 0, 0, j), ("l", 0, j))


@pytest.mark.parametrize("N, d", [(1, 1), (2, 3), (3, 2)])
def test_rows_graph(N, d):
    """Standard attention's: the running maximum and sum from key 0, P = softmax(S), O = P V."""
    g = attention_graph(N, d, softmax="rows")
    NN, rest = N * N, N * (N - 1)
    expected = {"Q": N * d, "K": N * d, "V": N * d, "QK": NN * d, "S": NN * (d - 1),
                "m": rest, "alpha": rest, "exp": NN, "rescale": rest, "l": rest,
                "p": NN, "P": NN, "PV": NN * d, "O": N * d * (N - 1)}
    assert _kinds(g) == {k: v for k, v in expected.items() if v}
    assert set(g.inputs) == {v for v in g if v[0] in "QKV" and len(v) == 3}
    last = [("O", i, c, N - 1) if N > 1 else ("PV", i, 0, c) for i in range(N) for c in range(d)]
    assert g.outputs == tuple(last)
    assert g.max_in_degree == 2
    S0 = ("S", 0, 0, d - 1) if d > 1 else ("QK", 0, 0, 0)
    assert g.parents(("exp", 0, 0)) == (S0,)                       # m_00 = S_00
    m, l = (("m", 0, N - 1), ("l", 0, N - 1)) if N > 1 else (S0, ("exp", 0, 0))
    assert g.parents(("p", 0, 0)) == ((S0, m) if N > 1 else (S0,))
    assert g.parents(("P", 0, 0)) == (("p", 0, 0), l)
    assert _sum_of_products(g, last[0], "PV") == [("PV", 0, j, 0) for j in range(N)]


@pytest.mark.parametrize("N, d", [(1, 1), (2, 3), (3, 2)])
@pytest.mark.parametrize("scale", [False, True])
def test_backward_graph(N, d, scale):
    g = attention_backward_graph(N, d, scale=scale)
    NN = N * N
    expected = {"Q": N * d, "K": N * d, "V": N * d, "dO": N * d, "O": N * d, "L": N,
                "QK": NN * d, "S": NN * (d - 1), "P": NN, "dOV": NN * d, "dP": NN * (d - 1),
                "dOO": N * d, "D": N * (d - 1), "dPD": NN, "dS": NN,
                "PdO": NN * d, "dV": N * d * (N - 1), "dSK": NN * d, "dQ": N * d * (N - 1),
                "dSQ": NN * d, "dK": N * d * (N - 1),
                "tauK": N * d * scale, "tau_dK": N * d * scale}
    assert _kinds(g) == {k: v for k, v in expected.items() if v}
    assert set(g.inputs) == {v for v in g if v[0] in ("Q", "K", "V", "dO", "O", "L")}
    assert len(g.outputs) == 3 * N * d
    assert g.max_in_degree == 2
    S, D = ("S", 0, 1 % N, d - 1) if d > 1 else ("QK", 0, 1 % N, 0), \
        ("D", 0, d - 1) if d > 1 else ("dOO", 0, 0)
    assert g.parents(("P", 0, 1 % N)) == (S, ("L", 0))
    assert g.parents(("dPD", 0, 1 % N))[1] == D
    assert g.parents(("dS", 0, 1 % N))[0] == ("P", 0, 1 % N)
    k = ("tauK", 0, 0) if scale else ("K", 0, 0)
    assert g.parents(("dSK", 1 % N, 0, 0)) == (("dS", 1 % N, 0), k)
    dV = ("dV", 0, 0, N - 1) if N > 1 else ("PdO", 0, 0, 0)
    assert dV in g.outputs
    assert _sum_of_products(g, ("D", 0, d - 1) if d > 1 else ("dOO", 0, 0)) == [
        ("dOO", 0, c) for c in range(d)]
    dK = ("dK", 0, 0, N - 1) if N > 1 else ("dSQ", 0, 0, 0)
    assert (("tau_dK", 0, 0) if scale else dK) in g.outputs


def test_bad_softmax():
    with pytest.raises(ValueError, match="softmax must be one of"):
        attention_graph(2, 2, softmax="stable")
