"""The computation graphs of matrix multiplication and attention: those of [SY]_, and the graphs
of the arithmetic the package's other schedules do.

Every sum is a chain in index order (``((x_0 + x_1) + x_2) + ...``), which is a summation tree of
the kind [SY]_ allow and the order in which the tiled algorithms accumulate, so their schedules
can be played as games on these very graphs (:mod:`ioattn.pebble.schedules`). Every vertex has
at most two parents (binary operations, and unary ones such as ``exp`` or a scale by ``tau``).

Vertex ids are tuples whose first item names the kind of value:

``matmul_graph(m, k, n)``: inputs ``("A", i, l)``, ``("B", l, j)``; products
``("mul", i, l, j)``; partial sums ``("sum", i, j, l)`` = sum of the products up to ``l``
(``l >= 1``). The output ``C_ij`` is ``("sum", i, j, k - 1)``, or the product when ``k = 1``.

``attention_graph(N, d)`` computes ``O = D^{-1} exp(Q K^T) V`` with ``D = diag(exp(Q K^T) 1)``
(no scale and no max subtraction, as in [SY]_; neither changes the graph's shape):

- inputs ``("Q", i, l)``, ``("K", j, l)``, ``("V", j, c)``;
- level 1: products ``("QK", i, j, l)`` and partial sums ``("S", i, j, l)``; ``S_ij`` is the last;
- ``("exp", i, j)`` of ``S_ij``;
- the row sums ``("rowsum", i, j)`` = sum of the exponentials up to ``j``; ``l_i`` is the last;
- products ``("AV", i, j, c)`` of ``exp(S_ij)`` and ``V_jc``, partial sums ``("num", i, c, j)``;
- outputs ``("O", i, c)`` = the last partial sum divided by ``l_i``.

Options of ``attention_graph`` (the defaults give the graph above, vertex for vertex):

``scale=True``: ``tau`` folded into ``Q`` as FlashAttention does: one-parent vertices
``("tauQ", i, l) = tau Q_il``, which the products ``("QK", i, j, l)`` use instead of ``Q_il``.

``softmax="online"``: the online softmax of FlashAttention's Algorithm 1 [FA]_, key by key, with
the row maximum ``m`` subtracted and ``O`` renormalised after every key. For row ``i`` and key
``j`` (the values "after keys ``0..j``"), from ``m_i = -inf``, ``l_i = 0``, ``O_i = 0``, which are
the inputs ``("m", i, -1)``, ``("l", i, -1)``, ``("O", i, c, -1)`` (FlashAttention writes them to
slow memory before it starts):

- ``("m", i, j) = max(m_{i,j-1}, S_ij)``, ``("alpha", i, j) = exp(m_{i,j-1} - m_ij)``;
- ``("exp", i, j) = exp(S_ij - m_ij)``;
- ``("rescale", i, j) = alpha_ij l_{i,j-1}``, ``("l", i, j) = rescale_ij + exp_ij``;
- ``("AV", i, j, c) = exp_ij V_jc``, ``("rescaled", i, c, j) = rescale_ij O_{ic,j-1}``,
  ``("num", i, c, j) = rescaled + AV``, ``("O", i, c, j) = num / l_ij``;
- outputs ``("O", i, c, N - 1)``.

``softmax="rows"``: softmax first, then ``O = P V``, as standard attention does. The row's
maximum and sum are the same running values as above, started at key 0 (so a row can be read in
strips), with no inputs besides ``Q, K, V``: ``m_i0 = S_i0`` and ``l_i0 = ("exp", i, 0)``, then
``("m", i, j)``, ``("alpha", i, j)``, ``("rescale", i, j)``, ``("exp", i, j)``, ``("l", i, j)`` for
``j >= 1``; with ``m_i``, ``l_i`` the values after the last key,

- ``("p", i, j) = exp(S_ij - m_i)`` and ``("P", i, j) = p_ij / l_i``;
- products ``("PV", i, j, c) = P_ij V_jc`` and partial sums ``("O", i, c, j)``; the output
  ``O_ic`` is the last, ``("O", i, c, N - 1)`` (the product when ``N = 1``).

``attention_backward_graph(N, d)`` computes the gradients of attention from the forward's ``O``
and row log-sum-exp ``L`` ([FA2]_, Algorithm 2):

- inputs ``("Q", i, l)``, ``("K", j, l)``, ``("V", j, c)``, ``("dO", i, c)``, ``("O", i, c)``,
  ``("L", i)``;
- ``S_ij`` as in ``attention_graph`` and ``("P", i, j) = exp(S_ij - L_i)``;
- ``dP_ij = sum_c dO_ic V_jc``: products ``("dOV", i, j, c)``, partial sums ``("dP", i, j, c)``;
- ``D_i = sum_c dO_ic O_ic``: products ``("dOO", i, c)``, partial sums ``("D", i, c)``;
- ``("dPD", i, j) = dP_ij - D_i`` and ``("dS", i, j) = P_ij dPD_ij``;
- ``dV_jc = sum_i P_ij dO_ic``: products ``("PdO", i, j, c)``, partial sums ``("dV", j, c, i)``;
- ``dQ_ic = sum_j dS_ij K_jc``: products ``("dSK", i, j, c)``, partial sums ``("dQ", i, c, j)``;
- ``dK_jc = sum_i dS_ij Q_ic``: products ``("dSQ", i, j, c)``, partial sums ``("dK", j, c, i)``;
- outputs: the last partial sums of ``dQ``, ``dK``, ``dV`` (the product when ``N = 1``).

With ``scale=True``, ``tau`` is folded into ``K`` as FlashAttention-2's backward does:
``("tauK", j, l) = tau K_jl`` replaces ``K_jl`` in the products ``("QK", ...)`` and
``("dSK", ...)``, and the output ``dK_jc`` is ``("tau_dK", j, c) = tau`` times its last partial
sum. Without it, ``tau`` is left out, as in [SY]_: the algorithms that apply it to a finished
tile in the cache do so in place, which moves nothing.

The property the lower bounds rely on
-------------------------------------
In every one of these graphs each score ``S_ij`` (and, in the backward graph, each ``dP_ij``) is
formed by the standard sum-of-products tree: ``d`` products, each with two parents that are input
entries or one-parent vertices of one (``tau Q_il``, ``tau K_jl``), added in a chain. The
reduction to matrix multiplication and the M-partition bounds of the book use exactly this.

References
----------
.. [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, arXiv:2402.07443, Section 3.
.. [FA] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, "FlashAttention", NeurIPS 2022,
   Algorithm 1.
.. [FA2] T. Dao, "FlashAttention-2", arXiv:2307.08691, Algorithm 2.
"""

