"""Merging partial attention outputs in low precision: an emulation of the rounding and a bound.

Every parallel scheme that splits the keys ends by merging partial results: processor ``p``
holds, for each block ``j`` of keys, the output ``O_j`` of its queries against that block alone
and the row log-sum-exp ``L_j``; the whole output is ``O = sum_j exp(L_j - L) O_j`` with
``L = log sum_j exp(L_j)``. The chapter "Schemes in practice", section "Merging in low
precision", derives the error of doing this in a floating-point format of unit roundoff ``u``;
this module measures it and evaluates the bound.

Rounding. :func:`round_to` rounds float64 values to float32 (NumPy's cast: round to nearest,
ties to even) or to bfloat16: 8 significant bits, round to nearest, ties to even, with float32's
exponent range (no values here come near its overflow or subnormal range).
:func:`bfloat16_bits` is the same rounding written on the bits of a float32 (add ``0x7FFF`` and
the lowest kept bit, keep the top 16 bits); the tests check the two agree. The emulated
arithmetic computes each operation in float64 from operands already in the format and rounds
the result once: for ``+, -, *`` of two bfloat16 or float32 numbers that is the correctly
rounded result, for ``exp`` and ``log1p`` it is within ``2^-52`` (float64's rounding) of it.

The merge of two parts ``(O_a, L_a)`` and ``(O_b, L_b)`` (the weight form; :mod:`~.engine`'s grid
merges the same way) is, with every intermediate rounded to the format::

    M = max(L_a, L_b),  L = M + log1p(exp(min(L_a, L_b) - M)),
    O = exp(L_a - L) O_a + exp(L_b - L) O_b.

The orders (:data:`ORDERS`), as the algorithms of :mod:`ioattn.parallel` merge (:func:`order`):

- ``"sequential"``: one part after another into a running ``(O, L)``: ring attention, striped
  and zigzag ring attention (the blocks in step order ``p, p - 1, ..., p - P + 1`` mod ``P``)
  and the all-gather of ``K, V`` (blocks ``0, ..., P - 1``);
- ``"flat"``: the grid's reduce-scatter (:func:`ioattn.parallel.engine.grid`): ``L`` by a
  sequential log-sum-exp of all parts, then ``O = sum_q exp(L_q - L) O_q`` summed in order;
- ``"tree"``: adjacent pairs merged level by level (``ceil(log2 P)`` levels), as a reduction
  tree would; no algorithm here merges so, it is the comparison.

The error is measured against the exact merge (float64 partials from the same random queries,
keys and values, merged in float64) as
``max |O_hat - O| / max_j max |O_j|``: normalised by the largest partial output, since ``O`` is
a convex combination of the ``O_j`` and may itself be near zero. The error of ``L`` is what the
backward pass sees: it recomputes the probabilities as ``exp(S - L_hat)``, so every one of a
row's is off by the factor ``exp(L - L_hat)``.

:func:`bound` is the book's first-order bound (proved there): with ``D`` the merges on the
longest path from a part to the result (``P - 1`` sequential, ``ceil(log2 P)`` for the tree) and
``Lambda = max(|min_j L_j|, |L|)``,

    |L_hat - L| <= u (Lambda + D (Lambda + 2)),
    error(O)    <= u_in + u Lambda + |L_hat - L|_bound + u ln P + 3 D u,

and for ``"flat"`` ``u_in + u Lambda + u (Lambda + (P - 1)(Lambda + 2)) + u ln P + (P + 1) u``,
where ``u_in`` is the unit roundoff of the partial outputs as they arrive (``u`` itself unless
``outputs=`` says otherwise). To first order in ``u``: the constant 2 covers the 1.56 the
derivation gives for one merge, not a proof for large ``D u``. The bound grows like ``P u
Lambda`` for the sequential fold and like ``u Lambda log2 P`` for the tree.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import as_count

__all__ = ["FORMATS", "ORDERS", "UNIT_ROUNDOFF", "bfloat16_bits", "bound", "depth", "error",
           "merge", "order", "partials", "round_to"]

#: The formats :func:`round_to` knows.
FORMATS = ("float64", "float32", "bfloat16")
#: Unit roundoff ``u = 2^-p`` of each format, ``p`` its significant bits (53, 24, 8).
UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "bfloat16": 2.0 ** -8}
#: The merge orders.
ORDERS = ("sequential", "flat", "tree")
#: The order each algorithm merges its partial outputs in.
_ORDER = {"ring": "sequential", "striped": "sequential", "zigzag": "sequential",
          "all_gather": "sequential", "usp": "sequential", "usp_zigzag": "sequential",
          "grid": "flat", "tree": "tree"}


def _format(precision: str) -> str:
    if precision not in FORMATS:
        raise ValueError(f"unknown format {precision!r}; known: {', '.join(FORMATS)}")
    return precision


def round_to(x, precision: str) -> np.ndarray:
    """``x`` rounded to ``precision`` (:data:`FORMATS`), round to nearest, ties to even; float64.

    >>> round_to([1 + 2**-8, 1 + 3 * 2**-8, np.pi], "bfloat16").tolist()
    [1.0, 1.015625, 3.140625]
    """
    precision = _format(precision)
    x = np.asarray(x, dtype=np.float64)
    if precision == "float64":
        return x.copy()
    if precision == "float32":
        return x.astype(np.float32).astype(np.float64)
    m, e = np.frexp(x)                     # x = m 2^e, 1/2 <= |m| < 1: keep 8 bits of m
    return np.ldexp(np.rint(m * 256.0), e - 8)      # np.rint: ties to even


def bfloat16_bits(x) -> np.ndarray:
    """float32 values rounded to bfloat16 on their bits: ``b + 0x7FFF + (bit 16 of b)``, top 16
    bits kept (round to nearest, ties to even); returned as float32. For finite values."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def order(name: str, P: int, p: int = 0) -> tuple[str, list[int]]:
    """How ``name`` (an algorithm of :mod:`ioattn.parallel`, or ``"tree"``) merges ``P`` parts
    on processor ``p``: the order of :data:`ORDERS` and the blocks in the order merged.

    >>> order("ring", 4, 1), order("all_gather", 3), order("grid", 2)
    (('sequential', [1, 0, 3, 2]), ('sequential', [0, 1, 2]), ('flat', [0, 1]))
    """
    P = as_count(P, "P")
    if name not in _ORDER:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(_ORDER)}")
    if not 0 <= p < P:
        raise ValueError(f"processor p = {p} is not one of 0, ..., {P - 1}")
    if name in ("ring", "striped", "zigzag", "usp", "usp_zigzag"):
        return "sequential", [(p - s) % P for s in range(P)]       # j_s, the ring's steps
    return _ORDER[name], list(range(P))


