"""Pictures of the ideas, drawn from the package's own plans, so they cannot drift from them.

Each function takes the objects the rest of ``ioattn`` computes with (a plan of
:func:`ioattn.plan`, a mask of :mod:`ioattn.masks`, a game of :mod:`ioattn.pebble`) and draws
what they say, in the book's style (:mod:`ioattn.plotting`):

- :func:`memory_hierarchy`: slow memory holding ``Q, K, V, O``, the cache of ``M`` entries
  filled with a plan's working set, and the reads and writes between them;
- :func:`flash_tiling`: the ``B_r x B_c`` blocks of the score matrix of a FlashAttention plan,
  numbered in the order its loops visit them (FA2: query blocks outer; FA1: key blocks outer);
- :func:`square_tiles`: the tiles and strips of both products of a square-tiling plan;
- :func:`hong_kung_parts`: a pebble game's moves cut into segments of ``M`` I/Os, and the
  parts of the graph that the segments compute (:func:`ioattn.pebble.hong_kung_partition`);
- :func:`mask_images`: masks as pictures, with the blocks a plan would visit;
- :func:`gpu_hierarchy`: one GPU's memory levels and compute units, every size and rate read
  from :mod:`ioattn.gpus` (:func:`gpu_facts` gives the figures it writes).

Every drawn element that stands for something of the plan carries a ``gid`` (``"block"``,
``"tile"``, ``"part"``, ...), so tests can count what was drawn against the plan.
"""

from __future__ import annotations

from ._validate import as_real
from .algorithms.base import ceil_div
from .masks import Mask, block_sizes
from .plotting import FONT, STYLE, WIDTH, subplots

__all__ = ["memory_hierarchy", "working_set", "flash_tiling", "visit_order", "square_tiles",
           "hong_kung_parts", "mask_images", "gpu_facts", "gpu_hierarchy"]

#: Colours of the arrays, shared by the diagrams.
ARRAY_COLOURS = {"Q": "#9ecae1", "K": "#fdae6b", "V": "#a1d99b", "O": "#bcbddc",
                 "S": "#fcbba1", "stats": "#d9d9d9", "free": "white"}


def _box(ax, x, y, w, h, text=None, *, color="white", gid=None, fontsize=FONT, **kwargs):
    """A labelled rectangle (lower-left corner ``(x, y)``)."""
    from matplotlib.patches import Rectangle

    r = Rectangle((x, y), w, h, facecolor=color, edgecolor="k", lw=1, **kwargs)
    if gid:
        r.set_gid(gid)
    ax.add_patch(r)
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)
    return r


def _bare(ax):
    ax.set_axis_off()
    ax.set_aspect("equal")


# ------------------------------------------------------------------- memory hierarchy
def working_set(plan) -> list[tuple[str, str, int]]:
    """What a plan keeps in the cache at its peak: ``(name, colour key, entries)`` triples.

    The entries add up to ``plan.footprint`` (the closed form of the plan's peak).

    Parameters
    ----------
    plan : FlashPlan or SquareTilingPlan or Plan
        A plan of :func:`ioattn.plan`. FlashAttention's and square tiling's working sets are
        broken down by array; any other plan is one block of ``plan.footprint`` entries.

    Returns
    -------
    list of (str, str, int)
    """
    from .algorithms.flash import FlashPlan
    from .algorithms.square_tiling import SquareTilingPlan

    N, d = plan.N, plan.d
    if isinstance(plan, FlashPlan):
        c = min(plan.B_c, N)
        if plan.variant == "fa2":
            r = min(plan.B_r, N)
            parts = [("Qᵢ", "Q", r * d), ("Oᵢ", "O", r * d), ("mᵢ, ℓᵢ, scratch", "stats", 3 * r),
                     ("Kⱼ", "K", c * d), ("Vⱼ", "V", c * d), ("Sᵢⱼ", "S", r * c)]
        else:
            r = min(plan.R, N)
            parts = [("Kⱼ", "K", c * d), ("Vⱼ", "V", c * d), ("Qᵢ", "Q", r * d),
                     ("Oᵢ", "O", r * d), ("Sᵢⱼ", "S", r * c), ("mᵢ, ℓᵢ and new", "stats", 4 * r)]
    elif isinstance(plan, SquareTilingPlan):
        p1, p2 = plan.phase1, plan.phase2
        r1, c1, L1 = min(p1.b_r, N), min(p1.b_c, N), min(p1.L, d)
        r2, c2, L2 = min(p2.b_r, N), min(p2.b_c, d), min(p2.L, N)
        one = [("S tile", "S", r1 * c1), ("Q strip", "Q", r1 * L1), ("K strip", "K", c1 * L1),
               ("m", "stats", r1)]
        two = [("O tile", "O", r2 * c2), ("S strip", "S", r2 * L2), ("V strip", "V", c2 * L2),
               ("m, ℓ", "stats", 2 * r2)]
        parts = max(one, two, key=lambda p: sum(e for _, _, e in p))
    else:
        parts = [("working set", "stats", plan.footprint)]
    assert sum(e for _, _, e in parts) == plan.footprint
    return parts


