"""Does the ring hide its transfers behind its compute? A time model, evaluated exactly.

This is a **model**, not a measurement. At each step of a ring (:data:`~.costs.RINGS`: ring,
striped and zigzag ring attention, and the ring across the groups of USP), a processor attends
its queries to the block of ``K, V`` it holds while it sends that block on and receives the
next. The model charges

- the compute of step ``s`` on processor ``p``: ``4 d work[p, s] / F`` seconds, with
  ``work[p, s]`` the score entries of :func:`~.costs.cost` (heads included) and ``4d`` the
  forward pass's multiply-adds counted as two operations each, ``2d`` for ``S = Q K^T`` and
  ``2d`` for ``P V`` (the softmax's exponentials and the rescaling are not counted), at ``F``,
  the GPU's dense tensor-core peak for ``dtype`` (:data:`ioattn.gpus.GPUS`; bfloat16 by
  default, float16 on the T4, which has no bfloat16);
- the transfer of step ``s``: ``alpha + w b / B`` seconds, with ``w`` the words of
  :func:`~.costs.step_words`, ``b`` bytes per word (2 for bfloat16) and ``B``, ``alpha`` the
  link's bandwidth per direction and latency (:mod:`ioattn.interconnect`); the last step sends
  nothing.

A step ends when the slowest processor has both computed and received its next block, so the
transfers are *hidden* when, at every step that sends, the longest transfer takes no longer
than the longest compute (then the ring runs as fast as its compute alone). Double buffering,
which this needs, holds the block in use and the block arriving: ``2 x`` the largest block's
bytes, reported beside the answer. The model leaves out everything a real run adds: kernels
that reach only part of the peak (which *helps* hiding: slower compute covers more), the
contention of a link shared by two rings, the all-to-alls of USP, the merges, and the backward
pass.

Every time is an exact :class:`~fractions.Fraction` of seconds. :func:`smallest` finds the
smallest ``N / P`` (rows per processor, ``N = n P``) at which the transfers hide, by bisection on
exact evaluations, checked at ``n - 1`` and ``n``; :func:`closed_form` is the answer for the
ring without a mask, the smallest integer ``n`` with ``4 d H n^2 / F >= alpha + 2 d H n b / B``,
which the tests check against :func:`smallest`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

from .._validate import as_count
from ..gpus import GPUS
from ..interconnect import latency, link
from .costs import RINGS, as_flag, cost, step_words

__all__ = ["Overlap", "closed_form", "hides", "peak", "smallest", "step_times"]


def peak(gpu: str, dtype: str | None = None) -> tuple[str, int]:
    """``(dtype, F)``: the dense peak of ``gpu`` in operations per second for ``dtype`` (default
    bfloat16, or float16 where the datasheet gives no bfloat16 peak)."""
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    g = GPUS[gpu]
    if dtype is None:
        dtype = "bfloat16" if "bfloat16" in g.peak else "float16"
    if dtype not in g.peak:
        raise ValueError(f"the {gpu} datasheet gives no {dtype} peak; it gives "
                         f"{', '.join(g.peak)}")
    return dtype, g.peak[dtype]


def _alpha(link_name: str, alpha) -> Fraction:
    if alpha is None:
        return latency(link_name)
    alpha = Fraction(alpha)
    if alpha < 0:
        raise ValueError(f"alpha must be at least 0 seconds, got {alpha}")
    return alpha


def step_times(name: str, N: int, d: int, P: int, gpu: str, link_name: str, *, heads: int = 1,
               causal: bool = False, grid=None, dtype: str | None = None,
               bytes_per_word: int = 2, alpha=None) -> list[tuple[Fraction, Fraction]]:
    """``(compute, transfer)`` of each step of the ring, in seconds (module docstring): the
    longest over the processors of each; ``transfer`` is 0 at the last step.

    >>> t = step_times("ring", 8 * 4096, 128, 8, "H100", "NVLink 4", heads=8)
    >>> t[0][0] == Fraction(4 * 128 * 8 * 4096**2, 9895 * 10**11), t[-1][1]
    (True, Fraction(0, 1))
    """
    if name not in RINGS:
        raise ValueError(f"{name!r} has no ring of K, V blocks; those that do: "
                         f"{', '.join(RINGS)}")
    causal = as_flag(causal, "causal")
    bytes_per_word = as_count(bytes_per_word, "bytes_per_word")
    _, F = peak(gpu, dtype)
    B = link(link_name).bandwidth
    a = _alpha(link_name, alpha)
    c = cost(name, N, d, P, heads=heads, causal=causal, grid=grid)
    w = step_words(name, N, d, P, heads=heads, grid=grid)
    out = []
    for s in range(c.work.shape[1]):
        compute = Fraction(4 * d * int(c.work[:, s].max()), F)
        words = int(w[:, s].max())
        out.append((compute, a + Fraction(words * bytes_per_word, B) if words else Fraction(0)))
    return out


def hides(name: str, N: int, d: int, P: int, gpu: str, link_name: str, **kw) -> bool:
    """True when at every step that sends, the longest transfer is no longer than the longest
    compute (:func:`step_times`; keywords as there)."""
    return all(t <= c for c, t in step_times(name, N, d, P, gpu, link_name, **kw) if t)


class Overlap(NamedTuple):
    """The answer of :func:`smallest`: ``n = N / P`` rows per processor, ``N``, the ``dtype``
    whose peak was used, the step times at ``n`` (:func:`step_times`), and ``buffers``, the
    bytes double buffering holds (twice the largest block of ``K, V`` at ``n``)."""

    name: str
    gpu: str
    link: str
    n: int
    N: int
    dtype: str
    steps: list
    buffers: int


def smallest(name: str, gpu: str, link_name: str, d: int, P: int, *, heads: int = 1,
             causal: bool = False, grid=None, dtype: str | None = None,
             bytes_per_word: int = 2, alpha=None, limit: int = 1 << 40) -> Overlap:
    """The smallest ``n = N / P`` at which the ring's transfers hide behind its compute.

    Parameters
    ----------
    name : {"ring", "striped", "zigzag", "usp", "usp_zigzag"}
    gpu : str
        A key of :data:`ioattn.gpus.GPUS`.
    link_name : str
        A key of :data:`ioattn.interconnect.LINKS`.
    d, P, heads, causal, grid
        As for :func:`~.costs.cost` (``N = n P``).
    dtype, bytes_per_word, alpha
        The peak's dtype (default: :func:`peak`), bytes per word sent, and the latency in
        seconds (default the link's assumed one).
    limit : int
        Give up above this ``n`` (a ValueError).

    Returns
    -------
    Overlap

    Notes
    -----
    Bisection between a failing and a hiding ``n`` (doubling from 1 to find the second), each
    evaluated exactly; the answer is checked to hide and ``n - 1`` not to. That this is the
    first ``n`` that hides assumes hiding is monotone in ``n`` (compute grows like ``n^2``,
    transfers like ``n``); the tests check every smaller ``n`` where that is cheap.
    """
    d, P = as_count(d, "d"), as_count(P, "P")
    dtype = peak(gpu, dtype)[0]
    kw = dict(heads=heads, causal=causal, grid=grid, dtype=dtype, bytes_per_word=bytes_per_word,
              alpha=alpha)

    def ok(n):
        return hides(name, n * P, d, P, gpu, link_name, **kw)

    if P == 1:
        n = 1                                       # one processor sends nothing
    elif ok(1):
        n = 1
    else:
        lo, hi = 1, 2
        while not ok(hi):
            lo, hi = hi, 2 * hi
            if hi > limit:
                raise ValueError(f"the transfers do not hide for any N / P up to {limit}")
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        n = hi
        assert ok(n) and not ok(n - 1)
    words = step_words(name, n * P, d, P, heads=heads, grid=grid)
    return Overlap(name, gpu, link_name, n, n * P, dtype,
                   step_times(name, n * P, d, P, gpu, link_name, **kw),
                   2 * int(words.max()) * bytes_per_word)


def closed_form(gpu: str, link_name: str, d: int, *, heads: int = 1, dtype: str | None = None,
                bytes_per_word: int = 2, alpha=None) -> int:
    """The smallest integer ``n`` with ``4 d H n^2 / F >= alpha + 2 d H n b / B``: ring attention
    without a mask, where every step computes ``H n^2`` scores and sends ``2 d H n`` words.

    With ``a = 4dH/F``, ``c = 2dHb/B`` it is ``ceil((c + sqrt(c^2 + 4 a alpha)) / (2a))``,
    computed in integers: near ``F b / (2B)`` when ``alpha`` is small.

    >>> closed_form("H100", "NVLink 4", 128, heads=8, alpha=0)
    2199
    """
    d, H = as_count(d, "d"), as_count(heads, "heads")
    bytes_per_word = as_count(bytes_per_word, "bytes_per_word")
    _, F = peak(gpu, dtype)
    B = link(link_name).bandwidth
    al = _alpha(link_name, alpha)
    # A n^2 - C n - E >= 0 with integers A, C, E (all terms times F B den(alpha))
    A = 4 * d * H * B * al.denominator
    C = 2 * d * H * bytes_per_word * F * al.denominator
    E = al.numerator * F * B
    n = (C + math.isqrt(C * C + 4 * A * E)) // (2 * A)
    while A * n * n - C * n - E < 0:
        n += 1
    while n > 1 and A * (n - 1) ** 2 - C * (n - 1) - E >= 0:
        n -= 1
    return max(n, 1)
