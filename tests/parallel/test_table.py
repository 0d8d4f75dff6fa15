"""The table of the parallel algorithms against P (ioattn.parallel.table)."""

import json
import math

import pytest

from ioattn.parallel import ALGORITHMS, BACKWARD, NAMES, SCHEMES, WITH_BACKWARD, bounds, cost
from ioattn.parallel.table import TITLES, data, fewest, rows, text, why_not

PS = [1, 2, 3, 4, 8, 16, 32]


@pytest.mark.parametrize("heads, causal, backward", [(1, False, False), (16, False, False),
                                                     (16, True, False), (4, False, True),
                                                     (16, True, True)])
def test_rows_are_the_costs_and_the_bounds(heads, causal, backward):
    N, d = 1000, 16
    table = rows(N, d, PS, heads=heads, causal=causal, backward=backward)
    assert [(r["P"], r["name"]) for r in table] == [(P, n) for P in PS for n in ALGORITHMS]
    for r in table:
        P, n = r["P"], r["name"]
        applies = (n in BACKWARD or not backward) and (n != "all_to_all" or heads >= P)
        assert r["applies"] is applies and (r["why"] is None) is applies
        if not applies:
            with pytest.raises(ValueError):
                cost(n, N, d, P, heads=heads, causal=causal, backward=backward)
            assert all(r[k] is None for k in ("traffic", "received", "messages", "memory",
                                              "balance", "bound", "ratio"))
            assert not r["fewest"]
            continue
        c = cost(n, N, d, P, heads=heads, causal=causal, backward=backward)
        assert (r["traffic"], r["received"], r["messages"], r["memory"], r["balance"]) == \
            (c.max_traffic, c.max_received, c.max_messages, c.max_memory, c.balance)
        assert r["bound"] == bounds.lower_bound(N, d, P, c.max_memory, heads=heads,
                                                causal=causal)
        assert r["received"] >= r["bound"]                       # the bound holds
        assert r["ratio"] == (c.max_received / r["bound"] if r["bound"] else None)
    assert {r["traffic"] for r in table if r["P"] == 1 and r["applies"]} == {0}


def test_fewest_is_the_least_traffic():
    table = rows(4096, 64, [1, 2, 4, 8, 16, 64], heads=16)
    for P in (1, 2, 4, 8, 16, 64):
        here = [r for r in table if r["P"] == P and r["applies"]]
        least = min(r["traffic"] for r in here)
        assert {r["name"] for r in here if r["fewest"]} == \
            {r["name"] for r in here if r["traffic"] == least}
    marked = {P: [r["name"] for r in table if r["P"] == P and r["fewest"]] for P in (2, 4, 16, 64)}
    # at P = 2 the rings, all-to-all and the 2 x 1 grid tie; then head parallelism wins while
    # H >= P; then the grid
    assert marked == {2: ["ring", "striped", "all_to_all", "grid"], 4: ["all_to_all"],
                      16: ["all_to_all"], 64: ["grid"]}
    assert fewest({"ring": None, "grid": None}) == []
    c = {n: cost(n, 4096, 64, 64) for n in ("ring", "striped", "grid")}
    assert fewest(c) == ["grid"] and fewest({"ring": c["ring"], "striped": c["striped"]}) == \
        ["ring", "striped"]


def test_why_not():
    assert why_not("ring", 4096, 8) is None
    assert why_not("ring", 4, 8) == "needs N ≥ P"
    assert why_not("grid", 4096, 8, backward=True) is None
    assert why_not("all_to_all", 4096, 8, heads=4) == "needs H ≥ P"
    assert why_not("all_to_all", 4096, 8, heads=8) is None
    with pytest.raises(ValueError, match="unknown parallel algorithm 'rng'"):
        why_not("rng", 4096, 8)
    assert set(TITLES) == set(NAMES)
    assert why_not("usp", 4096, 64, heads=16) is None                 # 16 x 4 fits the heads
    assert why_not("zigzag", 4096, 8, backward=True) is None
    assert why_not("all_gather", 4096, 8, backward=True) is None
    assert why_not("usp", 4096, 8, heads=4, backward=True) is None
    assert why_not("usp_zigzag", 4096, 8, heads=4, backward=True) is None
    assert why_not("usp_grid", 4096, 8, heads=4, backward=True) is None
    assert why_not("all_to_all", 4096, 8, heads=8, backward=True) is None
    assert why_not("usp", 4, 8) == "needs N ≥ P"


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="P = 32 > N = 16"):
        rows(16, 4, [2, 32])
    with pytest.raises(TypeError, match="P must be an integer"):
        rows(16, 4, [2.5])
    with pytest.raises(ValueError, match="P must be at least 1"):
        rows(16, 4, [0])
    with pytest.raises(TypeError, match="causal must be True or False"):
        rows(16, 4, [2], causal="yes")
    with pytest.raises(ValueError, match="heads must be at least 1"):
        rows(16, 4, [2], heads=0)


