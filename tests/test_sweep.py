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
    assert s.lower == ioattn.bounds.lower_curve(1024, 32, Ms)
    assert s.lower_any == ioattn.bounds.lower_curve(1024, 32, Ms, "any")
    for M, low in zip(Ms, s.lower):                     # the program bound, made monotone
        assert low >= ioattn.bounds.lower_bound(1024, 32, M, program=True)
    assert all(a >= b for a, b in zip(s.lower, s.lower[1:]))
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
    # every change between 512 and 65536, the flip-back included
    assert [(c.M, c.after) for c in s.crossovers] == \
        [(3032, "flash"), (3078, "square_tiling"), (3164, "flash")]
    for c in s.crossovers:
        assert f"crossover at M = {c.M:,} ({c.M / 4096:.3g} d^2): {c.before} -> {c.after}" in text


def test_explorer_curve_set_is_exact():
    """The explorer's data: 3 algorithms x 32 values of M at N = 4096, d = 64."""
    Ms = [2 ** (k / 2) for k in range(4, 36)]
    Ms = sorted({int(round(M)) for M in Ms})
    s = sweep(4096, 64, Ms)
    assert len(s.Ms) == 32
    assert s.totals["flash"][-1] == ioattn.io_cost("flash", 4096, 64, s.Ms[-1]).total


def test_backward_sweep_holds_the_backward_costs_and_bounds():
    Ms = powers_of_two(4, 2 ** 16)
    s = sweep(1024, 32, Ms, backward=True)
    assert s.backward and sorted(s.totals) == ioattn.algorithms(backward=True)
    for name, totals in s.totals.items():
        for M, t in zip(Ms, totals):
            if t is None:
                with pytest.raises(ValueError, match="at least M"):
                    ioattn.io_cost(name, 1024, 32, M, backward=True)
            else:
                assert t == ioattn.io_cost(name, 1024, 32, M, backward=True).total
                if M >= 1024:                               # where every forward runs too
                    assert t > ioattn.io_cost(name, 1024, 32, M).total
    assert s.totals["flash"][Ms.index(128)] is None         # 7d + 4 = 228 > 128 >= 4d + 4
    assert s.lower == ioattn.bounds.lower_curve(1024, 32, Ms, backward=True)
    assert s.lower_any == ioattn.bounds.lower_curve(1024, 32, Ms, "any", backward=True)
    assert s.crossovers == ioattn.bounds.crossovers(1024, 32, Ms[0], Ms[-1], backward=True)
    assert s.table().startswith("I/O of the attention backward pass, N = 1024, d = 32")
    assert not sweep(1024, 32, Ms).backward
    with pytest.raises(TypeError, match="backward must be True or False"):
        sweep(1024, 32, Ms, backward=1)


def test_backward_cheapest_and_table():
    s = sweep(4096, 64, [512, 4096, 65536], names=["flash", "square_tiling"],
              options={"square_tiling": {"schedule": "outer"}}, backward=True)
    assert s.cheapest() == ["square_tiling", "square_tiling", "flash"]
    (c,) = s.crossovers
    assert (c.before, c.after) == ("square_tiling", "flash") and 4096 < c.M < 65536
    assert f"crossover at M = {c.M:,}" in s.table()


def test_plot_sweep_titles_the_direction():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ioattn.plotting import plot_sweep

    for backward, title in [(False, "Exact I/O of attention\nN = 256, d = 16"),
                            (True, "Exact I/O of the attention backward pass\nN = 256, d = 16")]:
        ax = plot_sweep(sweep(256, 16, [64, 256, 1024], backward=backward))
        assert ax.get_title() == title
        plt.close(ax.figure)


def _fields(line: str) -> list[tuple[int, str]]:
    """The fields of a table line (runs of text with less than two spaces inside), each with
    the column where it ends (a trailing ``*`` not counted)."""
    import re

    return [(m.end() - m.group().endswith("*"), m.group())
            for m in re.finditer(r"\S+(?: \S+)*", line)]


@pytest.mark.parametrize("N, d, backward", [(10**9, 16, False), (4096, 64, True)])
def test_table_columns_are_apart_and_aligned(N, d, backward):
    """Counts wider than the names (every row at N = 10^9; M = 4 and 8 of the backward at
    N = 4096) stay two spaces apart, each column right-aligned under its header."""
    s = sweep(N, d, powers_of_two(4, 32 * d * d), backward=backward)
    lines = s.table().splitlines()
    k = next(i for i, line in enumerate(lines) if line.lstrip().startswith("M "))
    head, rule, body = lines[k], lines[k + 1], lines[k + 2:k + 2 + len(s.Ms)]
    ends = [end for end, _ in _fields(head)]
    assert [text for _, text in _fields(head)] == ["M", *sorted(s.totals), "lower bound"]
    assert set(rule) == {"-"} and len(rule) == len(head)
    widest = max(len(f"{t:,}") for ts in s.totals.values() for t in ts if t is not None)
    assert widest > 13                                    # the case that ran together
    for M, line in zip(s.Ms, body):
        fields = _fields(line.replace("   <- d^2", ""))
        assert [end for end, _ in fields] == ends, line
        assert "  " in line and all(line[a - 2:a] == "  " or a < 2 for a in
                                    (end - len(text.rstrip("*")) for end, text in fields))
        cells = [text.rstrip("*") for _, text in fields]
        assert cells[0] == f"{M:,}" and cells[-1] == f"{s.lower[s.Ms.index(M)]:,}"
        for name, cell in zip(sorted(s.totals), cells[1:-1]):
            t = s.totals[name][s.Ms.index(M)]
            assert cell == ("-" if t is None else f"{t:,}")


def test_sweep_refuses_bad_names_options_and_ranges():
    with pytest.raises(TypeError, match="names must be a list of algorithm names"):
        sweep(256, 16, [64], names="flash")               # not read letter by letter
    with pytest.raises(ValueError, match="unknown algorithm 'flsh' \\(did you mean 'flash'\\?\\)"):
        sweep(256, 16, [64], names=["flsh"])
    with pytest.raises(ValueError, match="names is empty"):
        sweep(256, 16, [64], names=[])
    with pytest.raises(ValueError, match="Ms is empty"):
        sweep(256, 16, [])
    with pytest.raises(TypeError, match="Ms must be a sequence of integers"):
        sweep(256, 16, 64)
    with pytest.raises(TypeError, match="Ms must be an integer, got 64.5"):
        sweep(256, 16, [64.5])
    with pytest.raises(ValueError, match="unknown algorithm 'squre_tiling' \\(did you mean"):
        sweep(256, 16, [64], options={"squre_tiling": {"schedule": "outer"}})
    with pytest.raises(TypeError, match="unknown option\\(s\\) colour"):
        sweep(256, 16, [64], options={"flash": {"colour": "red"}})
    with pytest.raises(TypeError, match="options must be a dict"):
        sweep(256, 16, [64], options=[("flash", {})])
    with pytest.raises(TypeError, match="backward must be True or False, got 'yes'"):
        sweep(256, 16, [64], backward="yes")
