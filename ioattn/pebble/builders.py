"""The computation graphs of matrix multiplication and attention, as [SY]_ define them.

Every sum is a chain in index order (``((x_0 + x_1) + x_2) + ...``), which is a summation tree of
the kind [SY]_ allow and the order in which the tiled algorithms accumulate, so their schedules
can be played as games on these very graphs (:mod:`ioattn.pebble.schedules`).

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

References
----------
.. [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, arXiv:2402.07443, Section 3.
"""

from __future__ import annotations

from .._validate import as_count
from .graph import Graph

__all__ = ["matmul_graph", "attention_graph", "chain"]


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


def attention_graph(N: int, d: int) -> Graph:
    """The attention graph of [SY]_ for ``N x d`` inputs (see the module docstring)."""
    N, d = as_count(N, "N"), as_count(d, "d")
    edges, outputs = [], []
    for i in range(N):
        exps = []
        for j in range(N):
            terms = []
            for l in range(d):
                p = ("QK", i, j, l)
                edges += [(("Q", i, l), p), (("K", j, l), p)]
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
