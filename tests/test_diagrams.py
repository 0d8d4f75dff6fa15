"""The diagrams draw what the plans say: counts of drawn blocks, tiles, parts and labels."""

from math import ceil

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("error::UserWarning")   # e.g. a layout that collapsed
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import ioattn  # noqa: E402
from ioattn import diagrams, masks  # noqa: E402
from ioattn.pebble import PebbleGame, hong_kung_partition, matmul_graph, min_io  # noqa: E402
from ioattn.pebble.schedules import play_schedule  # noqa: E402
from ioattn.plotting import problems  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def gids(ax, gid):
    return [p for p in ax.patches if p.get_gid() == gid]


def texts(ax):
    return [t.get_text() for t in ax.texts]


@pytest.mark.parametrize("name, options", [("flash", {}), ("flash", {"variant": "fa1"}),
                                           ("square_tiling", {}),
                                           ("square_tiling", {"schedule": "outer"}),
                                           ("standard", {})])
@pytest.mark.parametrize("N, d, M", [(4096, 64, 2**16), (1000, 32, 5000), (64, 8, 300)])
def test_working_set_adds_up_to_the_footprint(name, options, N, d, M):
    plan = ioattn.plan(name, N, d, M, **options)
    parts = diagrams.working_set(plan)
    assert sum(e for _, _, e in parts) == plan.footprint
    assert all(e >= 0 for _, _, e in parts)


def test_memory_hierarchy_draws_the_plan_to_scale():
    plan = ioattn.plan("flash", 4096, 64, 2**16)
    ax = diagrams.memory_hierarchy(plan)
    assert len(gids(ax, "array")) == 4
    words = " ".join(texts(ax))
    for name in "QKVO":
        assert f"{name}\n4,096 × 64" in texts(ax)
    assert f"M = {plan.M:,} entries" in words and f"{plan.footprint:,} in use" in words
    (cache,) = gids(ax, "cache")
    segments = gids(ax, "working set")
    assert len(segments) == len(diagrams.working_set(plan))
    drawn = sum(p.get_width() for p in segments)
    assert drawn == pytest.approx(cache.get_width() * plan.footprint / plan.M)
    assert {a.get_gid() for a in ax.texts if a.get_gid()} == {"read", "write"}
    assert problems(ax.figure) == []


@pytest.mark.parametrize("N, d, M, block", [(16, 4, 200, (4, 4)), (13, 4, 200, (5, 3)),
                                            (100, 8, 2000, None)])
def test_flash_tiling_numbers_every_block_in_the_plans_loop_order(N, d, M, block):
    opts = {} if block is None else {"block": block}
    fa2 = ioattn.plan("flash", N, d, M, **opts)
    fa1 = ioattn.plan("flash", N, d, M, variant="fa1", **opts)
    top, bottom = diagrams.flash_tiling(fa2, fa1)
    for ax, plan in ((top, fa2), (bottom, fa1)):
        T_r, T_c = ceil(N / plan.B_r), ceil(N / plan.B_c)
        assert len(gids(ax, "block")) == T_r * T_c
        assert len(gids(ax, "Q block")) == T_r and len(gids(ax, "K block")) == T_c
        numbers = [int(t) for t in texts(ax) if t.isdigit()]
        assert sorted(numbers) == list(range(1, T_r * T_c + 1))
        assert f"$B_r = {plan.B_r}$" in ax.get_title() and f"$B_c = {plan.B_c}$" in ax.get_title()
        assert plan.variant.upper() in ax.get_title()
    # the loop orders: FA2 visits a query block's key blocks in a row, FA1 a key block's queries
    assert diagrams.visit_order(fa2)[:2] == [(0, 0), (0, 1)] or ceil(N / fa2.B_c) == 1
    assert diagrams.visit_order(fa1)[:2] == [(0, 0), (1, 0)] or ceil(N / fa1.B_r) == 1


def test_flash_tiling_skips_the_blocks_a_mask_leaves_empty():
    N = 16
    plan = ioattn.plan("flash", N, 4, 200, block=(4, 4), mask=masks.causal(N))
    nonempty = plan.mask.blocks(4, 4).nonempty
    assert len(diagrams.visit_order(plan)) == int(nonempty.sum()) == 10
    (ax,) = diagrams.flash_tiling(plan)
    assert len(gids(ax, "block")) == 16                       # every block drawn
    assert sorted(int(t) for t in texts(ax) if t.isdigit()) == list(range(1, 11))


@pytest.mark.parametrize("schedule", ["blocked", "outer"])
@pytest.mark.parametrize("N, d, M", [(12, 4, 64), (20, 6, 150)])
def test_square_tiles_draws_each_products_tiles_and_strips(schedule, N, d, M):
    plan = ioattn.plan("square_tiling", N, d, M, schedule=schedule)
    top, bottom = diagrams.square_tiles(plan)
    for ax, p in ((top, plan.phase1), (bottom, plan.phase2)):
        tiles = ceil(p.m / min(p.b_r, p.m)) * ceil(p.n / min(p.b_c, p.n))
        assert len(gids(ax, "tile")) == tiles
        assert len(gids(ax, "strip")) == ceil(p.k / min(p.L, p.k))
        assert any(f"{ceil(p.m / min(p.b_r, p.m))} × {ceil(p.n / min(p.b_c, p.n))} tiles" in t
                   for t in texts(ax))
    assert "S = Q Kᵀ" in top.get_title() and "O = exp(S − m) V" in bottom.get_title()
    assert problems(top.figure) == []