def memory_hierarchy(plan, ax=None):
    """The two-level memory with a plan's working set in the cache.

    Slow memory holds ``Q``, ``K``, ``V`` and ``O`` (``N x d`` entries each); the cache holds
    ``M`` entries, drawn as a bar whose segments are the plan's working set
    (:func:`working_set`) to scale, the rest free. Arrows show that data is read from slow
    memory into the cache and written back; all computation happens in the cache.

    Parameters
    ----------
    plan : Plan
        A plan of :func:`ioattn.plan` (its ``N``, ``d``, ``M`` and working set are drawn).
    ax : matplotlib.axes.Axes, optional
        Where to draw (a new figure of :func:`ioattn.plotting.subplots` if None).

    Returns
    -------
    matplotlib.axes.Axes
        Patches with gid ``"array"`` (the four slow arrays), ``"cache"`` (the cache's outline)
        and ``"working set"`` (one per segment), arrows with gid ``"read"`` and ``"write"``.
    """
    if ax is None:
        _, ax = subplots(height=3.4)
    N, d, M = plan.N, plan.d, plan.M
    W = 10.0
    # slow memory: four arrays side by side
    _box(ax, 0, 3.6, W, 2.4, color="#f7f7f7")
    ax.text(0.15, 5.75, "slow memory (HBM): large, far", va="top", fontsize=FONT)
    for k, name in enumerate("QKVO"):
        _box(ax, 0.35 + k * 2.4, 3.85, 2.1, 1.35,
             f"{name}\n{N:,} × {d}", color=ARRAY_COLOURS[name], gid="array")
    # the cache, to scale
    parts = working_set(plan)
    _box(ax, 0, 0, W, 1.1, gid="cache")
    x, small = 0.0, []
    for name, colour, entries in parts:
        w = W * entries / M
        _box(ax, x, 0, w, 1.1, name if w > 1.2 else None, color=ARRAY_COLOURS[colour],
             gid="working set")
        if w <= 1.2:
            small.append(f"{name} {entries:,}")
        x += w
    ax.text(0, -0.2, f"cache: M = {M:,} entries, {plan.footprint:,} in use"
            + (f";\nalso {', '.join(small)}" if small else ""), va="top", fontsize=FONT)
    ax.text(W, 1.3, "fast, small: all arithmetic here", ha="right", fontsize=FONT)
    a = ax.annotate("", xy=(2.2, 1.25), xytext=(2.2, 3.55),
                    arrowprops=dict(arrowstyle="-|>", lw=1.5, color="k"))
    a.set_gid("read")
    ax.text(2.05, 2.4, "read", ha="right", va="center", fontsize=FONT)
    a = ax.annotate("", xy=(3.6, 3.55), xytext=(3.6, 1.25),
                    arrowprops=dict(arrowstyle="-|>", lw=1.5, color="k"))
    a.set_gid("write")
    ax.text(3.75, 2.4, "write", ha="left", va="center", fontsize=FONT)
    ax.text(5.6, 2.6, "I/O = entries read\n+ entries written", va="center", fontsize=FONT)
    ax.set_xlim(-0.1, W + 0.1)
    ax.set_ylim(-1.4, 6.1)
    _bare(ax)
    return ax


