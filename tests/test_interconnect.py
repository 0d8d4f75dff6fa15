"""The links between GPUs (ioattn.interconnect): bandwidths per direction and assumed latencies."""

from fractions import Fraction

import pytest

from ioattn.gpus import GPUS
from ioattn.interconnect import GPU_LINKS, LINKS, latency, link, links

GIGA = 10**9


def test_bandwidths_are_the_printed_figures_per_direction():
    # NVLink and PCIe are printed as the total of both directions, InfiniBand per direction
    printed_total = {"PCIe Gen3 x16": 32, "NVLink 3": 600, "NVLink 4": 900}
    for name, total in printed_total.items():
        assert LINKS[name].bandwidth * 2 == total * GIGA
        assert f"{total} GB/s (both directions)" == LINKS[name].printed
    for name, gbit in {"InfiniBand HDR": 200, "InfiniBand NDR": 400}.items():
        assert LINKS[name].bandwidth * 8 == gbit * GIGA
        assert LINKS[name].printed.startswith(f"{gbit} Gb/s")
        assert not LINKS[name].within_node
    for name, l in LINKS.items():
        assert l.name == name and isinstance(l.bandwidth, int) and l.bandwidth > 0
        assert l.source.startswith("NVIDIA, ")
        assert l.latency_source.startswith("assumed")        # no datasheet gives alpha


def test_every_gpu_has_its_links():
    assert set(GPU_LINKS) == set(GPUS)
    assert GPU_LINKS["T4"] == ("PCIe Gen3 x16",)
    assert GPU_LINKS["A100"] == ("NVLink 3", "InfiniBand HDR")
    assert GPU_LINKS["H100"] == GPU_LINKS["H200"] == ("NVLink 4", "InfiniBand NDR")
    for gpu in GPUS:
        got = links(gpu)
        assert [l.name for l in got] == list(GPU_LINKS[gpu])
        assert got[0].within_node                         # within a node first
    # the link within a node is faster than the network
    assert links("H100")[0].bandwidth == 9 * links("H100")[1].bandwidth


def test_latency_is_exact():
    assert latency("NVLink 4") == Fraction(5, 10**6)
    assert latency("InfiniBand NDR") == Fraction(1, 10**5)
    assert all(latency(n) > 0 for n in LINKS)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown link 'NVLink 5'"):
        link("NVLink 5")
    with pytest.raises(ValueError, match="unknown GPU 'V100'"):
        links("V100")