def depth(how: str, P: int) -> int:
    """Merges on the longest path from a part to the result: ``P - 1`` for ``"sequential"`` and
    ``"flat"`` (its log-sum-exp), ``ceil(log2 P)`` for ``"tree"``."""
    P = as_count(P, "P")
    if how not in ORDERS:
        raise ValueError(f"unknown merge order {how!r}; known: {', '.join(ORDERS)}")
    return (P - 1).bit_length() if how == "tree" else P - 1


def partials(P: int, *, rows: int = 32, block: int = 64, d: int = 64, seed: int = 0):
    """``P`` exact partial results of attention: ``rows`` queries against ``P`` blocks of
    ``block`` keys each (standard normal ``Q, K, V``, scale ``1/sqrt(d)``), in float64.

    Returns ``(O_parts, L_parts, O, L)``: ``O_parts`` is ``P x rows x d``, ``L_parts``
    ``P x rows``, ``O, L`` the attention over all ``P * block`` keys.
    """
    P, rows, block, d = (as_count(v, n) for v, n in ((P, "P"), (rows, "rows"),
                                                      (block, "block"), (d, "d")))
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((rows, d))
    K, V = (rng.standard_normal((P * block, d)) for _ in range(2))
    S = (Q @ K.T) / math.sqrt(d)
    parts = [_softmax(S[:, j * block:(j + 1) * block], V[j * block:(j + 1) * block])
             for j in range(P)]
    O, L = _softmax(S, V)
    return np.stack([o for o, _ in parts]), np.stack([l for _, l in parts]), O, L


def _softmax(S, V):
    """``softmax(S) V`` and the row log-sum-exp of ``S``, in float64."""
    m = S.max(axis=1, keepdims=True)
    E = np.exp(S - m)
    s = E.sum(axis=1)
    return (E @ V) / s[:, None], m[:, 0] + np.log(s)


def _logaddexp(a, b, r):
    """``log(e^a + e^b)`` with every step rounded by ``r``."""
    M, m = np.maximum(a, b), np.minimum(a, b)
    return r(M + r(np.log1p(r(np.exp(r(m - M))))))


def _merge2(Oa, La, Ob, Lb, r):
    L = _logaddexp(La, Lb, r)
    wa, wb = r(np.exp(r(La - L))), r(np.exp(r(Lb - L)))
    return r(r(wa[..., None] * Oa) + r(wb[..., None] * Ob)), L