from __future__ import annotations

from .._validate import as_count
from .graph import Graph

__all__ = ["SOFTMAX", "attention_backward_graph", "attention_graph", "chain", "matmul_graph"]

#: The forms of the softmax ``attention_graph`` builds: [SY]_'s, FlashAttention's, standard's.
SOFTMAX = (None, "online", "rows")


def chain(edges: list, terms: list, label) -> object:
    """Add the chain sum of ``terms`` to ``edges``; return the vertex holding the total.

    The partial sum after term ``t`` (``t >= 1``) is ``label(t)``; one term is its own total.
    """
    total = terms[0]
    for t in range(1, len(terms)):
        s = label(t)
        edges += [(total, s), (terms[t], s)]
        total = s
    return total


def matmul_graph(m: int, k: int, n: int) -> Graph:
    """The standard ``(m, k) @ (k, n)`` product: ``mnk`` products and ``mn`` chain sums."""
    m, k, n = as_count(m, "m"), as_count(k, "k"), as_count(n, "n")
    edges, outputs = [], []
    for i in range(m):
        for j in range(n):
            terms = []
            for l in range(k):
                p = ("mul", i, l, j)
                edges += [(("A", i, l), p), (("B", l, j), p)]
                terms.append(p)
            outputs.append(chain(edges, terms, lambda t, i=i, j=j: ("sum", i, j, t)))
    return Graph(edges, outputs=outputs)


def _operand(edges: list, name: str, scaled: bool):
    """``operand(r, l)``: the entry ``(name, r, l)``, or its one-parent scaled vertex
    ``("tau" + name, r, l)`` (added to ``edges`` the first time it is asked for)."""
    seen = set()

    def operand(r, l):
        v = (name, r, l)
        if not scaled:
            return v
        s = ("tau" + name, r, l)
        if s not in seen:
            seen.add(s)
            edges.append((v, s))
        return s
    return operand


