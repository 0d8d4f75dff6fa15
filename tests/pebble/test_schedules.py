"""The algorithms' schedules as checked games: the game's I/O equals the memory model's count."""

import numpy as np
import pytest

import ioattn
from ioattn.pebble import check_partition, hong_kung_partition
from ioattn.pebble.schedules import (
    EXTRA_PEBBLES,
    play_schedule,
    schedule_graph,
    square_tiling_moves,
)

from ..conftest import least_M


@pytest.mark.parametrize("m, k, n, M", [(1, 1, 1, 3), (2, 2, 2, 3), (3, 4, 5, 20),
                                        (5, 1, 3, 10), (4, 6, 2, 40)])
def test_matmul(m, k, n, M):
    game = play_schedule("matmul", m, k, n, M=M)
    model = ioattn.matmul_cost(m, k, n, M)
    assert game.is_complete()
    assert (game.reads, game.writes) == (model.reads, model.writes)
    assert game.peak <= model.peak + EXTRA_PEBBLES


ALGORITHMS = [("flash", {}), ("square_tiling", {}), ("square_tiling", {"schedule": "outer"})]
SIZES = [(2, 1, 30), (5, 2, 20), (7, 3, 60), (6, 2, 200), (9, 1, 12), (4, 3, 16)]
CASES = [(name, options, N, d, M) for name, options in ALGORITHMS for N, d, M in SIZES
         if M >= least_M(name, d, options)]


@pytest.mark.parametrize("name, options, N, d, M", CASES)
def test_attention(name, options, N, d, M):
    model = ioattn.io_cost(name, N, d, M, **options)
    game = play_schedule(name, N, d, M=M, **options)
    assert game.is_complete()
    assert (game.reads, game.writes) == (model.reads, model.writes)
    assert game.peak <= model.peak + EXTRA_PEBBLES


# ------------------------------------------------------------- every algorithm, both passes
#: (name, options, backward): every algorithm, variant and schedule, and fixed blocks that do
#: not divide the tiny N below.
EVERY = [
    ("flash", {}, False),
    ("flash", {"block": (2, 3)}, False),
    ("flash", {"variant": "fa1"}, False),
    ("flash", {"variant": "fa1", "block": (2, 3)}, False),
    ("square_tiling", {}, False),
    ("square_tiling", {"schedule": "outer"}, False),
    ("standard", {}, False),
    ("flash", {}, True),
    ("flash", {"block": (2, 3)}, True),
    ("square_tiling", {}, True),
    ("square_tiling", {"schedule": "outer"}, True),
    ("standard", {}, True),
]
TINY = [(1, 1), (2, 1), (3, 2), (5, 2), (7, 3)]
#: M minus the least feasible M: the smallest cache, a few that cut N unevenly, one holding all.
ABOVE_LEAST = (0, 1, 6, 23, 300)


def _id(name, options, backward):
    return "-".join([name, *map(str, options.values())] + (["backward"] if backward else []))


def _grid(name, options, backward):
    for N, d in TINY:
        if name == "square_tiling" and not backward and N == 1:
            continue                      # refused: l_0 and exp(S_00) are one vertex
        least = ioattn.min_M(name, d, backward=backward, **options)
        for extra in ABOVE_LEAST:
            yield N, d, least + extra


EVERY_CASES = [pytest.param(name, options, backward, N, d, M,
                            id=f"{_id(name, options, backward)}-N{N}-d{d}-M{M}")
               for name, options, backward in EVERY for N, d, M in _grid(name, options, backward)]


def expected_io(name, options, backward, N, d, model):
    """The game's ``(reads, writes)``: the memory model's, except FA1's ``N (d + 2)`` first
    writes of the constants ``O = 0``, ``l = 0``, ``m = -inf``. A constant has no parents, so
    in the game it is an input, blue from the start: writing it would need a red pebble on it,
    hence a read the memory model does not make. The game reads them as the model does."""
    if name == "flash" and not backward and options.get("variant") == "fa1":
        return model.reads, model.writes - N * (d + 2)
    return model.reads, model.writes


@pytest.mark.parametrize("name, options, backward, N, d, M", EVERY_CASES)
def test_every_schedule_is_a_game_with_M_plus_2_pebbles(name, options, backward, N, d, M):
    """Legal and complete with M + 2 red pebbles; the memory model's reads and writes (but for
    FA1's constants, :func:`expected_io`); never more than the model's peak + 2."""
    model = ioattn.io_cost(name, N, d, M, backward=backward, **options)
    game = play_schedule(name, N, d, M=M, backward=backward, **options)
    assert game.M == M + EXTRA_PEBBLES
    assert game.is_complete()
    assert (game.reads, game.writes) == expected_io(name, options, backward, N, d, model)
    assert game.peak <= model.peak + EXTRA_PEBBLES


