"""Split-K, grouped, paged decoding on the GPU (``kernels/flash_decoding.cu``): FlashDecoding's schedule,
counted.

:func:`decode` computes ``softmax(scale Q K^T) V`` for a few query rows per head against a
key/value cache, as a decoding step (``N_q = 1``), a speculative verification or a prefill chunk
does. The schedule is the counted model of :func:`ioattn.decoding.decoding_cost` with
``grouping="stacked"``:

- **grouped heads**: one thread block per key/value head (and split) serves the ``g = H_q /
  H_kv`` query heads of its group, their ``R = g N_q`` rows stacked position-major
  (:func:`ioattn.inference.stack_group`), so that each key/value tile is read once per group;
- **row groups**: when those ``R`` rows do not fit one block's shared memory (:func:`max_rows`),
  they are cut into ``G = ceil(R / B_r)`` row groups of ``B_r`` rows, a block each, and the
  cache is read once per row group (``decoding_cost(..., B_r=B_r)``);
- **paged cache**: the keys and values of sequence ``b`` lie in a pool of pages of ``P_s`` rows,
  page ``p`` (rows ``[p P_s, min((p+1) P_s, N_k))``) at pool page ``table[b, p]``; a tile of
  ``B_c`` keys reads the table entry of every page it overlaps and that page whole;
- **split-K**: the ``T = ceil(N_k / B_c)`` tiles are shared by ``S`` blocks
  (:func:`ioattn.parallel.layout.shares`), each writing a partial ``O`` (normalised by its own
  ``l``), ``m`` and ``l``; a second kernel merges them per row by log-sum-exp (Part IV's merge).

``Q`` and the cache are stored in float32, float16 or bfloat16 (``dtype``); the products, the
partials and ``O`` are float32. Compiled with ``-DIOATTN_COUNT_IO`` (``count_io=True``) the
kernels count the entries they load and store, and the count equals ``decoding_cost(H_q, H_kv,
N_q, N_k, d, B_c=B_c, P_s=P_s, S=S, batch=batch, B_r=B_r)`` (reads and writes). Decoding is
bound by reading the cache, so the products run in float32 on the CUDA cores;
:mod:`benchmarks.decode` predicts the time per step from the counted bytes and each GPU's
bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import as_count, as_flag, suggest
from ..algorithms.base import ceil_div
from ..memory import IOCount
from .api import MAX_D, Launch, _scale, on_backend, to_storage
from .backend import BACKENDS, Backend, get_backend
from .plans import ENTRY, MAX_GRID_Y, SharedMemoryExceeded

__all__ = ["KERNELS", "DecodePlan", "DecodeResult", "decode", "decode_plan", "footprint", "layout",
           "max_rows", "prepare_decode"]

FILE = "flash_decoding.cu"

#: The key-tile sizes tried, largest first, when ``B_c`` is not given.
DEFAULT_B_C = 64

#: Threads of the merge kernel.
MERGE_THREADS = 128

#: Storage precisions of ``Q`` and the cache, and the split kernel of each (the products,
#: partials and ``O`` are float32 in all).
KERNELS = {"float32": "decode_split_f32", "float16": "decode_split_f16",
           "bfloat16": "decode_split_bf16"}


def row_stride(d: int) -> int:
    """The row stride of ``Q_s``, ``K_s``, ``V_s`` in shared memory: ``d + 4`` when ``d`` is a
    multiple of 4 (rows stay 16-byte aligned for vector loads), else ``d + 1``."""
    return d + 4 if d % 4 == 0 else d + 1


def layout(N_k: int, B_c: int, P_s: int | None) -> tuple[int, int]:
    """``(rows, pages)``: the most cache rows and block-table entries any tile reads.

    With pages, tile ``t`` (keys ``[t B_c, min((t+1) B_c, N_k))``) reads pages ``p0 .. p1``
    whole, rows ``[p0 P_s, min((p1+1) P_s, N_k))``; without, its own rows and no entry.
    """
    t = np.arange(ceil_div(N_k, B_c), dtype=np.int64)
    k0 = t * B_c
    k1 = np.minimum(k0 + B_c, N_k)
    if P_s is None:
        return int((k1 - k0).max()), 0
    p0, p1 = k0 // P_s, (k1 - 1) // P_s
    rows = np.minimum((p1 + 1) * P_s, N_k) - p0 * P_s
    return int(rows.max()), int((p1 - p0 + 1).max())


def footprint(R: int, d: int, B_c: int, rows: int, pages: int) -> int:
    """Shared-memory entries (4 bytes each) of a ``decode_split`` block: ``Q_s`` (``R x ld``),
    ``K_s`` and ``V_s`` (``rows x ld`` each), ``O_s`` (``R x d``), the scores (``R x B_c``),
    ``m``, ``l``, ``alpha`` (``R`` each) and the tile's table entries, ``ld`` =
    :func:`row_stride`. ``B_c`` is at most ``N_k`` here (a larger tile holds ``N_k`` keys)."""
    ld = row_stride(d)
    return R * ld + 2 * rows * ld + R * d + R * B_c + 3 * R + pages


def max_rows(d: int, B_c: int, rows: int, pages: int, budget: int) -> int:
    """The most stacked rows ``R = g N_q`` a ``decode_split`` block holds in ``budget`` bytes of
    shared memory, with tiles of ``B_c`` keys (at most ``N_k``) staging ``rows`` cache rows and
    ``pages`` table entries (:func:`layout`); 0 when not even one row fits.

    The kernel maps rows to threads by strided loops (an entry of the scores or of ``O`` a
    thread at a time, a warp a row in the softmax), so no per-thread state grows with ``R``:
    shared memory alone bounds it. :func:`footprint` is ``R (ld + d + B_c + 3)`` for the rows
    (``Q_s``, ``O_s``, the scores, ``m``, ``l``, ``alpha``) plus ``2 rows ld + pages`` for the
    tile, so the limit is the floor of what the tile leaves over the entries of a row.
    """
    ld = row_stride(d)
    left = budget // ENTRY - 2 * rows * ld - pages
    return max(0, left // (ld + d + B_c + 3))


@dataclass(frozen=True)
class DecodePlan:
    """The sizes a decoding launch runs with.

    Attributes
    ----------
    H_q, H_kv, N_q, N_k, d, batch : int
        The problem: ``batch`` sequences, ``H_q`` query heads of ``N_q`` rows, ``H_kv``
        key/value heads of ``N_k`` rows, head dimension ``d``.
    B_c : int
        Keys per tile (as the model counts it; the kernel clips it at ``N_k``).
    P_s : int or None
        Rows per page; None for a contiguous cache.
    S : int
        Splits of the ``T`` tiles (``1 <= S <= T``).
    rows, pages : int
        The most cache rows and table entries a tile reads (:func:`layout`).
    threads : int
        Threads per block of the split kernel.
    B_r : int
        Rows of a row group, ``1 <= B_r <= R`` (omitted: ``R``, one group).
    """

    H_q: int
    H_kv: int
    N_q: int
    N_k: int
    d: int
    B_c: int
    P_s: int | None
    S: int
    batch: int
    rows: int
    pages: int
    threads: int
    B_r: int | None = None

    def __post_init__(self):
        if self.B_r is None:
            object.__setattr__(self, "B_r", self.R)

    @property
    def g(self) -> int:
        """Query heads per key/value head."""
        return self.H_q // self.H_kv

    @property
    def G(self) -> int:
        """Row groups of a unit, ``ceil(R / B_r)``: a block each (per split, head, sequence)."""
        return ceil_div(self.R, self.B_r)

    @property
    def R(self) -> int:
        """Rows of a unit: the ``g`` query heads of a group stacked, ``g N_q``."""
        return self.g * self.N_q

    @property
    def T(self) -> int:
        """Key tiles, ``ceil(N_k / B_c)``."""
        return ceil_div(self.N_k, self.B_c)

    @property
    def footprint(self) -> int:
        """Shared-memory entries of a split block (:func:`footprint`, ``B_r`` rows)."""
        return footprint(self.B_r, self.d, min(self.B_c, self.N_k), self.rows, self.pages)

    @property
    def merge_footprint(self) -> int:
        """Shared-memory entries of a merge block: ``m`` and ``l`` of every split and row of a
        row group."""
        return 2 * self.S * self.B_r if self.S > 1 else 0


def _threads(R: int, d: int) -> int:
    """A warp per 4 entries of ``O_s`` a thread, 2 to 8 warps."""
    return int(min(256, max(64, 32 * ceil_div(R * d, 128))))


def decode_plan(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, *, B_c: int | None = None,
                P_s: int | None = None, S: int = 1, batch: int = 1, budget: int,
                B_r: int | None = None) -> DecodePlan:
    """The plan of a launch, with clear errors; ``budget`` is the shared memory per block
    (bytes). Without ``B_c``: 64 keys, or with pages the largest multiple of ``P_s`` up to 64
    (``P_s`` when the page is larger), halved until the block fits in ``budget``.

    The rows of a block: without ``B_r`` and ``B_c``, all ``R = g N_q`` stacked rows of a group
    when they fit one block (split and merge) at one of the tiles tried; else the fewest row
    groups that fit, ``G = ceil(R / L)`` for ``L`` the most rows a block holds (:func:`max_rows`
    at the tiles tried, and ``budget / (8 S)`` for the merge), balanced as ``B_r = ceil(R /
    G)``, with the largest tile tried that fits ``B_r`` rows. :func:`max_rows` with ``d = 128``
    and a contiguous cache is 61 rows in a Turing block (64 KiB), 157 in an Ampere one (163
    KiB) and 219 in a Hopper one (227 KiB): a chunk of ``N_q = 64`` rows of one head at ``d =
    128`` runs on a T4 in two row groups of 32. A given ``B_r``, or a given ``B_c`` (with all
    ``R`` rows), is checked instead: one that does not fit raises
    :class:`~ioattn.gpu.plans.SharedMemoryExceeded` naming the limit.
    """
    H_q, H_kv, N_q, N_k, d = (as_count(v, n) for v, n in
                              ((H_q, "H_q"), (H_kv, "H_kv"), (N_q, "N_q"), (N_k, "N_k"), (d, "d")))
    batch, S = as_count(batch, "batch"), as_count(S, "S")
    if H_q % H_kv:
        raise ValueError(f"H_kv = {H_kv} must divide H_q = {H_q} (g = H_q / H_kv query heads "
                         "share a key/value head)")
    if d > MAX_D:
        raise ValueError(f"the decoding kernel takes d <= {MAX_D}, got d = {d}")
    if P_s is not None:
        P_s = as_count(P_s, "P_s")
    for n, v in (("batch", batch), ("H_kv", H_kv)):
        if v > MAX_GRID_Y:
            raise ValueError(f"decode: at most {MAX_GRID_Y} {n} per launch (CUDA's limit on "
                             f"gridDim.y and gridDim.z), got {v}")
    g = H_q // H_kv
    R = g * N_q
    choose = B_r is None and B_c is None
    if B_r is not None:
        B_r = as_count(B_r, "B_r")
        if B_r > R:
            raise ValueError(f"B_r = {B_r} rows a row group, but a group has only R = g N_q = "
                             f"{R} stacked rows: take 1 <= B_r <= {R}")

    def tiles(rows):
        """The plans tried for ``rows`` rows a block: the given tile, or the halvings."""
        def make(b_c):
            layout_rows, pages = layout(N_k, b_c, P_s)
            return DecodePlan(H_q, H_kv, N_q, N_k, d, b_c, P_s, S, batch, layout_rows, pages,
                              _threads(rows, d), rows)

        if B_c is not None:
            return [make(as_count(B_c, "B_c"))]
        b_c = DEFAULT_B_C if P_s is None else \
            (P_s * (DEFAULT_B_C // P_s) if P_s <= DEFAULT_B_C else P_s)
        tried = [make(b_c)]
        while ENTRY * tried[-1].footprint > budget and b_c > 1:
            b_c //= 2
            tried.append(make(b_c))
        return tried

    def fits(p):
        return ENTRY * p.footprint <= budget and ENTRY * p.merge_footprint <= budget

    tried = tiles(R if B_r is None else B_r)
    the_plan = tried[-1]
    if choose and not fits(the_plan):
        limit = max(max_rows(d, min(p.B_c, N_k), p.rows, p.pages, budget) for p in tried)
        if S > 1:
            limit = min(limit, budget // (2 * ENTRY * S))
        if limit >= 1:
            G = ceil_div(R, limit)
            tried = tiles(ceil_div(R, G))
            the_plan = tried[-1]
    rows = the_plan.B_r
    if ENTRY * the_plan.footprint > budget:
        limit, best = max((max_rows(d, min(p.B_c, N_k), p.rows, p.pages, budget), -p.B_c)
                          for p in tried)
        tiles_text = f"B_c = {-best}" + ("" if P_s is None else f" and pages of P_s = {P_s}")
        if limit == 0:
            fix = "the cache tile alone fills the block: use a smaller B_c or page size"
        else:
            fix = (f"take row groups of at most B_r = {limit} rows (each reads the cache "
                   f"once)")
            if B_c is not None:
                fix += (" or leave B_c to the plan (or a smaller B_c, which leaves more room "
                        "for rows)")
        who = (f"the g N_q = {g} x {N_q} = {R} stacked rows of a group" if rows == R else
               f"a row group of B_r = {rows} of the g N_q = {g} x {N_q} = {R} stacked rows")
        raise SharedMemoryExceeded(
            f"decode: {who} need {ENTRY * the_plan.footprint} bytes of shared memory per block "
            f"at d = {d} with B_c = {the_plan.B_c}, but the device allows {budget}: the most "
            f"rows a block holds there is R = {limit} (max_rows, with {tiles_text}): {fix}")
    if ENTRY * the_plan.merge_footprint > budget:
        raise SharedMemoryExceeded(
            f"decode: the merge holds m and l of S x B_r = {S} x {rows} rows, "
            f"{ENTRY * the_plan.merge_footprint} bytes of shared memory per block, but the "
            f"device allows {budget}: use at most {budget // (2 * ENTRY * rows)} splits or "
            f"fewer rows a row group")
    if S > the_plan.T:
        raise ValueError(f"S = {S} splits of T = ceil(N_k / B_c) = {the_plan.T} tiles: need "
                         f"1 <= S <= T")
    return the_plan


@dataclass(frozen=True)
class DecodeResult:
    """What :func:`decode` returns (as :class:`ioattn.gpu.GPUResult`).

    Attributes
    ----------
    output : array
        ``O``, the shape of ``Q``, float32, on the backend.
    io : IOCount or None
        With ``count_io=True``: the entries the kernels loaded (``reads``) and stored
        (``writes``), over the whole launch; equal to ``ioattn.decoding.decoding_cost`` for the
        plan. ``peak`` is the split kernel's shared-memory entries per block.
    plan : DecodePlan
    heads : int
        Query heads times sequences, ``batch * H_q``.
    dtype : str
        The storage precision of ``Q`` and the cache.
    """

    output: object
    io: IOCount | None
    plan: DecodePlan
    heads: int = 1
    dtype: str = "float32"
    backend: str = "cuda"
    #: With ``backend="emulator-racecheck"``: the per-site request counts of the last launch.
    accesses: tuple = ()


def _array(x, name, be, *, floating=True):
    """``x`` on the backend (NumPy or CuPy), with its dtype checked."""
    x = on_backend(x, be)
    kind = x.dtype.kind
    if floating and kind != "f":
        raise TypeError(f"{name} must hold floating-point values, got dtype {x.dtype}")
    if not floating and kind not in "iu":
        raise TypeError(f"{name} must hold integer page indices, got dtype {x.dtype}")
    if 0 in x.shape:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)})")
    return x


def _finite(x, name, xp):
    bad = int(x.size - int(xp.count_nonzero(xp.isfinite(x))))
    if bad:
        raise ValueError(f"{name} has {bad} non-finite value(s) (NaN or infinity)")


def prepare_decode(Q, K_pages, V_pages, table, N_k, *, S: int = 1, B_c: int | None = None,
                   causal: bool = False, scale: float | None = None, dtype: str = "float32",
                   count_io: bool = False, backend: str = "cuda",
                   B_r: int | None = None) -> Launch:
    """Everything :func:`decode` does before launching: a :class:`ioattn.gpu.Launch`."""
    causal, count_io = as_flag(causal, "causal"), as_flag(count_io, "count_io")
    if dtype not in KERNELS:
        raise ValueError(f"dtype must be one of {', '.join(KERNELS)}, got {dtype!r}"
                         f"{suggest(dtype, KERNELS)}")
    if not isinstance(backend, Backend) and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"got {backend!r}{suggest(backend, BACKENDS)}")
    if scale is not None:
        _scale(scale, 1)
    N_k = as_count(N_k, "N_k")
    be = get_backend(backend) if isinstance(backend, str) else backend
    xp = be.xp
    Qa = _array(Q, "Q", be)
    if Qa.ndim not in (3, 4):
        raise ValueError(f"Q must be (H_q, N_q, d) or (batch, H_q, N_q, d), got shape "
                         f"{tuple(Qa.shape)}")
    batched = Qa.ndim == 4
    Q4 = Qa if batched else Qa[None]
    batch, H_q, N_q, d = (int(v) for v in Q4.shape)
    Ka, Va = _array(K_pages, "K_pages", be), _array(V_pages, "V_pages", be)
    if tuple(Ka.shape) != tuple(Va.shape):
        raise ValueError(f"K_pages has shape {tuple(Ka.shape)} but V_pages {tuple(Va.shape)}")
    if table is None:                             # a contiguous cache
        want = 4 if batched else 3
        if Ka.ndim != want:
            raise ValueError(f"without a table, K_pages is the contiguous cache "
                             f"{'(batch, H_kv, capacity, d)' if batched else '(H_kv, capacity, d)'}"
                             f", got shape {tuple(Ka.shape)}")
        K4 = Ka if batched else Ka[None]
        if int(K4.shape[0]) != batch:
            raise ValueError(f"the cache holds {K4.shape[0]} sequences but Q {batch}")
        H_kv, capacity, P_s = int(K4.shape[1]), int(K4.shape[2]), None
        if N_k > capacity:
            raise ValueError(f"N_k = {N_k} exceeds the cache's capacity of {capacity} rows")
        Kv, Vv = K4, (Va if batched else Va[None])
        used = None
    else:
        if Ka.ndim != 4:
            raise ValueError(f"K_pages must be the pool (pages, H_kv, P_s, d), got shape "
                             f"{tuple(Ka.shape)}")
        pool, H_kv, P_s = (int(v) for v in Ka.shape[:3])
        tab = _array(table, "table", be, floating=False)
        if tab.ndim != (2 if batched else 1):
            raise ValueError(f"table must be {'(batch, pages_per_sequence)' if batched else '(pages_per_sequence,)'}"  # noqa: E501
                             f" of page indices, got shape {tuple(tab.shape)}")
        tab2 = tab if batched else tab[None]
        if int(tab2.shape[0]) != batch:
            raise ValueError(f"table has rows for {tab2.shape[0]} sequences but Q {batch}")
        needed = ceil_div(N_k, P_s)
        if int(tab2.shape[1]) < needed:
            raise ValueError(f"table has {tab2.shape[1]} entries per sequence, but N_k = {N_k} "
                             f"rows in pages of P_s = {P_s} need {needed}")
        used = tab2[:, :needed]
        lo, hi = int(used.min()), int(used.max())
        if lo < 0 or hi >= pool:
            raise ValueError(f"table's entries must index the pool's {pool} pages: found "
                             f"{lo if lo < 0 else hi}")
        Kv, Vv = Ka, Va
    if int(Kv.shape[-1]) != d:
        raise ValueError(f"Q has d = {d} but the cache's rows have {Kv.shape[-1]}")
    if H_q % H_kv:
        raise ValueError(f"H_kv = {H_kv} must divide H_q = {H_q} (g = H_q / H_kv query heads "
                         "share a key/value head)")
    if causal and N_q > N_k:
        raise ValueError(f"a causal chunk at the end of a cache has at most as many queries as "
                         f"the cache has keys: N_q = {N_q} > N_k = {N_k}")
    the_plan = decode_plan(H_q, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s, S=S, batch=batch,
                           budget=be.shared_memory_per_block, B_r=B_r)
    _finite(Q4, "Q", xp)
    if used is None:
        _finite(Kv[:, :, :N_k], "K_pages", xp), _finite(Vv[:, :, :N_k], "V_pages", xp)
    else:
        # the rows the kernel reads: every row of the full pages, the valid ones of the last
        last = N_k - (used.shape[1] - 1) * P_s
        for x, name in ((Kv, "K_pages"), (Vv, "V_pages")):
            _finite(x[xp.unique(used[:, :-1])], name, xp)
            _finite(x[xp.unique(used[:, -1])][:, :, :last], name, xp)
    tau = _scale(scale, d)
    f32 = xp.float32
    with np.errstate(over="ignore"):             # float16 overflow: refused just below
        Qs, Ks, Vs = (to_storage(xp.ascontiguousarray(x, dtype=f32), dtype, xp)
                      for x in (Q4, Kv, Vv))
    if dtype == "float16":
        for x, name in ((Qs, "Q"), (Ks, "K_pages"), (Vs, "V_pages")):
            if bool(xp.isinf(x).any()):
                raise ValueError(f"{name} has entries beyond float16's range (65504)")
    tables = xp.ascontiguousarray(used, dtype=xp.int32) if used is not None \
        else xp.zeros(1, dtype=xp.int32)
    width = int(tables.shape[1]) if used is not None else 0
    capacity = int(Ks.shape[2]) if used is None else 0
    O = xp.full(Qs.shape, np.nan, dtype=f32)
    p = the_plan
    split = p.S > 1
    part_O = xp.full((batch, H_kv, p.S, p.R, d), np.nan, f32) if split else xp.zeros(1, f32)
    part_ml = xp.full((batch, H_kv, p.S, p.R, 2), np.nan, f32) if split else xp.zeros(1, f32)
    io = xp.zeros(2, dtype=xp.uint64)
    first = be.function(FILE, KERNELS[dtype], count_io)
    second = be.function(FILE, "decode_merge", count_io) if split else None
    B_c_kernel = min(p.B_c, N_k)
    args = (Qs, Ks, Vs, tables, O, part_O, part_ml, np.int32(H_q), np.int32(H_kv),
            np.int32(N_q), np.int32(N_k), np.int32(d), np.int32(B_c_kernel),
            np.int32(P_s or 0), np.int32(width), np.int32(capacity), np.int32(p.rows),
            np.int32(p.pages), np.float32(tau), np.int32(causal), np.int32(p.B_r), io)
    merge_args = (part_O, part_ml, O, np.int32(H_q), np.int32(H_kv), np.int32(N_q),
                  np.int32(d), np.int32(p.S), np.int32(p.B_r), io)

    def go():
        if count_io:
            io.fill(0)
        be.take_accesses()
        first((p.G * p.S, H_kv, batch), (p.threads,), args, shared_mem=ENTRY * p.footprint)
        if split:
            second((p.G, H_kv, batch), (MERGE_THREADS,), merge_args,
                   shared_mem=ENTRY * p.merge_footprint)

    def finish():
        counted = None
        if count_io:
            reads, writes = (int(v) for v in be.to_host(io))
            counted = IOCount(reads=reads, writes=writes, peak=p.footprint)
        out = O if batched else O[0]
        return DecodeResult(out, counted, p, batch * H_q, dtype, be.name, be.take_accesses())

    return Launch(be, go, finish)


def decode(Q, K_pages, V_pages, table, N_k, *, S: int = 1, B_c: int | None = None,
           causal: bool = False, scale: float | None = None, dtype: str = "float32",
           count_io: bool = False, backend: str = "cuda",
           B_r: int | None = None) -> DecodeResult:
    """Attention of a few new query rows against a (paged) key/value cache, split-K and
    grouped: FlashDecoding's schedule (:mod:`ioattn.gpu.flash_decoding`).

    Parameters
    ----------
    Q : array_like
        ``(batch, H_q, N_q, d)`` or, for one sequence, ``(H_q, N_q, d)``; ``d <= 256``. When
        the ``g N_q`` rows of a group are more than :func:`max_rows` for the device's shared
        memory, they run in row groups (``B_r``).
    K_pages, V_pages : array_like
        With a ``table``: the pool ``(pages, H_kv, P_s, d)``, each page holding ``P_s``
        consecutive rows of one sequence for every key/value head. With ``table=None``: the
        contiguous cache ``(batch, H_kv, capacity, d)`` (or ``(H_kv, capacity, d)``), its first
        ``N_k`` rows valid. ``H_kv`` divides ``H_q``.
    table : array_like of int or None
        ``(batch, W)`` (or ``(W,)``): entry ``[b, p]`` is the pool page holding rows
        ``[p P_s, (p+1) P_s)`` of sequence ``b``; ``W >= ceil(N_k / P_s)`` (later entries are
        not read). None for a contiguous cache.
    N_k : int
        Rows of every sequence's cache (the last page may be partly filled).
    S : int
        Splits of the ``T = ceil(N_k / B_c)`` key tiles, ``1 <= S <= T``; ``S > 1`` adds the
        partials and the merge.
    B_c : int, optional
        Keys per tile; by default 64, or a multiple of ``P_s`` (see :func:`decode_plan`).
    causal : bool
        The chunk-causal mask: query row ``i`` sits at position ``N_k - N_q + i`` and sees the
        keys ``j <= N_k - N_q + i`` (:func:`ioattn.masks.causal_chunk`).
    scale : float, optional
        The softmax scale, ``1 / sqrt(d)`` by default.
    dtype : {"float32", "float16", "bfloat16"}
        The precision ``Q`` and the cache are stored in (rounded to nearest even); the kernel
        loads them into shared memory as float32 and computes and writes ``O`` in float32.
        The counts are in entries, the same for every ``dtype``.
    count_io : bool
        Count the entries loaded and stored (``-DIOATTN_COUNT_IO``) into ``io``.
    backend : {"cuda", "emulator", "emulator-racecheck"}
    B_r : int, optional
        Rows of a row group, ``1 <= B_r <= g N_q``, a block each, each reading the cache once;
        by default all ``g N_q`` rows when they fit a block, else the fewest row groups that
        fit (:func:`decode_plan`).

    Returns
    -------
    DecodeResult
        ``output`` of ``Q``'s shape; ``io`` equal to ``ioattn.decoding.decoding_cost(H_q, H_kv,
        N_q, N_k, d, B_c=B_c, P_s=P_s, S=S, batch=batch, B_r=B_r)`` in reads and writes, with
        the plan's ``B_c`` and ``B_r``.

    Raises
    ------
    ValueError, TypeError
        For bad shapes, dtypes, non-finite values, page indices outside the pool, ``S`` outside
        ``1 .. T``, ``B_r`` outside ``1 .. g N_q``, or a plan beyond the shared memory (a given
        ``B_c`` or ``B_r`` with more than :func:`max_rows` rows a block, or a tile that alone
        fills it; :class:`~ioattn.gpu.plans.SharedMemoryExceeded`, a ValueError).
    GPUUnavailableError
        With ``backend="cuda"`` and no usable GPU.
    """
    launch = prepare_decode(Q, K_pages, V_pages, table, N_k, S=S, B_c=B_c, causal=causal,
                            scale=scale, dtype=dtype, count_io=count_io, backend=backend, B_r=B_r)
    launch()
    return launch.result()