def _dot(edges: list, products: list, left: list, right: list, label) -> object:
    """The chain sum of the products ``products[t] = left[t] * right[t]``; its total."""
    for p, a, b in zip(products, left, right):
        edges += [(a, p), (b, p)]
    return chain(edges, products, label)


def _score(edges: list, q, i: int, j: int, d: int) -> object:
    """``S_ij = sum_l q(i, l) K_jl``: ``d`` products ``("QK", i, j, l)`` and their chain."""
    return _dot(edges, [("QK", i, j, l) for l in range(d)], [q(i, l) for l in range(d)],
                [("K", j, l) for l in range(d)], lambda t: ("S", i, j, t))


def attention_graph(N: int, d: int, *, softmax: str | None = None,
                    scale: bool = False) -> Graph:
    """An attention graph for ``N x d`` inputs (see the module docstring).

    Parameters
    ----------
    N, d : int
        Sequence length and head dimension.
    softmax : {None, "online", "rows"}
        None: the graph of [SY]_ (no row maximum, ``O`` divided by the row sums at the end);
        ``"online"``: FlashAttention's online softmax key by key, ``O`` renormalised after every
        key, from the inputs ``m = -inf``, ``l = 0``, ``O = 0``; ``"rows"``: the row maximum and
        sum, then ``P = softmax(S)`` and ``O = P V``, as standard attention computes.
    scale : bool
        Fold ``tau`` into ``Q`` as one-parent vertices ``("tauQ", i, l)``.

    Returns
    -------
    Graph
        Every vertex has at most two parents; every score ``S_ij`` is a chain sum of ``d``
        products of entries.
    """
    N, d = as_count(N, "N"), as_count(d, "d")
    if softmax not in SOFTMAX:
        raise ValueError(f"softmax must be one of {', '.join(map(repr, SOFTMAX))}; "
                         f"got {softmax!r}")
    edges = []
    q = _operand(edges, "Q", scale)
    if softmax == "online":
        return _online_graph(edges, q, N, d)
    if softmax == "rows":
        return _rows_graph(edges, q, N, d)
    outputs = []
    for i in range(N):
        exps = []
        for j in range(N):
            terms = []
            for l in range(d):
                p = ("QK", i, j, l)
                edges += [(q(i, l), p), (("K", j, l), p)]
                terms.append(p)
            S_ij = chain(edges, terms, lambda t, i=i, j=j: ("S", i, j, t))
            edges.append((S_ij, ("exp", i, j)))
            exps.append(("exp", i, j))
        l_i = chain(edges, exps, lambda t, i=i: ("rowsum", i, t))
        for c in range(d):
            terms = []
            for j in range(N):
                p = ("AV", i, j, c)
                edges += [(("exp", i, j), p), (("V", j, c), p)]
                terms.append(p)
            num = chain(edges, terms, lambda t, i=i, c=c: ("num", i, c, t))
            edges += [(num, ("O", i, c)), (l_i, ("O", i, c))]
            outputs.append(("O", i, c))
    return Graph(edges, outputs=outputs)


def _binary(edges: list, v, *parents) -> object:
    edges += [(p, v) for p in parents]
    return v


def _online_step(edges: list, i: int, j: int, S, m, l) -> tuple:
    """One key of the online softmax: ``(m_ij, exp_ij, rescale_ij, l_ij)``; the rescaling is
    None for the first key of a row that starts there (``m = S_i0``, ``l = exp_i0``)."""
    if m is None:
        e = _binary(edges, ("exp", i, j), S)               # exp(S_i0 - S_i0)
        return S, e, None, e
    m_new = _binary(edges, ("m", i, j), m, S)
    alpha = _binary(edges, ("alpha", i, j), m, m_new)
    e = _binary(edges, ("exp", i, j), S, m_new)
    rescale = _binary(edges, ("rescale", i, j), alpha, l)
    return m_new, e, rescale, _binary(edges, ("l", i, j), rescale, e)