@pytest.mark.parametrize("graph, M, moves", [
    (matmul_graph(1, 2, 1), 3, None),
    (matmul_graph(1, 2, 1), 4, None),
    (None, 12, "flash"),
])
def test_hong_kung_parts_colours_each_vertex_by_its_part(graph, M, moves):
    if moves == "flash":
        game = play_schedule("flash", 2, 1, M=M)
    else:
        game = PebbleGame.replay(graph, M, min_io(graph, M, progress=False).moves)
    hk = hong_kung_partition(game)
    ax = diagrams.hong_kung_parts(game)
    g = game.graph
    for k, part in enumerate(hk.parts):
        assert len(gids(ax, f"part {k}")) == len(part)
    assert len(gids(ax, "vertex")) == len(g) - sum(map(len, hk.parts))
    assert len(gids(ax, "move")) == len(game.moves)
    assert sum(t.startswith("segment ") for t in texts(ax)) == len(hk.segments)
    assert f"{hk.io} I/Os" in ax.get_title() and f"{hk.h} part" in ax.get_title()
    assert problems(ax.figure) == []


def test_mask_images_show_the_masks_and_their_nonempty_blocks():
    shown = {"causal": masks.causal(8), "sliding window": masks.sliding_window(8, 3),
             "causal in blocks": masks.causal(8),
             "block-sparse": masks.block_sparse(16, 4, 0.25, seed=3)}
    axes = diagrams.mask_images(shown, {"causal in blocks": (4, 2), "block-sparse": (4, 4)})
    assert len(axes) == 4
    for ax, (title, m) in zip(axes, shown.items()):
        (image,) = ax.images
        assert np.array_equal(np.asarray(image.get_array()), np.asarray(m, dtype=float))
        assert ax.get_title().startswith(title)
    assert len(gids(axes[0], "nonempty block")) == 0
    causal_blocks = masks.Mask(masks.causal(8)).blocks(4, 2).nonempty
    assert len(gids(axes[2], "nonempty block")) == int(causal_blocks.sum()) == 6
    assert len(gids(axes[3], "nonempty block")) == 4       # round(1/4 of 16 blocks)
    assert problems(axes[0].figure) == []


@pytest.mark.parametrize("name", ["T4", "A100", "H100", "H200"])
def test_gpu_hierarchy_prints_the_figures_of_ioattn_gpus(name):
    from ioattn.gpus import GPUS

    gpu = GPUS[name]
    ax = diagrams.gpu_hierarchy(name)
    words = " ".join(texts(ax))
    # every figure drawn is the GPU's record, formatted, and nothing else stands in for it
    assert f"{gpu.bandwidth // 10**9:,} GB/s" in words
    assert f"up to {gpu.shared_per_sm // 1024:,} KB" in words
    registers = f"{gpu.registers_per_sm // 1024} KB ({gpu.registers_per_sm // 4:,} × 32 bits)"
    assert f"registers: {registers}" in words
    assert gpu.variant.split(", ")[1] in words                      # "80 GB"
    fp32 = gpu.peak["float32"] / 10**12
    assert f"{fp32:g} TFLOP/s FP32" in words
    sixteen = "bfloat16" if "bfloat16" in gpu.peak else "float16"
    assert f"{gpu.peak[sixteen] / 10**12:g} TFLOP/s {sixteen}" in words
    assert len(gids(ax, "bank")) == diagrams.SHARED_BANKS == 32
    assert len(gids(ax, "lane")) == diagrams.WARP_THREADS == 32
    assert len(gids(ax, "sm")) == 6                                  # a row of five, one opened
    for gid in ("hbm", "l2", "registers", "shared memory", "tensor cores"):
        assert len(gids(ax, gid)) == 1, gid
    assert [t.get_gid() for t in ax.texts if t.get_gid()] == ["bandwidth"]


def test_gpu_hierarchy_differs_between_gpus_and_keeps_the_books_style():
    from ioattn.plotting import problems

    t4, h100 = (diagrams.gpu_hierarchy(g) for g in ("T4", "H100"))
    assert "320 GB/s" in texts(t4) and "3,350 GB/s" in texts(h100)
    assert "65 TFLOP/s float16" in " ".join(texts(t4))              # the T4 has no bfloat16
    assert problems(h100.figure) == [] and problems(t4.figure) == []


def test_gpu_facts_refuses_what_is_not_a_gpu():
    from ioattn.gpus import GPUS

    with pytest.raises(ValueError, match="gpu: unknown GPU 'V100'"):
        diagrams.gpu_facts("V100")
    with pytest.raises(TypeError, match="gpu must be a key"):
        diagrams.gpu_facts(3)
    bare = GPUS["H100"]._replace(variant="SXM5", bandwidth=0)
    with pytest.raises(ValueError, match="no board memory, bandwidth or FP32 peak"):
        diagrams.gpu_facts(bare)
    assert diagrams.gpu_facts(GPUS["H100"]) == diagrams.gpu_facts("H100")


def test_mask_images_rows_take_the_height_asked_for():
    shown = {"a": masks.causal(4), "b": masks.causal(4), "c": masks.causal(4)}
    axes = diagrams.mask_images(shown, height=2.2)
    assert axes[0].figure.get_size_inches()[1] == pytest.approx(4.4)    # two rows of 2.2 in
    plt.close(axes[0].figure)
    with pytest.raises(ValueError, match="height must be positive"):
        diagrams.mask_images(shown, height=0)
    with pytest.raises(TypeError, match="height must be a number"):
        diagrams.mask_images(shown, height="tall")
