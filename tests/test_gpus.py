"""The GPUs' on-chip memory as cache sizes: the datasheet figures and their conversion."""

import pytest

from ioattn.gpus import GPUS, KB, cache_entries, marks


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
