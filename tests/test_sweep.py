"""Sweeps: the table and curves the CLI, the book and the explorer draw."""

import pytest

import ioattn
from ioattn.sweep import powers_of_two, sweep


def test_powers_of_two():
    assert powers_of_two(4, 64) == [4, 8, 16, 32, 64]
    assert powers_of_two(5, 63) == [8, 16, 32]
    assert powers_of_two(1, 1) == [1]
    assert powers_of_two(9, 15) == []


def test_sweep_holds_exact_costs_and_bounds():
    Ms = powers_of_two(4, 2 ** 16)
    s = sweep(1024, 32, Ms)
    assert s.Ms == Ms and sorted(s.totals) == ioattn.algorithms()
    for name, totals in s.totals.items():
        for M, t in zip(Ms, totals):
            if t is None:
                with pytest.raises(ValueError, match="at least M"):
                    ioattn.io_cost(name, 1024, 32, M)
            else:
                assert t == ioattn.io_cost(name, 1024, 32, M).total
    assert s.lower == [ioattn.bounds.lower_bound(1024, 32, M) for M in Ms]
    assert s.lower_any == [ioattn.bounds.lower_bound(1024, 32, M, "any") for M in Ms]
    assert s.crossovers == ioattn.bounds.crossovers(1024, 32, Ms[0], Ms[-1])


def test_cheapest_and_table():
    s = sweep(4096, 64, [512, 4096, 65536], names=["flash", "square_tiling"],
              options={"square_tiling": {"schedule": "outer"}})
    assert s.cheapest() == ["square_tiling", "flash", "flash"]
    text = s.table()
    rows = text.splitlines()
    assert "N = 4096, d = 64" in rows[0]
    assert rows[1] == "options: square_tiling (schedule=outer)"
    data = [r for r in rows if r.strip()[:1].isdigit()]
    assert data[0].split()[2].endswith("*") and "<- d^2" in data[1]
    (c,) = s.crossovers
    assert f"crossover at M = {c.M:,} ({c.M / 4096:.3g} d^2): square_tiling -> flash" in text


def test_explorer_curve_set_is_exact():
    """The explorer's data: 3 algorithms x 32 values of M at N = 4096, d = 64."""
    Ms = [2 ** (k / 2) for k in range(4, 36)]
    Ms = sorted({int(round(M)) for M in Ms})
    s = sweep(4096, 64, Ms)
    assert len(s.Ms) == 32
    assert s.totals["flash"][-1] == ioattn.io_cost("flash", 4096, 64, s.Ms[-1]).total
