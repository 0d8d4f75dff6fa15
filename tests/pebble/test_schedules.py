"""The algorithms' schedules as checked games: the game's I/O equals the memory model's count."""

import pytest

import ioattn
from ioattn.pebble import check_partition, hong_kung_partition
from ioattn.pebble.schedules import EXTRA_PEBBLES, play_schedule, square_tiling_moves

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


def test_unsupported():
    with pytest.raises(ValueError, match="FA2 order"):
        play_schedule("flash", 3, 2, M=100, variant="fa1")
    with pytest.raises(ValueError, match="N >= 2"):
        square_tiling_moves(1, 2, 50)
    with pytest.raises(ValueError, match="no game schedule for 'standard'"):
        play_schedule("standard", 3, 2, M=100)


@pytest.mark.parametrize("name, sizes, M, options", [
    ("matmul", (2, 3, 2), 5, {}), ("flash", (3, 2), 20, {}), ("square_tiling", (3, 2), 20, {}),
    ("square_tiling", (4, 1), 12, {"schedule": "outer"})])
def test_schedule_games_give_hong_kung_partitions(name, sizes, M, options):
    """Hong-Kung's construction on the algorithms' own games: a valid 2M-partition."""
    game = play_schedule(name, *sizes, M=M, **options)
    hk = hong_kung_partition(game)
    check = check_partition(game.graph, hk.parts, 2 * game.M)
    assert check.ok, check.reasons
    assert game.M * (hk.h - 1) <= game.io