def test_text_shows_every_count():
    N, d, Ps = 4096, 64, [2, 16, 64]
    table = rows(N, d, Ps, heads=16)
    out = text(N, d, Ps, heads=16)
    assert out == text(N, d, Ps, heads=16, table=table)
    assert out.startswith("Attention on P processors: N = 4,096, d = 64, H = 16 heads, "
                          "forward pass.")
    lines = out.splitlines()
    for r in table:
        # the line of r: its P is on the first line of its group
        group = next(i for i, line in enumerate(lines) if line[:5].strip() == str(r["P"]))
        line = next(line for line in lines[group:] if line[7:19].strip() == r["name"])
        if not r["applies"]:
            assert line.endswith(f"—   does not apply: {r['why']}")
            continue
        cells = line[19:].split()
        star = cells[0].endswith("*")
        assert star is r["fewest"]
        assert [int(c.rstrip("*").replace(",", "")) for c in cells[:5]] == \
            [r["traffic"], r["received"], r["messages"], r["memory"], math.floor(r["bound"])]
        assert cells[5] == f"{r['ratio']:.2f}"
    causal = text(N, d, [1, 4], heads=16, causal=True, backward=True)
    assert "backward pass, causal mask." in causal and "balance" in causal
    assert "striped      " in causal and "does not apply" not in causal     # all have one


def test_data_round_trips_through_json():
    got = data(512, 16, [1, 2, 8], heads=4, causal=True)
    assert json.loads(json.dumps(got)) == got
    assert got["rows"] == rows(512, 16, [1, 2, 8], heads=4, causal=True)
    assert (got["N"], got["d"], got["heads"], got["causal"], got["backward"], got["Ps"]) == \
        (512, 16, 4, True, False, [1, 2, 8])


def test_columns_stay_apart_at_any_size():
    # counts of thirteen digits and more: every cell is its own field and the columns line up
    for N, Ps, heads in ((10**9, [2, 16], 16), (4096, [2, 8], 1)):
        out = text(N, 64, Ps, heads=heads, causal=True)
        table = rows(N, 64, Ps, heads=heads, causal=True)
        lines = [line for line in out.splitlines()[4:] if "does not apply" not in line]
        applying = [r for r in table if r["applies"]]
        assert len(lines) == len(applying)
        for line, r in zip(lines, applying):
            fields = line.split()
            fields = fields[1:] if fields[0].isdigit() else fields
            assert fields[0] == r["name"]
            assert int(fields[1].rstrip("*").replace(",", "")) == r["traffic"]
            assert int(fields[2].replace(",", "")) == r["received"]
            assert int(fields[4].replace(",", "")) == r["memory"]
        ends = {len(line) for line in lines}
        assert len(ends) == 1, "the last column is not aligned"


@pytest.mark.parametrize("heads, causal, backward", [(4, False, False), (16, True, False),
                                                     (2, True, True)])
def test_rows_of_the_schemes_run_in_practice(heads, causal, backward):
    N, d = 1000, 16
    table = rows(N, d, PS, heads=heads, causal=causal, backward=backward, names=NAMES)
    assert [(r["P"], r["name"]) for r in table] == [(P, n) for P in PS for n in NAMES]
    # the four keep the rows they have without the schemes (only the star can move)
    four = rows(N, d, PS, heads=heads, causal=causal, backward=backward)
    strip = [{k: v for k, v in r.items() if k != "fewest"} for r in four]
    assert [{k: v for k, v in r.items() if k != "fewest"} for r in table
            if r["name"] in ALGORITHMS] == strip
    for r in table:
        if r["name"] not in SCHEMES:
            continue
        applies = r["name"] in WITH_BACKWARD or not backward
        assert r["applies"] is applies
        if applies:
            c = cost(r["name"], N, d, r["P"], heads=heads, causal=causal, backward=backward)
            assert (r["traffic"], r["received"], r["memory"], r["balance"]) == \
                (c.max_traffic, c.max_received, c.max_memory, c.balance)
            assert r["received"] >= r["bound"]
    if causal and not backward:
        # zigzag ring attention and all-gather balance the causal work; the ring does not
        at8 = {r["name"]: r for r in table if r["P"] == 8}
        assert at8["zigzag"]["balance"] > 0.99 and at8["all_gather"]["balance"] > 0.99
        assert at8["ring"]["balance"] < 0.6
    out = text(N, d, PS, heads=heads, causal=causal, backward=backward, names=NAMES)
    assert all(n in out for n in SCHEMES)