# ----------------------------------------------------------------------- FlashAttention
def visit_order(plan) -> list[tuple[int, int]]:
    """The ``(I, J)`` blocks of scores a FlashAttention plan computes, in the order it does.

    FA2 (``plan.variant == "fa2"``): for each query block ``I``, every key block ``J``; FA1:
    for each key block ``J``, every query block ``I``. With a mask only the nonempty blocks
    (``plan.mask.blocks(B_r, B_c).nonempty``) are visited.

    Parameters
    ----------
    plan : FlashPlan

    Returns
    -------
    list of (int, int)
    """
    T_r, T_c = ceil_div(plan.N, plan.B_r), ceil_div(plan.N, plan.B_c)
    nonempty = None if plan.mask is None else plan.mask.blocks(plan.B_r, plan.B_c).nonempty
    if plan.variant == "fa2":
        order = [(I, J) for I in range(T_r) for J in range(T_c)]
    else:
        order = [(I, J) for J in range(T_c) for I in range(T_r)]
    return [(I, J) for I, J in order if nonempty is None or nonempty[I, J]]


def flash_tiling(*plans, axes=None):
    """The score matrix of each FlashAttention plan in blocks, numbered in visiting order.

    For each plan, one panel: ``Q`` cut into ``T_r = ceil(N / B_r)`` blocks down the left,
    ``K^T`` cut into ``T_c = ceil(N / B_c)`` blocks along the top, and the ``N x N`` scores in
    ``B_r x B_c`` blocks, each numbered by when the plan computes it (:func:`visit_order`). The
    blocks of the first outer-loop step are shaded: the query block kept in the cache (FA2) or
    the key block (FA1), while the other operand streams past.

    Parameters
    ----------
    *plans : FlashPlan
        Plans of ``ioattn.plan("flash", ...)``, one panel each, stacked.
    axes : list of Axes, optional
        One per plan (a new figure if None).

    Returns
    -------
    list of matplotlib.axes.Axes
        Patches with gid ``"block"`` (one per block of scores drawn, visited or not),
        ``"Q block"`` and ``"K block"``; texts: the visit numbers.
    """
    if axes is None:
        _, axes = subplots(len(plans), height=3.4)
        if len(plans) == 1:
            axes = [axes]
    for ax, plan in zip(axes, plans):
        N, B_r, B_c = plan.N, plan.B_r, plan.B_c
        rows, cols = block_sizes(N, min(B_r, N)), block_sizes(N, min(B_c, N))
        order = {blk: k + 1 for k, blk in enumerate(visit_order(plan))}
        first = visit_order(plan)[0]
        g = 0.12 * N                                  # gap between the operands and S
        y0 = 0
        for I, r in enumerate(rows):
            _box(ax, -g - 0.18 * N, -(y0 + r), 0.18 * N, r, f"Q{I + 1}",
                 color=ARRAY_COLOURS["Q"], gid="Q block")
            x0 = 0
            for J, c in enumerate(cols):
                held = (I == first[0]) if plan.variant == "fa2" else (J == first[1])
                visited = (I, J) in order
                _box(ax, x0, -(y0 + r), c, r, str(order[I, J]) if visited else None,
                     color=ARRAY_COLOURS["S"] if held and visited else
                     ("white" if visited else "#eeeeee"), gid="block")
                if I == 0:
                    _box(ax, x0, g, c, 0.18 * N, f"K{J + 1}", color=ARRAY_COLOURS["K"],
                         gid="K block")
                x0 += c
            y0 += r
        outer = "query blocks" if plan.variant == "fa2" else "key blocks"
        ax.set_title(f"{plan.variant.upper()}: outer loop over {outer}, "
                     f"$B_r = {B_r}$, $B_c = {B_c}$", fontsize=FONT)
        ax.set_xlim(-g - 0.2 * N, N + 0.02 * N)
        ax.set_ylim(-N - 0.02 * N, g + 0.2 * N)
        _bare(ax)
    return list(axes)