def _online_graph(edges: list, q, N: int, d: int) -> Graph:
    """``softmax="online"``: FlashAttention's Algorithm 1, one key at a time."""
    outputs = []
    for i in range(N):
        m, l = ("m", i, -1), ("l", i, -1)
        O = [("O", i, c, -1) for c in range(d)]
        for j in range(N):
            S = _score(edges, q, i, j, d)
            m, e, rescale, l = _online_step(edges, i, j, S, m, l)
            for c in range(d):
                av = _binary(edges, ("AV", i, j, c), e, ("V", j, c))
                old = _binary(edges, ("rescaled", i, c, j), rescale, O[c])
                num = _binary(edges, ("num", i, c, j), old, av)
                O[c] = _binary(edges, ("O", i, c, j), num, l)
        outputs += O
    return Graph(edges, outputs=outputs)


def _rows_graph(edges: list, q, N: int, d: int) -> Graph:
    """``softmax="rows"``: the row's running maximum and sum, ``P = softmax(S)``, ``O = P V``."""
    outputs = []
    for i in range(N):
        S = [_score(edges, q, i, j, d) for j in range(N)]
        m = l = None
        for j in range(N):
            m, _, _, l = _online_step(edges, i, j, S[j], m, l)
        P = [_binary(edges, ("P", i, j), _binary(edges, ("p", i, j), S[j], m), l)
             for j in range(N)]
        for c in range(d):
            outputs.append(_dot(edges, [("PV", i, j, c) for j in range(N)], P,
                                [("V", j, c) for j in range(N)],
                                lambda t, i=i, c=c: ("O", i, c, t)))
    return Graph(edges, outputs=outputs)


def attention_backward_graph(N: int, d: int, *, scale: bool = False) -> Graph:
    """The graph of attention's backward pass for ``N x d`` inputs (see the module docstring).

    Parameters
    ----------
    N, d : int
        Sequence length and head dimension.
    scale : bool
        Fold ``tau`` into ``K`` as FlashAttention-2's backward does: ``("tauK", j, l)`` in the
        scores and in ``dQ``, and ``dK`` scaled at the end, ``("tau_dK", j, c)``.

    Returns
    -------
    Graph
        Inputs the entries of ``Q, K, V, dO, O, L``; outputs those of ``dQ``, ``dK``, ``dV``.
    """
    N, d = as_count(N, "N"), as_count(d, "d")
    edges = []
    q = _operand(edges, "Q", False)
    k = _operand(edges, "K", scale)
    D = [_dot(edges, [("dOO", i, c) for c in range(d)], [("dO", i, c) for c in range(d)],
              [("O", i, c) for c in range(d)], lambda t, i=i: ("D", i, t)) for i in range(N)]
    P, dS = {}, {}
    for i in range(N):
        for j in range(N):
            S = _dot(edges, [("QK", i, j, l) for l in range(d)], [q(i, l) for l in range(d)],
                     [k(j, l) for l in range(d)], lambda t, i=i, j=j: ("S", i, j, t))
            P[i, j] = _binary(edges, ("P", i, j), S, ("L", i))
            dP = _dot(edges, [("dOV", i, j, c) for c in range(d)],
                      [("dO", i, c) for c in range(d)], [("V", j, c) for c in range(d)],
                      lambda t, i=i, j=j: ("dP", i, j, t))
            dPD = _binary(edges, ("dPD", i, j), dP, D[i])
            dS[i, j] = _binary(edges, ("dS", i, j), P[i, j], dPD)
    rows = range(N)
    dV = [_dot(edges, [("PdO", i, j, c) for i in rows], [P[i, j] for i in rows],
               [("dO", i, c) for i in rows], lambda t, j=j, c=c: ("dV", j, c, t))
          for j in rows for c in range(d)]
    dQ = [_dot(edges, [("dSK", i, j, c) for j in rows], [dS[i, j] for j in rows],
               [k(j, c) for j in rows], lambda t, i=i, c=c: ("dQ", i, c, t))
          for i in rows for c in range(d)]
    dK = [_dot(edges, [("dSQ", i, j, c) for i in rows], [dS[i, j] for i in rows],
               [q(i, c) for i in rows], lambda t, j=j, c=c: ("dK", j, c, t))
          for j in rows for c in range(d)]
    if scale:
        dK = [_binary(edges, ("tau_dK", j, c), v)
              for (j, c), v in zip(((j, c) for j in rows for c in range(d)), dK)]
    return Graph(edges, outputs=dQ + dK + dV)
