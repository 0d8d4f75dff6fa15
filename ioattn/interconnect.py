"""The links between GPUs: bandwidth per GPU and direction, and a latency, with their sources.

The time model of :mod:`ioattn.parallel.overlap` charges a message of ``w`` bytes
``alpha + w / B`` seconds. :data:`LINKS` holds ``B`` and ``alpha`` for the links the GPUs of
:mod:`ioattn.gpus` are connected by, and :data:`GPU_LINKS` says which links each GPU has.

Bandwidth. NVIDIA prints the NVLink and PCIe figures of its GPUs as the *total* of both
directions (900 GB/s for the H100's NVLink); a ring sends to one neighbour while it receives
from the other, so what one message gets is one direction, half the printed figure.
InfiniBand is quoted per port and direction (a 400 Gb/s port sends 400 Gb/s while it receives
as much), and the systems below have one port per GPU. ``bandwidth`` is bytes per second per direction, an exact integer
(GB/s = 10^9 bytes/s, Gb/s = 10^9 bits/s); ``printed`` is the figure as the source
prints it.

- ``"PCIe Gen3 x16"`` (T4): NVIDIA, *NVIDIA T4 Tensor Core GPU* datasheet (document 951643),
  system interface x16 PCIe Gen3, interconnect bandwidth 32 GB/s (both directions): 16 GB/s
  each way. (The PCI-SIG's own figure for Gen3 x16 is 8 GT/s x 16 lanes with 128b/130b
  encoding, 15.75 GB/s each way; the datasheet's round figure is kept.)
- ``"NVLink 3"`` (A100 SXM): NVIDIA, *NVIDIA A100 Tensor Core GPU* datasheet (document
  1758950-r4), column "A100 80GB SXM", interconnect NVLink 600 GB/s; the *NVIDIA A100
  Tensor Core GPU Architecture* whitepaper (2020): twelve third-generation links, 600 GB/s
  total: 300 GB/s each way.
- ``"NVLink 4"`` (H100 SXM, H200 SXM): NVIDIA, *NVIDIA H100 Tensor Core GPU* datasheet, column
  "H100 SXM", and *NVIDIA H200 Tensor Core GPU* datasheet, column "H200 SXM", both NVLink
  900 GB/s; the *NVIDIA H100 Tensor Core GPU Architecture* whitepaper (2022):
  eighteen fourth-generation links, 900 GB/s total: 450 GB/s each way.
- ``"InfiniBand HDR"`` (A100, between nodes): NVIDIA, *NVIDIA DGX A100* datasheet,
  networking: eight single-port Mellanox ConnectX-6 VPI adapters, 200 Gb/s HDR InfiniBand, for
  eight GPUs: one 200 Gb/s port per GPU, 25 GB/s each way.
- ``"InfiniBand NDR"`` (H100, H200, between nodes): NVIDIA, *NVIDIA DGX H100* datasheet,
  networking: four OSFP ports serving eight single-port NVIDIA ConnectX-7 VPI adapters,
  400 Gb/s InfiniBand/Ethernet, for eight GPUs (the DGX H200 has the same): one 400 Gb/s port
  per GPU, 50 GB/s each way.

Latency. ``latency_ns`` (``alpha``) is **assumed**, not a datasheet figure: NVIDIA's datasheets
give none for NVLink, and the sub-microsecond port-to-port latencies quoted for InfiniBand
adapters leave out the library and kernel launch that a message between GPUs pays. The values
(5 us for NVLink, 10 us for PCIe and InfiniBand) are typical orders of magnitude of one small
NCCL point-to-point message; pass a measured ``alpha`` to the functions of
:mod:`ioattn.parallel.overlap` where you have one.

>>> LINKS["NVLink 4"].bandwidth, LINKS["InfiniBand NDR"].bandwidth
(450000000000, 50000000000)
>>> GPU_LINKS["H100"]
('NVLink 4', 'InfiniBand NDR')
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from .gpus import GPUS

__all__ = ["GPU_LINKS", "LINKS", "Link", "latency", "link", "links"]

GIGA = 10**9


class Link(NamedTuple):
    """One kind of link: ``bandwidth`` (bytes/s per direction, exact), ``printed`` (as the source
    prints it), ``latency_ns`` (the assumed ``alpha``, nanoseconds), ``within_node`` (True for
    NVLink and PCIe, False for the network), ``source`` and ``latency_source``."""

    name: str
    bandwidth: int
    printed: str
    latency_ns: int
    within_node: bool
    source: str
    latency_source: str


_ASSUMED = ("assumed: a typical order of magnitude of one small NCCL point-to-point message, "
            "not a datasheet figure")

#: The links, by name.
LINKS: dict[str, Link] = {
    "PCIe Gen3 x16": Link(
        "PCIe Gen3 x16", 16 * GIGA, "32 GB/s (both directions)", 10_000, True,
        "NVIDIA, NVIDIA T4 Tensor Core GPU datasheet (document 951643): x16 PCIe Gen3, "
        "interconnect bandwidth 32 GB/s; halved for one direction", _ASSUMED),
    "NVLink 3": Link(
        "NVLink 3", 300 * GIGA, "600 GB/s (both directions)", 5_000, True,
        "NVIDIA, NVIDIA A100 Tensor Core GPU datasheet (document 1758950-r4), column 'A100 "
        "80GB SXM': NVLink 600 GB/s; NVIDIA A100 Tensor Core GPU Architecture (2020): "
        "12 links, 600 GB/s total; halved for one direction", _ASSUMED),
    "NVLink 4": Link(
        "NVLink 4", 450 * GIGA, "900 GB/s (both directions)", 5_000, True,
        "NVIDIA, NVIDIA H100 Tensor Core GPU datasheet, column 'H100 SXM', and NVIDIA H200 "
        "Tensor Core GPU datasheet, column 'H200 SXM': NVLink 900 GB/s; NVIDIA H100 "
        "Tensor Core GPU Architecture (2022): 18 links, 900 GB/s total; halved for one "
        "direction", _ASSUMED),
    "InfiniBand HDR": Link(
        "InfiniBand HDR", 25 * GIGA, "200 Gb/s per port and direction", 10_000, False,
        "NVIDIA, NVIDIA DGX A100 datasheet: eight single-port ConnectX-6 VPI 200 Gb/s HDR "
        "InfiniBand adapters for eight GPUs, one port per GPU", _ASSUMED),
    "InfiniBand NDR": Link(
        "InfiniBand NDR", 50 * GIGA, "400 Gb/s per port and direction", 10_000, False,
        "NVIDIA, NVIDIA DGX H100 datasheet: eight single-port ConnectX-7 VPI 400 Gb/s "
        "InfiniBand/Ethernet adapters for eight GPUs, one port per GPU (the DGX H200 has the "
        "same)", _ASSUMED),
}

#: The links of each GPU of :data:`ioattn.gpus.GPUS`: within a node first, then between nodes
#: (the T4's PCIe boards have no NVLink; their network is not fixed, so none is listed).
GPU_LINKS: dict[str, tuple[str, ...]] = {
    "T4": ("PCIe Gen3 x16",),
    "A100": ("NVLink 3", "InfiniBand HDR"),
    "H100": ("NVLink 4", "InfiniBand NDR"),
    "H200": ("NVLink 4", "InfiniBand NDR"),
}


def link(name: str) -> Link:
    """The :class:`Link` called ``name`` (a key of :data:`LINKS`); a clear error otherwise."""
    if not isinstance(name, str) or name not in LINKS:
        raise ValueError(f"unknown link {name!r}; known: {', '.join(LINKS)}")
    return LINKS[name]


def links(gpu: str) -> tuple[Link, ...]:
    """The links ``gpu`` (a key of :data:`ioattn.gpus.GPUS`) has, within a node first."""
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    return tuple(LINKS[n] for n in GPU_LINKS[gpu])


def latency(name: str) -> Fraction:
    """The assumed ``alpha`` of link ``name`` in seconds, exactly.

    >>> latency("NVLink 4")
    Fraction(1, 200000)
    """
    return Fraction(link(name).latency_ns, 10**9)