# ------------------------------------------------------------------------ square tiling
def _product(ax, p, names, x, y, scale):
    """Draw ``C = A B`` of MatmulPlan ``p``: A (m x k) left, B (k x n) above, C in tiles."""
    m, k, n = p.m, p.k, p.n
    g = 0.5 * scale
    rows, cols, strips = (block_sizes(m, min(p.b_r, m)), block_sizes(n, min(p.b_c, n)),
                          block_sizes(k, min(p.L, k)))
    A, B, C = names
    # A: m x k, its columns cut into strips of width L
    xa = x - g - k * scale
    cx = xa
    for w in strips:
        _box(ax, cx, y - m * scale, w * scale, m * scale, color=ARRAY_COLOURS[A[0]], gid="strip")
        cx += w * scale
    ax.text(xa - 0.3 * scale, y - m * scale / 2, A, ha="right", va="center", fontsize=FONT)
    # B: k x n, its rows cut into strips of height L
    cy = y + g
    for w in strips:
        _box(ax, x, cy, n * scale, w * scale, color=ARRAY_COLOURS[B[0]])
        cy += w * scale
    ax.text(x + n * scale + 0.3 * scale, y + g + k * scale / 2, B, ha="left", va="center",
            fontsize=FONT)
    # C in tiles
    y0 = 0
    for I, r in enumerate(rows):
        x0 = 0
        for J, c in enumerate(cols):
            _box(ax, x + x0 * scale, y - (y0 + r) * scale, c * scale, r * scale,
                 color=ARRAY_COLOURS[C[0]] if (I, J) == (0, 0) else "white", gid="tile")
            x0 += c
        y0 += r
    ax.text(x + n * scale / 2, y - m * scale - 0.3 * scale,
            f"{C}: {len(rows)} × {len(cols)} tiles of {min(p.b_r, m)} × {min(p.b_c, n)}",
            ha="center", va="top", fontsize=FONT)


def square_tiles(plan, axes=None):
    """The tiles and strips of both products of a square-tiling plan.

    Top: ``S = Q K^T`` (``plan.phase1``), an ``N x N`` matrix in ``b_r x b_c`` tiles, each
    built from a strip of ``Q`` and one of ``K^T`` of width ``L`` at a time. Bottom:
    ``O = exp(S - m) V`` (``plan.phase2``), ``N x d`` in tiles, from strips of ``S`` and ``V``.
    The first tile of each product is shaded.

    Parameters
    ----------
    plan : SquareTilingPlan
        A plan of ``ioattn.plan("square_tiling", ...)``.
    axes : pair of Axes, optional
        Where to draw the two products (a new figure if None).

    Returns
    -------
    list of matplotlib.axes.Axes
        Patches with gid ``"tile"`` (one per output tile) and ``"strip"`` (one per strip of
        the left operand).
    """
    if axes is None:
        _, axes = subplots(2, height=3.2)
    N = plan.N
    scale = 1.0 / N
    for ax, p, names, title in ((axes[0], plan.phase1, ("Q", "Kᵀ", "S"), "phase 1: S = Q Kᵀ"),
                                (axes[1], plan.phase2, ("S", "V", "O"),
                                 "phase 2: O = exp(S − m) V")):
        _product(ax, p, names, 0, 0, scale)
        ax.set_title(f"{title}\n{plan.schedule} schedule, strips {min(p.L, p.k)} wide",
                     fontsize=FONT)
        ax.set_xlim(-0.15 - p.k * scale, p.n * scale + 0.15)
        ax.set_ylim(-p.m * scale - 0.18, 0.1 + p.k * scale)
        _bare(ax)
    return list(axes)


