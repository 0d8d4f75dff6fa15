"""The GPUs' on-chip memory as cache sizes, and their datasheet bandwidth and peak throughput."""

from fractions import Fraction

import pytest

from ioattn.gpus import DTYPES, GPU, GPUS, KB, cache_entries, datasheet_table, marks


def test_the_figures_per_compute_capability():
    """The CUDA C++ Programming Guide's per-SM figures, by compute capability."""
    table = {"7.5": (64, 64), "8.0": (164, 163), "9.0": (228, 227)}
    assert {g.name: g.compute_capability for g in GPUS.values()} == \
        {"T4": "7.5", "A100": "8.0", "H100": "9.0", "H200": "9.0"}
    for name, g in GPUS.items():
        assert g.name == name
        per_sm, per_block = table[g.compute_capability]
        assert (g.shared_per_sm, g.shared_per_block) == (per_sm * KB, per_block * KB)
        assert g.registers_per_sm == 65536 * 4                  # 64 K 32-bit registers
        assert g.shared_per_block <= g.shared_per_sm


def test_cache_entries():
    assert cache_entries("T4") == (64 + 256) * KB // 2 == 163840
    assert cache_entries("A100", registers=False) == 164 * KB // 2
    assert cache_entries("H100", 4) == (228 + 256) * KB // 4
    assert cache_entries("H200") == cache_entries("H100")
    for name in GPUS:                  # fp32 halves the entries; registers only add
        assert cache_entries(name, 4) * 2 == cache_entries(name, 2)
        assert cache_entries(name, registers=False) < cache_entries(name)
    with pytest.raises(KeyError, match="unknown GPU 'V100'"):
        cache_entries("V100")
    with pytest.raises(ValueError, match="positive integer"):
        cache_entries("T4", 0)


def test_marks_group_equal_gpus():
    got = marks()
    assert [M for _, M in got] == sorted({cache_entries(n) for n in GPUS})
    assert got[-1] == ("H100, H200", cache_entries("H100"))
    assert [n for names, _ in got for n in names.split(", ")] == list(GPUS)
    assert marks(4, registers=False) == [("T4", 16384), ("A100", 41984), ("H100, H200", 58368)]


# --- datasheet figures (bandwidth, peak, variant, datasheet) ---------------------------------

T, G = 10**12, 10**9


def test_datasheet_figures_exactly():
    """The printed figures, in exact integers: TFLOPS x 10^12, GB/s x 10^9."""
    expect = {
        "T4": ("PCIe, 16 GB", 320 * G, {"float32": 8_100 * G, "float16": 65 * T}),
        "A100": ("SXM4, 80 GB", 2_039 * G,
                 {"float32": 19_500 * G, "float16": 312 * T, "bfloat16": 312 * T}),
        "H100": ("SXM5, 80 GB", 3_350 * G,
                 {"float32": 67 * T, "float16": 989_500 * G, "bfloat16": 989_500 * G}),
        "H200": ("SXM, 141 GB", 4_800 * G,
                 {"float32": 67 * T, "float16": 989_500 * G, "bfloat16": 989_500 * G}),
    }
    assert list(GPUS) == list(expect)
    for name, (variant, bandwidth, peak) in expect.items():
        g = GPUS[name]
        assert (g.variant, g.bandwidth, g.peak) == (variant, bandwidth, peak)


def test_types_and_citations():
    for g in GPUS.values():
        assert isinstance(g.bandwidth, int) and g.bandwidth > 0
        assert isinstance(g.peak, dict) and set(g.peak) <= set(DTYPES)
        assert all(type(v) is int and v > 0 for v in g.peak.values())
        assert "float32" in g.peak and "float16" in g.peak
        assert isinstance(g.variant, str) and " GB" in g.variant
        # a citation: publisher, the document's title with the GPU's name, and a date statement
        assert g.datasheet.startswith("NVIDIA, ") and f"NVIDIA {g.name} " in g.datasheet
        assert "datasheet" in g.datasheet
        assert any(w in g.datasheet for w in ("not established", "undated", "year only"))


def test_dense_is_half_of_the_printed_sparse_figure():
    """The tensor-core peaks are dense: half of each 'with sparsity' figure printed."""
    for g in GPUS.values():
        assert set(g.sparse) <= set(g.peak) - {"float32"}     # FP32 is never sparse
        for dtype, sparse in g.sparse.items():
            assert g.peak[dtype] < sparse and 2 * g.peak[dtype] == sparse
    assert GPUS["H100"].sparse == {"float16": 1_979 * T, "bfloat16": 1_979 * T}
    assert GPUS["A100"].sparse["bfloat16"] == 624 * T
    assert GPUS["T4"].sparse == {}


def test_no_bfloat16_on_a_t4():
    assert "bfloat16" not in GPUS["T4"].peak
    assert all("bfloat16" in GPUS[n].peak for n in ("A100", "H100", "H200"))