def test_head_groups_have_the_least_traffic_beyond_the_heads():
    # H = 16, P = 64: all-to-all does not apply; head groups x grid (16 x (2 x 2)) moves the
    # fewest, then USP (16 x 4, with either ring), both far below the ring and the grid
    table = {r["name"]: r for r in rows(4096, 64, [64], heads=16, names=NAMES)}
    assert [n for n, r in table.items() if r["fewest"]] == ["usp_grid"]
    assert table["usp_grid"]["traffic"] == 1_017_856 < table["usp"]["traffic"] == 1_277_952
    assert table["usp"]["traffic"] == table["usp_zigzag"]["traffic"] < table["grid"]["traffic"]


@pytest.mark.parametrize("names, error, message", [
    (["ring", "tree"], ValueError, "unknown parallel algorithm 'tree'"),
    ([], ValueError, "at least one"),
    (["ring", "ring"], ValueError, "at most once"),
    ("ring", TypeError, "a sequence of algorithm names"),
])
def test_bad_names_are_refused(names, error, message):
    with pytest.raises(error, match=message):
        rows(64, 4, [2], names=names)


def test_the_command_lists_the_schemes(capsys):
    from ioattn.cli import main

    assert main(["parallel", "--N", "4096", "--d", "64", "--heads", "16", "--P", "4,64",
                 "--causal", "--schemes"]) == 0
    out = capsys.readouterr().out
    assert out == text(4096, 64, [4, 64], heads=16, causal=True, names=NAMES) + "\n"
    assert main(["parallel", "--N", "4096", "--d", "64", "--P", "4"]) == 0
    plain = capsys.readouterr().out
    assert "zigzag" not in plain and "usp" not in plain and "grid" in plain


def test_overlap_column_is_the_model():
    from ioattn.parallel.costs import RINGS
    from ioattn.parallel.overlap import smallest

    N, d, H = 4096, 32, 4
    table = rows(N, d, [1, 2, 8], heads=H, names=NAMES, overlap="A100", link="InfiniBand HDR")
    for r in table:
        ring = r["name"] in RINGS and r["P"] > 1 and cost(
            r["name"], N, d, r["P"], heads=H).work.shape[1] > 1
        if not ring:
            assert r["hide_n"] is None and r["hides"] is None
            continue
        n = smallest(r["name"], "A100", "InfiniBand HDR", d, r["P"], heads=H).n
        assert r["hide_n"] == n and r["hides"] == (N // r["P"] >= n)
    assert {r["name"] for r in table if r["hide_n"] is not None} == set(RINGS)   # usp: 4 x 2
    # the link defaults to the one within a node; without overlap, nothing is added
    default = rows(N, d, [8], heads=H, overlap="A100")
    assert default[0]["hide_n"] == smallest("ring", "A100", "NVLink 3", d, 8, heads=H).n
    assert all(r["hide_n"] is None for r in rows(N, d, [8], heads=H))
    assert all(r["hide_n"] is None for r in rows(N, d, [8], heads=H, backward=True,
                                                 overlap="A100"))
    assert "N/P to hide" in text(N, d, [8], heads=H, overlap="A100")
    assert "N/P to hide" not in text(N, d, [8], heads=H)
    assert data(N, d, [8], overlap="H200")["link"] == "NVLink 4"
    with pytest.raises(ValueError, match="unknown GPU"):
        rows(N, d, [8], overlap="V100")
    with pytest.raises(ValueError, match="unknown link"):
        rows(N, d, [8], overlap="T4", link="NVLink 9")