# ------------------------------------------------------------------------- pebble game
def hong_kung_parts(game, ax=None, pos=None):
    """A complete pebble game's Hong-Kung partition: the graph coloured by part, the moves below.

    The moves of ``game`` are cut into segments of ``game.M`` I/O moves
    (:func:`ioattn.pebble.hong_kung_partition`); each vertex is coloured by the segment that
    (last) computes it, inputs grey. Below the graph, the moves in order, each tagged with its
    segment's colour: ``R`` read, ``W`` write, ``C`` compute, ``D`` delete.

    Parameters
    ----------
    game : PebbleGame
        A complete game (``PebbleGame.replay(graph, M, moves)``).
    ax : matplotlib.axes.Axes, optional
        Where to draw (a new figure if None).
    pos : dict, optional
        Vertex -> (x, y); default :func:`ioattn.pebble.view.layout`.

    Returns
    -------
    matplotlib.axes.Axes
        Vertices as patches with gid ``"vertex"`` (inputs) or ``"part k"``; moves as patches
        with gid ``"move"``.
    """
    from matplotlib.patches import Circle, FancyArrowPatch

    from .pebble import hong_kung_partition
    from .pebble.view import label, layout

    hk = hong_kung_partition(game)
    g = game.graph
    if pos is None:
        pos = layout(g)
    if ax is None:
        _, ax = subplots(height=3.8)
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    part_of = {v: k for k, part in enumerate(hk.parts) for v in part}
    xs = [x for x, _ in pos.values()]
    ys = [y for _, y in pos.values()]
    sx = 3.0 / max(1, max(xs) - min(xs))               # graph width: 3 units
    sy = min(0.9, 2.0 / max(1, max(ys) - min(ys)))
    P = {v: ((x - min(xs)) * sx, 1.6 + (y - min(ys)) * sy) for v, (x, y) in pos.items()}
    R = 0.16
    for u in g.order:
        for v in g.children(u):
            ax.add_patch(FancyArrowPatch(P[u], P[v], arrowstyle="-|>", mutation_scale=10,
                                         shrinkA=R * 72, shrinkB=R * 72, lw=1, color="0.4"))
    for v in g.order:
        k = part_of.get(v)
        c = Circle(P[v], R, facecolor="0.85" if k is None else colours[k % len(colours)],
                   edgecolor="k", lw=1, zorder=3)
        c.set_gid("vertex" if k is None else f"part {k}")
        ax.add_patch(c)
        ax.text(P[v][0], P[v][1] - R - 0.05, label(v), ha="center", va="top", fontsize=FONT,
                zorder=4)
    # the moves, a row of cells coloured by segment
    n = len(game.moves)
    w = min(0.32, 4.6 / max(1, n))
    x0 = 0.0
    for s, (a, b) in enumerate(hk.segments):
        for t in range(a, b):
            kind, v = game.moves[t]
            cell = _box(ax, x0 + t * w, 0.4, w, 0.45, kind[0].upper() if w >= 0.2 else None,
                        color=colours[hk.part_segments.index(s) % len(colours)]
                        if s in hk.part_segments else "0.85", gid="move", alpha=0.6)
            cell.set_alpha(0.6)
        ax.text(x0 + (a + b) / 2 * w, 0.3, f"segment {s + 1}", ha="center", va="top",
                fontsize=FONT)
    for k, part in enumerate(hk.parts):
        names = sorted(map(label, part))
        shown = ", ".join(names) if len(names) <= 3 else f"{len(names)} vertices"
        ax.text(3.5, 3.4 - 0.4 * k, f"part {k + 1}: {shown}",
                color=colours[k % len(colours)], fontsize=FONT, va="top")
    ax.set_title(f"M = {hk.M}: {hk.io} I/Os, {len(hk.segments)} segment"
                 f"{'s' if len(hk.segments) > 1 else ''}, {hk.h} part{'s' if hk.h > 1 else ''}",
                 fontsize=FONT)
    ax.set_xlim(-0.3, max(3.4 + 2.6, n * w + 0.2))
    ax.set_ylim(-0.1, max(P[v][1] for v in P) + 0.35)
    _bare(ax)
    return ax


