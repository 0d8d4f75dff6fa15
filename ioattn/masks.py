"""Attention masks: which keys each query attends to, and the blocks the algorithms skip.

A mask is a boolean ``N x N`` array, ``True`` where query ``i`` attends to key ``j``. Masked
attention is ``O = softmax(tau Q K^T + B) V`` with ``B_ij = 0`` where the mask is True and
``-inf`` where it is False.

Rows with nothing to attend to. Such a row has no softmax (its sum is empty). ioattn defines
its output row as **zeros**, its gradient contributions as zeros (it adds nothing to ``dK`` and
``dV``, and its ``dQ`` row is 0), and its row log-sum-exp as ``L_i = +inf``, not
``log 0 = -inf``, so that the backward's ``P = exp(S - L)`` is 0 on that row with no special
case. FlashAttention-2's CUDA kernels make the same choice: they store ``+inf`` as the
log-sum-exp of a row whose sum is 0, and zeros as its output.

Every algorithm derives a *block mask* from the element mask at its own block shape: a block of
``S`` is nonempty when any entry in it is True (:func:`block_mask`). Block-sparse FlashAttention
([FA]_, Section 3.3, Algorithm 5) visits only the nonempty blocks; inside a nonempty block that
is only partly True, the masked scores are set to ``-inf`` in the cache.

What the mask costs in I/O: nothing
-----------------------------------
The mask is part of the problem, not data the algorithm moves: it decides which entries of
``S`` exist, that is which vertices the computation graph of masked attention has (a masked
product ``q_i . k_j`` is simply not in the graph). An algorithm for a given mask is specialised
to it, as block-sparse FlashAttention is: [FA]_ takes the block-sparsity mask as predefined,
and its Proposition 4 counts ``Theta(N d + N^2 d^2 s / M)`` accesses of ``Q, K, V, O`` and the
statistics, for a fraction ``s`` of nonempty blocks, nothing for the mask. So in ioattn neither
the block structure (which blocks to visit) nor the element mask inside a partly filled block
(which scores to set to ``-inf``) costs any I/O, and ``io_cost(..., mask=mask)`` counts exactly
what ``run(..., mask=mask)`` moves on that basis. For the masks used in practice this is also
what kernels do: a causal or sliding-window mask is computed from the indices ``i, j`` and never
stored. (A model that stored an arbitrary element mask in slow memory would add, at most, one
read of every partly filled block per visit; ioattn does not count that.)

Constructors: :func:`causal`, :func:`sliding_window`, :func:`from_blocks`, :func:`block_sparse`.
:func:`as_mask` validates (a boolean ``(N, N)`` array, else a ``ValueError`` that says what is
wrong). :class:`Mask` is the validated, immutable form an algorithm's plan carries.

References
----------
.. [FA] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, "FlashAttention: fast and memory-efficient
   exact attention with IO-awareness", NeurIPS 2022, Section 3.3 (block-sparse FlashAttention),
   Algorithm 5 and Proposition 4 (its I/O).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ._validate import as_count

__all__ = ["Blocks", "Mask", "as_mask", "block_mask", "block_sizes", "block_sparse", "causal",
           "from_blocks", "sliding_window"]


def as_mask(mask, N: int | None = None) -> np.ndarray:
    """``mask`` checked as an attention mask for ``N`` queries and keys: a read-only boolean
    ``(N, N)`` copy (any square shape when ``N`` is None).

    Raises
    ------
    ValueError
        If ``mask`` is not a boolean array (True = attend) or its shape is not ``(N, N)``.
    """
    if isinstance(mask, Mask):
        mask = mask.array
    try:
        arr = np.asarray(mask)
    except (ValueError, TypeError) as exc:              # ragged nested lists and the like
        raise ValueError(f"mask must be a boolean N x N array: {exc}") from None
    if arr.dtype != np.bool_:
        hint = " (for 0/1 values, pass mask.astype(bool))" if arr.dtype.kind in "iuf" else ""
        raise ValueError(f"mask must be a boolean array (True = attend), got dtype {arr.dtype}"
                         + hint)
    if N is None and (arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.size == 0):
        raise ValueError(f"mask must be a square N x N array, got shape {arr.shape}")
    if N is not None and arr.shape != (N, N):
        raise ValueError(f"mask must have shape (N, N) = ({N}, {N}), got {arr.shape}")
    out = arr.copy()
    out.flags.writeable = False
    return out


def block_sizes(n: int, b: int) -> np.ndarray:
    """Sizes of the blocks ``range(0, n, b)`` cuts ``n`` into: ``b, ..., b, n - b (T - 1)``."""
    sizes = np.full(-(-n // b), b, dtype=np.int64)
    sizes[-1] = n - b * (len(sizes) - 1)
    return sizes


class Blocks(NamedTuple):
    """A mask at block granularity: ``nonempty[I, J]`` (any entry True) and ``full[I, J]`` (every
    entry True) for row block ``I`` and column block ``J``; ``rows``, ``cols``: block sizes."""

    nonempty: np.ndarray
    full: np.ndarray
    rows: np.ndarray
    cols: np.ndarray


class Mask:
    """A validated attention mask (immutable), with its block structure at any block shape.

    Plans carry a ``Mask``; two are equal when their entries are. Build one from a boolean
    array with ``Mask(array)`` (checked by :func:`as_mask`; ``structured=False`` skips the
    recognition of the causal mask below, for a reference that takes the generic path), or
    the causal mask without an ``N x N`` array with :meth:`Mask.causal`.

    A mask that is the causal mask (lower triangle, ``j <= i``) or its transpose (``j >= i``)
    is recognised (:attr:`triangle`): its blocks are found from the indices instead of from the
    array, which is then built only when asked for, and the algorithms' masked costs use the
    closed forms this structure allows. For row block ``[r0, r1]`` and column block
    ``[c0, c1]`` (inclusive ends) of the lower triangle, the block has a True entry iff
    ``c0 <= r1`` and is all True iff ``c1 <= r0``; the transpose swaps the roles.

    Attributes
    ----------
    array : numpy.ndarray
        The boolean ``(N, N)`` mask, read-only; True = attend.
    excluded : numpy.ndarray
        Its complement (True = masked out), read-only: what a partly filled block sets to
        ``-inf``.
    N : int
    triangle : str or None
        ``"lower"`` for the causal mask, ``"upper"`` for its transpose, else None.
    """

    __slots__ = ("_array", "_excluded", "N", "triangle", "_blocks", "_T", "_hash")

    def __init__(self, mask, N: int | None = None, *, structured: bool = True):
        self._array = as_mask(mask, N)
        self.N = self._array.shape[0]
        self._excluded = None
        self.triangle = _triangle_of(self._array) if structured else None
        self._blocks: dict[tuple[int, int], Blocks] = {}
        self._T: Mask | None = None
        self._hash: int | None = None

    @staticmethod
    def causal(N: int, lower: bool = True) -> Mask:
        """The causal mask of :func:`causal` (``lower=False``: its transpose) as a ``Mask``
        whose blocks come from the indices and whose array is built only on demand: no pass
        over ``N^2`` entries, so fast at any ``N``. Equal to ``Mask(causal(N))``; the same
        object for the same arguments (cached, with its blocks).

        >>> Mask.causal(4) == Mask(causal(4)), Mask.causal(4).T == Mask(causal(4).T)
        (True, True)
        """
        return _triangle(as_count(N, "N"), bool(lower) or N == 1)

    @classmethod
    def _new_triangle(cls, N: int, lower: bool) -> Mask:
        self = cls.__new__(cls)
        self.N = N
        self._array = self._excluded = None
        self.triangle = "lower" if lower else "upper"
        self._blocks, self._T, self._hash = {}, None, None
        return self

    @property
    def array(self) -> np.ndarray:
        if self._array is None:                 # a triangle built from indices: on demand
            a = np.tri(self.N, dtype=bool)
            self._array = a if self.triangle == "lower" else a.T.copy()
            self._array.flags.writeable = False
        return self._array

    @property
    def excluded(self) -> np.ndarray:
        if self._excluded is None:
            self._excluded = ~self.array
            self._excluded.flags.writeable = False
        return self._excluded

    def blocks(self, b_r: int, b_c: int) -> Blocks:
        """The mask at ``b_r x b_c`` block granularity (computed once per block shape)."""
        key = (int(b_r), int(b_c))
        if key not in self._blocks:
            rows = np.arange(0, self.N, key[0])
            cols = np.arange(0, self.N, key[1])
            if self.triangle is not None:       # from the indices: no N x N pass
                r1 = np.minimum(rows + key[0], self.N) - 1
                c1 = np.minimum(cols + key[1], self.N) - 1
                if self.triangle == "lower":                        # True where j <= i
                    nonempty = cols[None, :] <= r1[:, None]
                    full = c1[None, :] <= rows[:, None]
                else:                                               # True where j >= i
                    nonempty = c1[None, :] >= rows[:, None]
                    full = cols[None, :] >= r1[:, None]
            else:
                a = self.array
                nonempty = np.logical_or.reduceat(np.logical_or.reduceat(a, rows, 0), cols, 1)
                full = np.logical_and.reduceat(np.logical_and.reduceat(a, rows, 0), cols, 1)
            for x in (nonempty, full):
                x.flags.writeable = False
            self._blocks[key] = Blocks(nonempty, full, block_sizes(self.N, key[0]),
                                       block_sizes(self.N, key[1]))
        return self._blocks[key]

    @property
    def T(self) -> Mask:
        """The transposed mask (keys by queries), for products that read ``P^T`` or ``dS^T``."""
        if self._T is None:
            if self.triangle is not None:
                self._T = Mask._new_triangle(self.N, self.triangle == "upper" or self.N == 1)
            else:
                self._T = Mask(self.array.T)
            self._T._T = self
        return self._T

    @property
    def attending(self) -> np.ndarray:
        """``attending[i]``: whether query ``i`` attends to any key (its row has a True)."""
        if self.triangle is not None:
            return np.ones(self.N, dtype=bool)          # every row has its diagonal entry
        return self.array.any(axis=1)

    @property
    def density(self) -> float:
        """Fraction of True entries."""
        return self._true() / (self.N * self.N)

    def _true(self) -> int:
        if self.triangle is not None:
            return self.N * (self.N + 1) // 2
        return int(self.array.sum())

    def __eq__(self, other) -> bool:
        if not isinstance(other, Mask):
            return NotImplemented
        if self.N != other.N:
            return False
        if self.triangle is not None and other.triangle is not None:
            return self.triangle == other.triangle
        return bool(np.array_equal(self.array, other.array))

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.N, np.packbits(self.array).tobytes()))
        return self._hash

    def __repr__(self) -> str:
        return f"Mask(N={self.N}, {self._true()} of {self.N * self.N} entries True)"


@functools.lru_cache(maxsize=8)
def _triangle(N: int, lower: bool) -> Mask:
    return Mask._new_triangle(N, lower)


def _triangle_of(a: np.ndarray) -> str | None:
    """``"lower"`` if ``a`` is the causal mask, ``"upper"`` if its transpose, else None."""
    N = a.shape[0]
    if N == 1:
        return "lower" if a[0, 0] else None
    if not (a[0, 0] and a[-1, -1]) or a[0, -1] == a[-1, 0]:     # cheap rejections first
        return None
    tri = np.tri(N, dtype=bool)
    if a[-1, 0] and np.array_equal(a, tri):
        return "lower"
    if a[0, -1] and np.array_equal(a, tri.T):
        return "upper"
    return None


def block_mask(mask, B_r: int, B_c: int) -> np.ndarray:
    """The block mask of ``mask`` for ``B_r x B_c`` blocks: ``[I, J]`` is True when block
    ``(I, J)`` of ``S`` has any True entry, shape ``(ceil(N / B_r), ceil(N / B_c))``."""
    m = mask if isinstance(mask, Mask) else Mask(mask)
    return m.blocks(as_count(B_r, "B_r"), as_count(B_c, "B_c")).nonempty.copy()


def causal(N: int) -> np.ndarray:
    """The causal mask: query ``i`` attends to keys ``j <= i`` (lower triangle, diagonal
    included). Computable from indices, so no algorithm would ever read it: a :class:`Mask`
    made from it (as every algorithm's plan makes) recognises it and finds its blocks from the
    indices; :meth:`Mask.causal` is the same mask without the ``N x N`` array."""
    return np.tri(as_count(N, "N"), dtype=bool)


def sliding_window(N: int, w: int) -> np.ndarray:
    """Causal local attention: query ``i`` attends to the ``w`` keys ``i - w < j <= i``."""
    N, w = as_count(N, "N"), as_count(w, "w")
    i, j = np.ogrid[:N, :N]
    return (j <= i) & (j > i - w)


def from_blocks(blocks, block, N: int) -> np.ndarray:
    """The element mask that is True exactly on the True blocks of ``blocks``.

    Parameters
    ----------
    blocks : array_like of bool, shape ``(ceil(N / b_r), ceil(N / b_c))``
        The block mask; True = the block is attended to.
    block : int or (int, int)
        The block shape ``(b_r, b_c)`` (an int for square blocks).
    N : int
        Sequence length; the last blocks are cut to fit.
    """
    N = as_count(N, "N")
    b_r, b_c = _pair(block)
    arr = np.asarray(blocks)
    shape = (-(-N // b_r), -(-N // b_c))
    if arr.dtype != np.bool_ or arr.shape != shape:
        raise ValueError(f"blocks must be a boolean array of shape {shape} for N = {N} and "
                         f"{b_r}x{b_c} blocks, got dtype {arr.dtype} and shape {arr.shape}")
    return np.repeat(np.repeat(arr, b_r, axis=0), b_c, axis=1)[:N, :N].copy()


def block_sparse(N: int, block, density: float, *, seed: int = 0) -> np.ndarray:
    """A random block-sparse mask: ``round(density T_r T_c)`` of the ``T_r x T_c`` blocks of
    shape ``block`` are True, chosen uniformly (``density`` is the ``s`` of [FA]_ Proposition 4)."""
    N = as_count(N, "N")
    b_r, b_c = _pair(block)
    if not 0 <= density <= 1:
        raise ValueError(f"density must lie in [0, 1], got {density!r}")
    T_r, T_c = -(-N // b_r), -(-N // b_c)
    chosen = np.random.default_rng(seed).permutation(T_r * T_c) < round(density * T_r * T_c)
    return from_blocks(chosen.reshape(T_r, T_c), (b_r, b_c), N)


def _pair(block) -> tuple[int, int]:
    if isinstance(block, (int, np.integer)) and not isinstance(block, bool):
        block = (block, block)
    try:
        b_r, b_c = block
    except (TypeError, ValueError):
        raise TypeError(f"block must be an int or a pair (b_r, b_c), got {block!r}") from None
    return as_count(b_r, "b_r"), as_count(b_c, "b_c")
