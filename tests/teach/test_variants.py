"""Variants: one per student, the same every time, and each one a fair problem."""

from __future__ import annotations

import math
from math import isqrt

import numpy as np
import pytest

import ioattn.teach as teach
from ioattn.algorithms.matmul import matmul_cost
from ioattn.teach.assignments import backward, crossover, flash, matmul, pebbling
from ioattn.teach.variants import check_student_id, student_seed

from .helpers import master_cells, run_cells

STUDENTS = ["ada", "alan", "grace", "s1234567", "edsger.dijkstra@example.org"]


@pytest.mark.parametrize("name", teach.assignments())
def test_the_same_id_gives_the_same_variant_and_ids_differ(name):
    variants = [teach.variant(name, s).params for s in STUDENTS]
    assert variants == [teach.variant(name, s).params for s in STUDENTS]
    assert len({repr(v) for v in variants}) >= 4
    assert teach.variant(name, "ada", course="2027").params != variants[0]


def test_seeds_depend_on_course_assignment_and_student():
    seeds = {student_seed(a, s, c) for a in ("matmul", "flash") for s in ("ada", "alan")
             for c in ("", "x")}
    assert len(seeds) == 8 and all(0 <= s < 2 ** 63 for s in seeds)


@pytest.mark.parametrize("bad", ["", " ", "a b", "-ada", "x" * 65, "ada;rm", "Ω"])
def test_a_bad_student_id_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="invalid student id"):
        check_student_id(bad)
    with pytest.raises(TypeError):
        check_student_id(42)


@pytest.mark.parametrize("name", teach.assignments())
def test_the_notebook_cell_reads_back_as_the_variant(name):
    v = teach.variant(name, "ada")
    namespace = {}
    exec(v.cell_source(), namespace)                                  # noqa: S102
    assert namespace["STUDENT"] == "ada"
    assert {k: namespace[k] for k in v.params} == v.params


@pytest.mark.parametrize("name, example", [("matmul", matmul.example_inputs),
                                           ("flash", flash.example_inputs),
                                           ("backward", backward.example_inputs)])
def test_the_notebooks_example_inputs_are_the_graders(name, example):
    """The hard-coding check compares with the answer for the notebook's own example inputs:
    the master must make them exactly as the grader does."""
    cells = [c for c in master_cells(name) if "BEGIN TEST CONFIG" not in c][:3]
    ns = run_cells(cells, {"__name__": "submission"})
    made = example(teach.variant(name, "example").params)
    names = {"matmul": ("A", "B"), "flash": ("Q", "K", "V"),
             "backward": ("Q", "K", "V", "O", "dO", "L")}[name]
    made = made if isinstance(made, tuple) else tuple(made[k] for k in names)
    for key, want in zip(names, made):
        np.testing.assert_array_equal(ns[key], want)


def test_matmul_budget_separates_the_schedules_on_every_variant():
    """Over the whole variant range the outer-product schedule with b x b tiles is within
    1.1 (2mnk/sqrt(M) + mn) and the classical three-tile blocking is not."""
    checked = 0
    for b in range(13, 17):
        for M in range(b * b + 2 * b, b * b + 2 * b + b // 2 + 1):
            assert isqrt(M + 1) - 1 == b
            for m in (3 * b, 4 * b, 5 * b):
                for n in (3 * b, 4 * b, 5 * b):
                    for k in range(2 * b, 5 * b + 1):
                        outer = 2 * m * n * k // b + m * n
                        assert matmul.within_budget(outer, m, k, n, M)
                        t = isqrt(M // 3)
                        blocked = k * (m * math.ceil(n / t) + n * math.ceil(m / t)) + m * n
                        assert not matmul.within_budget(blocked, m, k, n, M)
                        checked += 1
    assert checked > 10_000


def test_matmul_budget_is_exact_at_the_edge():
    m, k, n, M = 40, 50, 30, 225                    # sqrt(M) = 15: the budget is an integer
    budget = 11 * (2 * m * n * k // 15 + m * n) // 10
    assert matmul.within_budget(budget, m, k, n, M)
    assert not matmul.within_budget(budget + 1, m, k, n, M)
    assert matmul_cost(m, k, n, M).total > 0


def test_flash_and_backward_grids():
    for grid, cost in ((flash.grid(), flash.budget), (backward.grid(), backward.budget)):
        assert len(grid) > 100
        for N, d, M in grid[::50]:
            assert cost(N, d, M) >= 1


def test_crossover_is_defined_for_every_size_a_variant_can_have():
    for N in crossover.NS[:3]:
        for d in crossover.DS[:3]:
            x = crossover.exact_crossover(N, d)
            assert 4 * d + 4 <= x <= 4 * d * d
            assert 0.7 < x / (crossover.LEADING * d * d) < 1.8


def test_pebbling_variants_have_an_optimal_game_without_recomputation():
    from ioattn.pebble import PebbleGame, check_partition, hong_kung_partition

    for student in STUDENTS:
        p = teach.variant("pebbling", student).params
        g = pebbling.graph_of(p)
        opt = pebbling.optimum(p)
        computes = [v for kind, v in opt.moves if kind == "compute"]
        assert len(computes) == len(set(computes))
        assert opt.io > len(g.inputs) + len(g.outputs)
        hk = hong_kung_partition(PebbleGame.replay(g, p["M"], opt.moves))
        assert check_partition(g, hk.parts, 2 * p["M"]).ok