# -------------------------------------------------------------------------------- masks
def mask_images(masks: dict, blocks: dict | None = None, *, columns: int = 2, fig=None,
                height: float = 2.7):
    """Masks as pictures: True (attend) dark, False light, one panel each.

    Parameters
    ----------
    masks : dict
        Title -> mask (a boolean ``N x N`` array or a :class:`~ioattn.masks.Mask`).
    blocks : dict, optional
        Title -> ``(B_r, B_c)``: for that mask, the ``B_r x B_c`` block grid is drawn and the
        nonempty blocks (``Mask.blocks(B_r, B_c).nonempty``, the blocks a plan visits) are
        outlined.
    columns : int
        Panels per row.
    fig : matplotlib.figure.Figure, optional
        Where to draw (a new figure of the book's width if None).
    height : float
        Height of each row of panels in inches, for a new figure (positive).

    Returns
    -------
    list of matplotlib.axes.Axes
        One per mask, in order; each holds one image whose array is the mask, and a patch with
        gid ``"nonempty block"`` per nonempty block.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    from .plotting import use_style

    use_style()
    blocks = blocks or {}
    rows = ceil_div(len(masks), columns)
    if fig is None:
        height = as_real(height, "height", positive=True)
        fig = plt.figure(figsize=(WIDTH, height * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    cmap = ListedColormap(["#f0f0f0", STYLE["flash"]["color"]])
    for ax, (title, m) in zip(axes, masks.items()):
        mask = Mask.of(m)
        a = np.asarray(mask.array)
        N = mask.N
        ax.imshow(a, cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        if N <= 16:                                # every entry visible: grid lines
            for t in np.arange(-0.5, N, 1):
                ax.axhline(t, color="white", lw=0.6)
                ax.axvline(t, color="white", lw=0.6)
        if title in blocks:
            B_r, B_c = blocks[title]
            nonempty = mask.blocks(B_r, B_c).nonempty
            for I in range(nonempty.shape[0]):
                for J in range(nonempty.shape[1]):
                    if nonempty[I, J]:
                        r = Rectangle((J * B_c - 0.5, I * B_r - 0.5), min(B_c, N - J * B_c),
                                      min(B_r, N - I * B_r), fill=False, edgecolor="#d62728",
                                      lw=2, zorder=5)
                        r.set_gid("nonempty block")
                        ax.add_patch(r)
            title = f"{title}\n{int(nonempty.sum())} of {nonempty.size} blocks of {B_r} × {B_c}"
        ax.set_title(title, fontsize=FONT)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("key j", fontsize=FONT)
        ax.set_ylabel("query i", fontsize=FONT)
    for ax in axes[len(masks):]:
        ax.set_axis_off()
    return list(axes[:len(masks)])


# -------------------------------------------------------------------------- one GPU
#: Threads of a warp and banks of shared memory (4 bytes wide each) on every NVIDIA GPU of
#: :data:`ioattn.gpus.GPUS`: ``warpSize`` and "Shared memory has 32 banks ... successive 32-bit
#: words map to successive banks", CUDA C++ Programming Guide, release 12.4, "Compute
#: Capabilities" (sections 5.x to 9.0, Shared Memory).
WARP_THREADS = 32
SHARED_BANKS = 32
BANK_BYTES = 4


def _kb(nbytes: int) -> str:
    """Bytes in KB of 1,024 bytes, as the CUDA documentation counts them."""
    return f"{nbytes / 1024:,.0f} KB" if nbytes % 1024 == 0 else f"{nbytes:,} bytes"


def _tflops(ops: int) -> str:
    """Operations per second in TFLOP/s, as the datasheet prints them (no trailing zeros)."""
    return f"{ops / 10**12:,.1f}".removesuffix(".0") + " TFLOP/s"


def _cell(ax, x, y, w, h, color, gid):
    """A small thin-edged rectangle: one bank, one thread."""
    from matplotlib.patches import Rectangle

    r = Rectangle((x, y), w, h, facecolor=color, edgecolor="k", lw=0.4, gid=gid)
    ax.add_patch(r)
    return r


def gpu_facts(gpu) -> dict[str, str]:
    """The figures of one GPU that :func:`gpu_hierarchy` draws, as its labels print them.

    Parameters
    ----------
    gpu : str or ioattn.gpus.GPU
        A key of :data:`ioattn.gpus.GPUS` (``"H100"``) or one of its values.

    Returns
    -------
    dict of str to str
        ``name``, ``memory`` (the board's memory, from its ``variant``), ``bandwidth`` (GB/s),
        ``registers``, ``shared_per_sm``, ``shared_per_block``, ``fp32`` and ``tensor`` (the
        dense 16-bit tensor-core peak; bfloat16 where the datasheet has one, else float16).
    """
    import re

    from .gpus import GPU, GPUS

    if isinstance(gpu, str):
        if gpu not in GPUS:
            raise ValueError(f"gpu: unknown GPU {gpu!r}; ioattn.gpus has {', '.join(GPUS)}")
        gpu = GPUS[gpu]
    if not isinstance(gpu, GPU):
        raise TypeError(f"gpu must be a key of ioattn.gpus.GPUS or a GPU, got {type(gpu).__name__}")
    memory = re.search(r"(\d+) GB", gpu.variant)
    if memory is None or not gpu.bandwidth or "float32" not in gpu.peak:
        raise ValueError(f"gpu: {gpu.name} has no board memory, bandwidth or FP32 peak recorded")
    sixteen = "bfloat16" if "bfloat16" in gpu.peak else "float16"
    return {
        "name": gpu.name,
        "memory": f"{memory.group(1)} GB",
        "bandwidth": f"{gpu.bandwidth / 10**9:,.0f} GB/s",
        "registers": _kb(gpu.registers_per_sm),
        "register_count": f"{gpu.registers_per_sm // 4:,}",
        "shared_per_sm": _kb(gpu.shared_per_sm),
        "shared_per_block": _kb(gpu.shared_per_block),
        "fp32": _tflops(gpu.peak["float32"]),
        "tensor": _tflops(gpu.peak[sixteen]),
        "tensor_dtype": sixteen,
    }


def gpu_hierarchy(gpu="H100", ax=None):
    """One GPU's memory hierarchy, with its sizes and bandwidth from :data:`ioattn.gpus.GPUS`.

    From the top: the board's global memory (HBM; GDDR6 on a T4), the bandwidth between it and
    the chip, the L2 cache every SM shares, a row of SMs, and one SM opened up: its register
    file, its shared memory cut into :data:`SHARED_BANKS` banks, a warp of :data:`WARP_THREADS`
    threads, and its tensor cores. The chip's FP32 and 16-bit tensor-core peaks are printed
    below.

    Parameters
    ----------
    gpu : str or ioattn.gpus.GPU
        Which GPU (default ``"H100"``, the SXM5 board).
    ax : matplotlib.axes.Axes, optional
        Where to draw (a new figure of the book's width if None).

    Returns
    -------
    matplotlib.axes.Axes
        Patches with gid ``"hbm"``, ``"l2"``, ``"sm"`` (the row, and the opened one),
        ``"registers"``, ``"shared memory"``, ``"bank"`` (one per bank), ``"lane"`` (one per
        thread of the warp) and ``"tensor cores"``; an arrow with gid ``"bandwidth"``.
    """
    facts = gpu_facts(gpu)
    if ax is None:
        _, ax = subplots(height=6.2)
    W, grey = 10.0, "#f7f7f7"
    # HBM, the bandwidth to the chip, L2
    _box(ax, 0, 12.0, W, 1.3, color=grey, gid="hbm")
    ax.text(W / 2, 12.65, f"global memory (off the chip): {facts['memory']}", ha="center",
            va="center", fontsize=FONT)
    a = ax.annotate("", xy=(W / 2, 11.0), xytext=(W / 2, 12.0),
                    arrowprops=dict(arrowstyle="<|-|>", lw=1.5, color="k"))
    a.set_gid("bandwidth")
    ax.text(W / 2 + 0.3, 11.5, facts["bandwidth"], va="center", fontsize=FONT)
    _box(ax, 0, 9.8, W, 1.2, "L2 cache, shared by all SMs", color=grey, gid="l2")
    # a row of SMs; the first one is opened below
    for k in range(5):
        _box(ax, k * 1.7, 8.4, 1.4, 0.9, "SM", color="#deebf7" if k == 0 else "white",
             gid="sm")
    ax.text(5 * 1.7 + 0.5, 8.85, "…", ha="center", va="center", fontsize=FONT)
    ax.plot([0, 0], [8.4, 7.6], color="k", lw=0.8, ls=":")
    ax.plot([1.4, W], [8.4, 7.6], color="k", lw=0.8, ls=":")
    _box(ax, 0, 0, W, 7.6, color="#deebf7", gid="sm")
    ax.text(0.2, 7.3, "one SM (streaming multiprocessor)", va="top", fontsize=FONT)
    # registers and shared memory
    _box(ax, 0.3, 5.45, W - 0.6, 1.1, f"registers: {facts['registers']} "
         f"({facts['register_count']} × 32 bits)", gid="registers")
    _box(ax, 0.3, 3.35, W - 0.6, 1.9, color="white", gid="shared memory")
    ax.text(W / 2, 4.85, f"shared memory: up to {facts['shared_per_sm']}", ha="center",
            va="center", fontsize=FONT)
    step = (W - 1.0) / SHARED_BANKS
    for b in range(SHARED_BANKS):
        _cell(ax, 0.5 + b * step, 3.95, step, 0.45,
              ARRAY_COLOURS["K"] if b % 2 else ARRAY_COLOURS["Q"], "bank")
    ax.text(W / 2, 3.65, f"{SHARED_BANKS} banks, {BANK_BYTES} bytes wide", ha="center",
            va="center", fontsize=FONT)
    # a warp, and the tensor cores
    ax.text(0.3, 2.85, f"a warp: {WARP_THREADS} threads in lockstep", va="center",
            fontsize=FONT)
    for t in range(WARP_THREADS):
        _cell(ax, 0.5 + t * step, 2.05, step, 0.45, ARRAY_COLOURS["V"], "lane")
    _box(ax, 0.3, 0.3, W - 0.6, 1.3, f"tensor cores: small matrix\nproducts in 16 bits",
         color="white", gid="tensor cores")
    ax.text(0, -0.3, f"whole {facts['name']} chip: {facts['fp32']} FP32,\n{facts['tensor']} "
            f"{facts['tensor_dtype']} on the tensor cores", va="top", fontsize=FONT)
    ax.set_xlim(-0.1, W + 0.1)
    ax.set_ylim(-1.6, 13.4)
    _bare(ax)
    return ax