def merge(O_parts, L_parts, how: str = "sequential", precision: str = "bfloat16", *,
          sequence=None, outputs: str | None = None):
    """Merge partial ``(O_j, L_j)`` in ``precision``, every intermediate rounded (module
    docstring).

    Parameters
    ----------
    O_parts, L_parts : arrays ``P x rows x d`` and ``P x rows``
        The exact partial outputs and log-sum-exps.
    how : {"sequential", "flat", "tree"}
    precision : {"float64", "float32", "bfloat16"}
        The format of ``L_j`` and of every intermediate and result.
    sequence : list of int, optional
        The parts in the order merged (:func:`order`); default ``0, ..., P - 1``.
    outputs : str, optional
        The format the partial outputs ``O_j`` arrive in (default ``precision``): ``"bfloat16"``
        with ``precision="float32"`` is a kernel that returns bfloat16 blocks merged in float32.

    Returns
    -------
    (O_hat, L_hat) : float64 arrays of values in ``precision``.
    """
    O_parts, L_parts = np.asarray(O_parts, np.float64), np.asarray(L_parts, np.float64)
    if O_parts.ndim != 3 or L_parts.shape != O_parts.shape[:2]:
        raise ValueError(f"O_parts must be P x rows x d and L_parts P x rows; got shapes "
                         f"{O_parts.shape} and {L_parts.shape}")
    if how not in ORDERS:
        raise ValueError(f"unknown merge order {how!r}; known: {', '.join(ORDERS)}")
    P = O_parts.shape[0]
    sequence = list(range(P)) if sequence is None else [int(j) for j in sequence]
    if sorted(sequence) != list(range(P)):
        raise ValueError(f"sequence must order the parts 0, ..., {P - 1}, got {sequence}")
    outputs = _format(precision if outputs is None else outputs)
    r = lambda x: round_to(x, precision)                                # noqa: E731
    Os = [r(round_to(O_parts[j], outputs)) for j in sequence]
    Ls = [r(L_parts[j]) for j in sequence]
    if how == "sequential":
        O, L = Os[0], Ls[0]
        for Ob, Lb in zip(Os[1:], Ls[1:]):
            O, L = _merge2(O, L, Ob, Lb, r)
        return O, L
    if how == "tree":
        level = list(zip(Os, Ls))
        while len(level) > 1:
            nxt = [_merge2(*level[i], *level[i + 1], r) for i in range(0, len(level) - 1, 2)]
            level = nxt + ([level[-1]] if len(level) % 2 else [])
        return level[0]
    L = Ls[0]                                                           # flat: the grid's
    for Lb in Ls[1:]:
        L = _logaddexp(L, Lb, r)
    O = None
    for Oq, Lq in zip(Os, Ls):
        term = r(r(np.exp(r(Lq - L)))[..., None] * Oq)
        O = term if O is None else r(O + term)
    return O, L


def bound(how: str, P: int, Lambda: float, precision: str = "bfloat16", *,
          outputs: str | None = None) -> dict:
    """The book's first-order bounds (module docstring) on the error of ``L`` and of ``O``.

    ``Lambda`` bounds ``|L|`` of every part and partial merge (``max(|min_j L_j|, |L|)``).
    Returns ``{"L": ..., "O": ..., "p": ...}``: the bound on ``max |L_hat - L|``, on the
    normalised error of ``O``, and ``exp(bound L) - 1`` on the relative error of the backward's
    recomputed probabilities ``exp(S - L_hat)``.

    >>> b = bound("sequential", 2, 8.0, "bfloat16")
    >>> b["L"] == (8 + 10) / 256, b["O"] == (1 + 8 + 18 + math.log(2) + 3) / 256
    (True, True)
    """
    P = as_count(P, "P")
    u = UNIT_ROUNDOFF[_format(precision)]
    u_in = UNIT_ROUNDOFF[_format(precision if outputs is None else outputs)]
    u_in = max(u_in, u)                            # the outputs are then rounded to precision
    D = depth(how, P)
    L = u * (Lambda + D * (Lambda + 2))
    extra = (P + 1) * u if how == "flat" else 3 * D * u
    O = u_in + u * Lambda + L + u * math.log(P) + extra
    return {"L": L, "O": O, "p": math.expm1(L)}


def error(P: int, how: str = "sequential", precision: str = "bfloat16", *,
          outputs: str | None = None, sequence=None, rows: int = 32, block: int = 64,
          d: int = 64, seed: int = 0) -> dict:
    """Measure the merge of ``P`` parts (:func:`partials`) in ``precision`` against the exact one.

    Returns a dict: ``O`` (``max |O_hat - O| / max_j max |O_j|``, the error the bound is on),
    ``O_rel`` (``max |O_hat - O| / max |O|``: ``O`` averages the parts and is smaller than they
    are, so this is larger), ``L`` (``max |L_hat - L|``),
    ``p`` (``max |exp(L - L_hat) - 1|``: the backward's probabilities), ``Lambda`` and
    ``bound`` (:func:`bound` with that ``Lambda``).
    """
    O_parts, L_parts, O, L = partials(P, rows=rows, block=block, d=d, seed=seed)
    O_hat, L_hat = merge(O_parts, L_parts, how, precision, sequence=sequence, outputs=outputs)
    Lambda = float(max(abs(L_parts.min()), np.abs(L).max()))
    eL = np.abs(L_hat - L)
    dO = float(np.abs(O_hat - O).max())
    return {"O": dO / float(np.abs(O_parts).max()), "O_rel": dO / float(np.abs(O).max()),
            "L": float(eL.max()),
            "p": float(np.expm1(eL).max()), "Lambda": Lambda,
            "bound": bound(how, P, Lambda, precision, outputs=outputs)}