def test_ridge_points():
    """peak / bandwidth, in operations per byte: the arithmetic intensity where a roofline
    bends. Tensor-core ridges lie in the hundreds, FP32 ones in the tens, and the H200's faster
    memory lowers the H100's ridge by exactly 3.35 / 4.8."""
    ridge = {(n, dt): Fraction(g.peak[dt], g.bandwidth) for n, g in GPUS.items() for dt in g.peak}
    assert ridge["A100", "bfloat16"] == Fraction(312_000, 2_039)           # 153.0...
    assert round(float(ridge["A100", "bfloat16"]), 1) == 153.0
    assert round(float(ridge["H100", "bfloat16"]), 1) == 295.4
    assert ridge["H200", "float16"] == ridge["H100", "float16"] * Fraction(3_350, 4_800)
    assert ridge["T4", "float16"] == Fraction(65_000, 320)                   # 203.125
    for (name, dtype), r in ridge.items():
        if dtype == "float32":
            assert 9 < r < 26, (name, r)              # 9.6 (A100) to 25.3 (T4)
        else:
            assert 150 < r < 300, (name, dtype, r)
            assert r > 8 * ridge[name, "float32"]      # tensor cores: an order of magnitude


def test_the_documented_table_is_the_data():
    """The module docstring's table is :func:`datasheet_table`'s (checked there by doctest);
    here: it changes when the data change, so the doctest is a real check."""
    import ioattn.gpus as gpus

    assert datasheet_table() in gpus.__doc__
    saved = GPUS["H100"]
    try:
        GPUS["H100"] = saved._replace(peak={**saved.peak, "bfloat16": 1_979 * T})
        assert datasheet_table() not in gpus.__doc__
    finally:
        GPUS["H100"] = saved


def test_old_positional_construction_still_works():
    g = GPU("X", "9.0", 1, 1, 4)
    assert (g.variant, g.bandwidth, g.peak, g.sparse, g.datasheet) == ("", 0, {}, {}, "")
    assert g.on_chip() == 5


# --- the chip figures and the appendix's table ------------------------------------------------

def test_chip_figures():
    """SMs, combined L1/shared memory per SM and L2, as the whitepapers and the CUDA guide give
    them; the L1 array holds the largest shared-memory carve-out."""
    from ioattn.gpus import MB

    expect = {"T4": (40, 96 * KB, 4 * MB), "A100": (108, 192 * KB, 40 * MB),
              "H100": (132, 256 * KB, 50 * MB), "H200": (132, 256 * KB, 50 * MB)}
    for name, (sms, l1, l2) in expect.items():
        g = GPUS[name]
        assert (g.sms, g.l1_per_sm, g.l2) == (sms, l1, l2)
        assert g.shared_per_sm < g.l1_per_sm
        assert g.chip_source and "CUDA C++ Programming Guide" in g.chip_source
    assert MB == 1024 * KB


def test_ridge_is_peak_over_bandwidth():
    from ioattn.gpus import ridge

    assert ridge("H100") == Fraction(989_500, 3_350) == Fraction(19_790, 67)
    assert ridge("A100", "float32", bytes_per_entry=4) == 4 * Fraction(19_500, 2_039)
    assert ridge("H200", "float16", 2) == 2 * ridge("H200", "float16")
    with pytest.raises(ValueError, match="dtype 'bfloat16'.*T4"):
        ridge("T4", "bfloat16")
    with pytest.raises(KeyError, match="unknown GPU"):
        ridge("V100")
    with pytest.raises(ValueError, match="bytes_per_entry"):
        ridge("H100", "float16", 0)


def test_table_rows_are_the_data():
    from ioattn.gpus import ridge, table

    rows = table()
    assert [r["gpu"] for r in rows] == list(GPUS)
    for r in rows:
        g = GPUS[r["gpu"]]
        for key in ("variant", "compute_capability", "sms", "shared_per_sm", "l1_per_sm",
                    "registers_per_sm", "l2", "bandwidth", "peak", "sparse"):
            assert r[key] == getattr(g, key), (r["gpu"], key)
        assert r["ridge"] == {dt: ridge(g.name, dt) for dt in g.peak}
        assert set(r["ridge"]) == set(g.peak)
        assert r["M"] == cache_entries(g.name)
        assert set(r["sources"]) == {"on-chip", "chip", "datasheet"}
        assert r["sources"]["datasheet"] == g.datasheet
        assert r["sources"]["chip"] == g.chip_source
        assert f"compute capability {g.compute_capability}" in r["sources"]["on-chip"]
    # the rows are copies: editing one does not change the data
    rows[0]["peak"]["float32"] = 0
    assert GPUS["T4"].peak["float32"] == 81 * T // 10


def test_l2_bandwidth_documented_or_assumed():
    # the A100 whitepaper's 5120 bytes per clock; the Hoppers assume it; the T4 has none
    a100 = GPUS["A100"]
    assert a100.l2_documented and a100.l2_bandwidth() == 5120 * a100.clock()
    for name in ("H100", "H200"):
        g = GPUS[name]
        assert not g.l2_documented and "assumed" in g.l2_source
        assert g.l2_bandwidth() == Fraction(5120) * g.clock() > g.bandwidth
    assert GPUS["T4"].l2_bandwidth() is None and not GPUS["T4"].l2_documented