def test_the_grid_reaches_every_branch_of_the_schedules():
    """The cases above take every path of the schedules: both softmaxes of standard attention,
    FA1 inner steps of fewer rows than a query block, blocks and tiles that do not divide N,
    P read in chunks, row passes in strips."""
    def plans(name, backward=False, **options):
        return [(N, ioattn.plan(name, N, d, M, backward=backward, **options))
                for N, d, M in _grid(name, options, backward)]

    def uneven(N, b):
        return b < N and N % b != 0

    standard = plans("standard")
    assert {p.passes for _, p in standard} == {1, 2}
    assert any(p.passes == 1 and 1 < p.R < N and N % p.R for N, p in standard)
    for options in ({"variant": "fa1"}, {"variant": "fa1", "block": (2, 3)}):
        fa1 = plans("flash", **options)
        assert any(uneven(N, p.B_c) for N, p in fa1)
        assert any(p.R < min(p.B_r, N) for N, p in fa1)
    assert any(uneven(N, p.B_c) for N, p in plans("flash", backward=True))
    assert any(uneven(N, p.B_r) for N, p in plans("flash", backward=True, block=(2, 3)))
    for schedule in ("blocked", "outer"):
        st = plans("square_tiling", backward=True, schedule=schedule)
        assert any(uneven(N, p.P.b_r) or uneven(N, p.P.b_c) for N, p in st)
        assert any(p.D_pass.W < p.d for _, p in st)
    outer = plans("square_tiling", backward=True, schedule="outer")
    assert any(p.h < min(p.dS.b_r, N) for N, p in outer)
    std_bw = plans("standard", backward=True)
    assert any(p.dS_pass.W < N for N, p in std_bw)
    assert any(p.D_pass.W < p.d for _, p in std_bw)
    assert any(1 < p.dS_pass.R < N and N % p.dS_pass.R for N, p in std_bw)


def test_schedule_graphs():
    """Each schedule is played on the graph with the vertices it moves."""
    fa1 = schedule_graph("flash", 3, 2, variant="fa1")
    assert {("m", 0, -1), ("l", 0, -1), ("O", 0, 1, -1)} <= set(fa1.inputs)
    assert fa1.parents(("QK", 0, 1, 0)) == (("tauQ", 0, 0), ("K", 1, 0))
    assert ("P", 2, 1) in schedule_graph("standard", 3, 2)
    assert ("exp", 2, 1) in schedule_graph("flash", 3, 2)          # FA2: the graph of [SY]
    assert ("m", 2, 1) not in schedule_graph("flash", 3, 2)
    flash_bw = schedule_graph("flash", 3, 2, backward=True)
    assert ("tauK", 1, 0) in flash_bw and ("tau_dK", 2, 1) in flash_bw.outputs
    assert ("tauK", 1, 0) not in schedule_graph("standard", 3, 2, backward=True)


def test_fa1_recomputes_only_tau_Q():
    """FA1 rereads Q_i in every key block and scales it again: the only values its game computes
    more than once are tau Q_il, once per key block. (Hong and Kung's construction of
    :func:`~ioattn.pebble.hong_kung_partition` assumes no recomputation, so it is not applied to
    this game; the lower bounds of the book allow recomputation.)"""
    N, d, M = 9, 1, 30
    p = ioattn.plan("flash", N, d, M, variant="fa1")
    game = play_schedule("flash", N, d, M=M, variant="fa1")
    counts = {}
    for kind, v in game.moves:
        if kind == "compute":
            counts[v] = counts.get(v, 0) + 1
    again = {v: k for v, k in counts.items() if k > 1}
    assert again and all(v[0] == "tauQ" for v in again)
    assert set(again.values()) == {-(-N // p.B_c)}


def test_unsupported():
    with pytest.raises(ValueError, match="N >= 2"):
        square_tiling_moves(1, 2, 50)
    with pytest.raises(ValueError, match="no game schedule for 'nope'"):
        play_schedule("nope", 3, 2, M=100)
    with pytest.raises(ValueError, match="no backward game schedule for 'matmul'"):
        play_schedule("matmul", 2, 2, 2, M=10, backward=True)
    with pytest.raises(ValueError, match="dense attention"):
        play_schedule("flash", 3, 2, M=100, mask=np.tril(np.ones((3, 3), dtype=bool)))
    with pytest.raises(ValueError, match="dense attention"):
        play_schedule("standard", 3, 2, M=100, backward=True,
                      mask=np.tril(np.ones((3, 3), dtype=bool)))
    with pytest.raises(ValueError, match="save_lse"):
        play_schedule("standard", 3, 2, M=100, save_lse=True)
    with pytest.raises(ValueError, match="needs a cache of at least"):
        play_schedule("flash", 3, 2, M=5, backward=True)


@pytest.mark.parametrize("name, sizes, M, options", [
    ("matmul", (2, 3, 2), 5, {}), ("flash", (3, 2), 20, {}), ("square_tiling", (3, 2), 20, {}),
    ("square_tiling", (4, 1), 12, {"schedule": "outer"}), ("standard", (3, 2), 4, {}),
    ("standard", (3, 1), 20, {}), ("flash", (3, 1), 12, {"backward": True}),
    ("square_tiling", (3, 1), 8, {"backward": True}), ("standard", (3, 1), 6, {"backward": True})])
def test_schedule_games_give_hong_kung_partitions(name, sizes, M, options):
    """Hong-Kung's construction on the algorithms' own games: a valid 2M-partition."""
    game = play_schedule(name, *sizes, M=M, **options)
    hk = hong_kung_partition(game)
    check = check_partition(game.graph, hk.parts, 2 * game.M)
    assert check.ok, check.reasons
    assert game.M * (hk.h - 1) <= game.io
