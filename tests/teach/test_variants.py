"""Variants: one per student, the same every time, and each one a fair problem."""

from __future__ import annotations

import math
from math import isqrt

import pytest

import ioattn.teach as teach
from ioattn.algorithms.matmul import matmul_cost
from ioattn.teach.answers import LocalAnswers
from ioattn.teach.assignments import backward, flash, matmul
from ioattn.teach.judge import judge_outputs
from ioattn.teach.variants import check_student_id, student_seed

from .helpers import solution

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


def _run_solution(name: str, p: dict):
    """The honest tile program of ``name`` on the example data of parameters ``p``."""
    spec = teach.get(name)
    ns = {k: v for k, v in p.items()}
    exec(compile(solution(name), name, "exec"), ns)                   # noqa: S102
    inputs, outputs, expected = spec.problem(p, None)
    run = LocalAnswers(ns).run(spec.function, p["M"], inputs, outputs)
    return judge_outputs(run, expected), spec.budget(p)


def test_the_outer_product_program_moves_what_the_budget_proof_counts():
    for student in STUDENTS[:6]:
        p = teach.variant("matmul", student).params
        io, cap = _run_solution("matmul", p)
        b = isqrt(p["M"] + 1) - 1
        assert io.total == 2 * p["m"] * p["n"] * p["k"] // b + p["m"] * p["n"] <= cap


@pytest.mark.parametrize("name", ["flash", "backward"])
def test_a_natural_program_fits_the_budget_at_the_ends_of_the_grid(name):
    """At the least and the greatest M of every (N, d) of the grid, for every mask (and, for
    windows and prefixes, the least and greatest W a variant can have)."""
    module = {"flash": flash, "backward": backward}[name]
    ends = {}
    for N, d, M in module.grid():
        lo, hi = ends.get((N, d), (M, M))
        ends[N, d] = (min(lo, M), max(hi, M))
    runs = 0
    for (N, d), Ms in sorted(ends.items()):
        for M in Ms:
            for mask in (tuple(module.MASKS)):
                Ws = (N // 8, N // 2) if mask in ("window", "prefix") else (0,)
                for W in Ws:
                    p = {"MASK": mask, "W": W, "N": N, "d": d, "M": M, "SEED": 1}
                    io, cap = _run_solution(name, p)
                    assert io.total <= cap, p
                    runs += 1
    assert runs >= 2 * len(ends) * len(module.MASKS)


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
