"""A few NVIDIA GPUs: on-chip memory as the cache ``M`` of the I/O model, and roofline figures.

The model's cache is the fast memory a computation manages itself. On an NVIDIA GPU that is the
on-chip memory of one streaming multiprocessor (SM): its shared memory and its register file.
:data:`GPUS` holds, per GPU, the compute capability and three sizes in bytes per SM:

- ``shared_per_sm``: the largest shared memory an SM can be configured with (the rest of its
  combined L1/shared-memory array is then L1 cache, which the program does not manage);
- ``shared_per_block``: the largest shared memory one thread block may use (opt-in);
- ``registers_per_sm``: the register file, 65,536 registers of 32 bits.

Sources. The three sizes are those of the GPU's compute capability in NVIDIA, *CUDA C++
Programming Guide*, release 12.4 (March 2024), appendix "Compute Capabilities", table
"Technical Specifications per Compute Capability" ("Maximum amount of shared memory per SM",
"... per thread block", "Number of 32-bit registers per SM"): 64 KB, 64 KB and 64 K for
compute capability 7.5; 164 KB, 163 KB and 64 K for 8.0; 228 KB, 227 KB and 64 K for 9.0
(KB = 1,024 bytes). The compute capability of each GPU is NVIDIA's (the "CUDA GPUs" list of the
CUDA documentation), and the same per-SM figures appear in the architecture whitepapers:
*NVIDIA Turing GPU Architecture* (2018) for the T4, *NVIDIA A100 Tensor Core GPU Architecture*
(2020) and *NVIDIA H100 Tensor Core GPU Architecture* (2022). The H200 is a Hopper GPU of compute
capability 9.0, with the H100's SM and more and faster HBM, so its per-SM figures are the H100's.

Entries. The model counts entries, not bytes: :func:`cache_entries` divides by the size of
one entry, 2 bytes by default (fp16 or bf16, the operands of FlashAttention's kernels;
pass 4 for fp32). The result is an upper estimate of ``M``: the SMs' memory is shared by the
thread blocks running on it at once, a register holds one thread's values, and a kernel keeps
other data too.

>>> cache_entries("H100")                       # (228 KB + 256 KB) / 2 bytes
247808
>>> cache_entries("T4", bytes_per_entry=4, registers=False)
16384
>>> [g for g in GPUS]
['T4', 'A100', 'H100', 'H200']

Datasheet figures. A roofline needs two more numbers per GPU: the memory bandwidth
(``bandwidth``, bytes per second) and the peak arithmetic throughput (``peak``, operations per
second, by dtype). They are the vendor's published figures for one board, ``variant``, exactly
as printed (TB/s = 10^12 bytes/s, TFLOPS = 10^12 operations/s), with the document they come from
in ``datasheet``. ``peak["float32"]`` is the non-tensor FP32 figure; ``peak["float16"]`` and
``peak["bfloat16"]`` are the 16-bit tensor-core figures, **dense**. NVIDIA prints the Hopper
datasheets' tensor-core figures *with sparsity* (2:4 structured sparsity, footnote "with
sparsity"; NVIDIA's H100 and H200 pages add "Specifications are one-half lower without
sparsity"), so the dense figure stored here is one half of the printed one: 1,979 / 2 = 989.5
TFLOPS, which is also 132 SMs x 4,096 operations per clock x 1.83 GHz = 989.4 TFLOPS of the H100
architecture whitepaper. The A100 datasheet prints dense figures with the sparse ones starred
("312 TF | 624 TF*"). The printed sparse figures are kept in ``sparse``. The T4 has no bfloat16
and no sparsity; its float16 figure is the datasheet's "Mixed Precision (FP16/FP32)" one.
:func:`datasheet_table` prints the table below from the data, and this doctest checks that the
table and the data agree:

>>> print(datasheet_table())
GPU   variant      GB/s   float32  float16         bfloat16
T4    PCIe, 16 GB  320    8.1      65              -
A100  SXM4, 80 GB  2,039  19.5     312 (624*)      312 (624*)
H100  SXM5, 80 GB  3,350  67       989.5 (1,979*)  989.5 (1,979*)
H200  SXM, 141 GB  4,800  67       989.5 (1,979*)  989.5 (1,979*)

(Bandwidth in GB/s = 10^9 bytes/s; peaks in TFLOPS = 10^12 operations/s, dense; * as printed,
with sparsity.)

Chip figures. The book's hardware appendix also gives, per GPU, the number of SMs (``sms``),
the combined L1 cache and shared memory of one SM (``l1_per_sm``, bytes: the array of which
``shared_per_sm`` is the largest share a program can manage) and the L2 cache (``l2``, bytes),
with their sources in ``chip_source``. :func:`table` gathers every figure the book uses, one
row per GPU, with its ridge points and the source of each column:

>>> [(r["gpu"], r["sms"], r["l1_per_sm"] // KB, r["l2"] // MB) for r in table()]
[('T4', 40, 96, 4), ('A100', 108, 192, 40), ('H100', 132, 256, 50), ('H200', 132, 256, 50)]
>>> table()[2]["ridge"]["bfloat16"]                 # H100: 989.5 TFLOPS / 3.35 TB/s
Fraction(19790, 67)

``l1_per_sm`` is the CUDA C++ Programming Guide's "Unified data cache size per SM" of the
compute capability (same table as above): 96 KB for 7.5, 192 KB for 8.0, 256 KB for 9.0. The SM
counts and L2 sizes are the architecture whitepapers' for the board of ``variant`` (MB =
1,024 KB): 108 SMs and 40 MB for the A100 (*NVIDIA A100 Tensor Core GPU Architecture*), 132 SMs
and 50 MB for the H100 SXM5 (*NVIDIA H100 Tensor Core GPU Architecture*). The T4's 40 SMs follow
from its datasheet's 2,560 CUDA cores and 320 tensor cores at 64 and 8 per Turing SM (*NVIDIA
Turing GPU Architecture*); its 4 MB of L2 is the whitepaper's figure for the TU104, the chip
of the T4. The H200 datasheet prints neither figure; the H200's are the H100 SXM5's, whose
GH100 configuration it shares.

Rates per SM. The three-level prediction of :mod:`ioattn.gpu.predict` needs, per GPU, the
dense 16-bit tensor-core operations one SM does per clock (``tensor_ops_per_clock``), the most
resident threads and blocks per SM (``max_threads_per_sm``, ``max_blocks_per_sm``) and the
shared memory's bandwidth, :data:`SHARED_BYTES_PER_CLOCK` per SM. Their sources, in
``rates_source``: the tensor-core rates are the architecture whitepapers' per-SM figures (Turing:
8 tensor cores per SM of 64 FP16 multiply-adds per clock, 1,024 operations; A100: 4 tensor cores
of 256 dense FP16 multiply-adds, "1024 dense FP16/FP32 FMA operations per clock" per SM, 2,048
operations; H100: twice the A100 SM's rate clock for clock, 4,096 operations), and the clock is
the one they imply, ``peak["float16"] / (sms * tensor_ops_per_clock)`` (:meth:`GPU.clock`):

>>> [f"{float(GPUS[g].clock()) / 1e9:.3f}" for g in GPUS]
['1.587', '1.411', '1.830', '1.830']

close to the whitepapers' boost clocks (1,590 MHz for the T4, 1,410 MHz for the A100, and the
1.83 GHz of the H100 computation above); the H200's is inferred the same way, its datasheet
printing no clock. The resident limits are the CUDA C++ Programming Guide 12.4's table
"Technical Specifications per Compute Capability" ("Maximum number of resident blocks per SM":
16, 32, 32; "... threads per SM": 1,024, 2,048, 2,048 for 7.5, 8.0, 9.0).

L2 bandwidth. The prediction's L2 level needs the rate at which the L2 cache serves the SMs,
``l2_bytes_per_clock`` at :meth:`GPU.clock` (:meth:`GPU.l2_bandwidth`), with its source and
whether NVIDIA documents it (``l2_documented``). NVIDIA documents it for the A100 only: *NVIDIA
A100 Tensor Core GPU Architecture* (2020), in its comparison of the A100 with the V100, gives
the L2 cache read bandwidth as 5,120 bytes per clock (2,048 for the V100). No per-clock or
per-second L2 bandwidth was found in NVIDIA's H100 whitepaper or the H100 and H200 datasheets:
for those two the A100's 5,120 bytes per clock is **assumed** (``l2_documented`` False), at their
own clock. The Turing whitepaper gives none for the T4 either, and none is assumed: the T4 has no
L2 level (``l2_bytes_per_clock = 0``), its every sector is taken to cross GDDR6.

>>> [(g, GPUS[g].l2_bytes_per_clock, GPUS[g].l2_documented) for g in GPUS]
[('T4', 0, False), ('A100', 5120, True), ('H100', 5120, False), ('H200', 5120, False)]
>>> f"{float(GPUS['H100'].l2_bandwidth()) / 1e12:.2f} TB/s"
'9.37 TB/s'

Sources of the datasheet figures, each as its publisher titles it (in the book's bibliography:
``nvidiaT4datasheet``, ``nvidiaT4productbrief``, ``nvidiaA100datasheet``, ``nvidiaH100datasheet``,
``nvidiaH200datasheet``); a date is given only where it could be established, and no datasheet
copy consulted showed its own date:

- T4 (low-profile PCIe board, 16 GB GDDR6): NVIDIA, *NVIDIA T4 Tensor Core GPU* datasheet
  (document 951643): "Single-Precision 8.1 TFLOPS", "Mixed-Precision (FP16/FP32) 65 TFLOPS".
  Its memory bandwidth is quoted from it as 300 GB/s; the board's peak, 320 GB/s, is that of
  NVIDIA's *NVIDIA T4* product brief, table "Memory Specifications" (maximum memory clock
  5,001 MHz, 256-bit bus, "Peak memory bandwidth: up to 320 GBytes/s"). Dates of both: not
  established.
- A100 80 GB SXM4: NVIDIA, *NVIDIA A100 Tensor Core GPU* datasheet (document 1758950-r4),
  column "A100 80GB SXM": FP32 19.5 TFLOPS, "FP16 Tensor Core" and "BFLOAT16 Tensor Core"
  312 TFLOPS (624* with sparsity), GPU memory bandwidth 2,039 GB/s. Date: not established; no
  earlier than June 2021, since it has a column for the A100 80GB PCIe, whose product brief
  (PB-10577-001) was first released on 28 June 2021.
- H100 SXM5 80 GB: NVIDIA, *NVIDIA H100 Tensor Core GPU* datasheet, column "H100 SXM": FP32 67
  teraFLOPS, "BFLOAT16 Tensor Core" and "FP16 Tensor Core" 1,979 teraFLOPS (with sparsity), GPU
  memory bandwidth 3.35 TB/s. Date: not established; 2022 or later (the H100 was announced in
  March 2022).
- H200 SXM 141 GB: NVIDIA, *NVIDIA H200 Tensor Core GPU* datasheet, column "H200 SXM": FP32 67
  TFLOPS, "BFLOAT16 Tensor Core" and "FP16 Tensor Core" 1,979 TFLOPS (with sparsity), GPU memory
  141 GB, bandwidth 4.8 TB/s. Year: 2023 or later (NVIDIA's address for it names SC23, the
  November 2023 conference where the H200 was announced); the revision's month is not
  established.
"""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

__all__ = ["GPU", "GPUS", "KB", "MB", "DTYPES", "SHARED_BYTES_PER_CLOCK", "cache_entries",
           "marks", "datasheet_table", "ridge", "table"]

#: A kilobyte as the CUDA documentation counts it.
KB = 1024

#: A megabyte as the architecture whitepapers count cache sizes: 1,024 KB.
MB = 1024 * KB

#: The dtypes a datasheet peak may be given for.
DTYPES = ("float32", "float16", "bfloat16")

TERA = 10**12
GIGA = 10**9

#: Shared-memory bandwidth of one SM, bytes per clock, on every GPU here: 32 banks of 4 bytes,
#: one wavefront a clock (CUDA C++ Programming Guide 12.4, Compute Capability 5.x and later,
#: "Shared Memory": "Shared memory has 32 banks that are organized such that successive 32-bit
#: words map to successive banks. Each bank has a bandwidth of 32 bits per clock cycle.").
SHARED_BYTES_PER_CLOCK = 32 * 4


class GPU(NamedTuple):
    """One GPU: on-chip memory per SM (bytes), compute capability, and datasheet figures.

    The first five fields are the on-chip memory (see the module docstring); the rest are the
    datasheet's figures for one board, ``variant``: ``bandwidth`` in bytes per second, ``peak``
    (dense operations per second by dtype, among :data:`DTYPES`), ``sparse`` (the printed
    with-sparsity figures, where the datasheet prints one) and ``datasheet``, the citation.
    The last four are the chip's: ``sms`` (SMs of the board), ``l1_per_sm`` (combined L1 and
    shared memory of one SM, bytes), ``l2`` (bytes) and ``chip_source``, their citation.
    """

    name: str
    compute_capability: str
    shared_per_sm: int
    shared_per_block: int
    registers_per_sm: int
    variant: str = ""
    bandwidth: int = 0
    peak: dict = {}
    sparse: dict = {}
    datasheet: str = ""
    sms: int = 0
    l1_per_sm: int = 0
    l2: int = 0
    chip_source: str = ""
    tensor_ops_per_clock: int = 0
    max_threads_per_sm: int = 0
    max_blocks_per_sm: int = 0
    rates_source: str = ""
    l2_bytes_per_clock: int = 0
    l2_documented: bool = False
    l2_source: str = ""

    def clock(self):
        """The clock (Hz, a Fraction) the dense 16-bit tensor peak implies:
        ``peak["float16"] / (sms * tensor_ops_per_clock)``."""
        from fractions import Fraction

        return Fraction(self.peak["float16"], self.sms * self.tensor_ops_per_clock)

    def l2_bandwidth(self):
        """The L2 cache's bandwidth to the SMs (bytes per second, a Fraction):
        ``l2_bytes_per_clock * clock()``, or None where no figure is documented or assumed."""
        if not self.l2_bytes_per_clock:
            return None
        return self.l2_bytes_per_clock * self.clock()

    def on_chip(self, registers: bool = True) -> int:
        """Bytes of on-chip memory per SM: shared memory, plus the register file by default."""
        return self.shared_per_sm + (self.registers_per_sm if registers else 0)


_REGISTERS = 65536 * 4                # 64 K registers of 32 bits per SM (every GPU below)
_HOPPER_DENSE = 9895 * TERA // 10     # 1,979 TFLOPS with sparsity, halved: 989.5 TFLOPS

#: The GPUs, by name, in order of release.
GPUS: dict[str, GPU] = {
    "T4": GPU(
        "T4", "7.5", 64 * KB, 64 * KB, _REGISTERS,
        variant="PCIe, 16 GB",
        bandwidth=320 * GIGA,
        peak={"float32": 81 * TERA // 10, "float16": 65 * TERA},
        sparse={},
        datasheet=("NVIDIA, NVIDIA T4 Tensor Core GPU, datasheet (document 951643), undated in "
                   "the copies consulted; bandwidth from NVIDIA, NVIDIA T4 product brief, table "
                   "'Memory Specifications' (up to 320 GBytes/s), date not established"),
        sms=40, l1_per_sm=96 * KB, l2=4 * MB,
        chip_source=("SMs: the T4 datasheet's 2,560 CUDA cores and 320 tensor cores, at 64 and 8 "
                     "per SM (NVIDIA, NVIDIA Turing GPU Architecture, 2018); L2: that "
                     "whitepaper's 4 MB of the TU104, the T4's chip; L1: CUDA C++ Programming "
                     "Guide 12.4, compute capability 7.5"),
        tensor_ops_per_clock=1024, max_threads_per_sm=1024, max_blocks_per_sm=16,
        rates_source=("tensor: NVIDIA Turing GPU Architecture (2018), 8 tensor cores per SM, 64 "
                      "FP16 FMA per clock each; limits: CUDA C++ Programming Guide 12.4, compute "
                      "capability 7.5"),
        l2_source=("none: NVIDIA Turing GPU Architecture (2018) and the T4 datasheet give no L2 "
                   "bandwidth; the T4 has no L2 level in the prediction"),
    ),
    "A100": GPU(
        "A100", "8.0", 164 * KB, 163 * KB, _REGISTERS,
        variant="SXM4, 80 GB",
        bandwidth=2039 * GIGA,
        peak={"float32": 195 * TERA // 10, "float16": 312 * TERA, "bfloat16": 312 * TERA},
        sparse={"float16": 624 * TERA, "bfloat16": 624 * TERA},
        datasheet=("NVIDIA, NVIDIA A100 Tensor Core GPU, datasheet (document 1758950-r4), "
                   "column 'A100 80GB SXM'; date not established, no earlier than June 2021"),
        sms=108, l1_per_sm=192 * KB, l2=40 * MB,
        chip_source=("SMs and L2: NVIDIA, NVIDIA A100 Tensor Core GPU Architecture (2020); L1: "
                     "CUDA C++ Programming Guide 12.4, compute capability 8.0"),
        tensor_ops_per_clock=2048, max_threads_per_sm=2048, max_blocks_per_sm=32,
        rates_source=("tensor: NVIDIA A100 Tensor Core GPU Architecture (2020), 1024 dense FP16 "
                      "FMA per clock per SM; limits: CUDA C++ Programming Guide 12.4, compute "
                      "capability 8.0"),
        l2_bytes_per_clock=5120, l2_documented=True,
        l2_source=("NVIDIA, NVIDIA A100 Tensor Core GPU Architecture (2020): L2 cache read "
                   "bandwidth 5120 bytes/clk (V100: 2048 bytes/clk)"),
    ),
    "H100": GPU(
        "H100", "9.0", 228 * KB, 227 * KB, _REGISTERS,
        variant="SXM5, 80 GB",
        bandwidth=3350 * GIGA,
        peak={"float32": 67 * TERA, "float16": _HOPPER_DENSE, "bfloat16": _HOPPER_DENSE},
        sparse={"float16": 1979 * TERA, "bfloat16": 1979 * TERA},
        datasheet=("NVIDIA, NVIDIA H100 Tensor Core GPU, datasheet, column 'H100 SXM'; "
                   "date not established (2022 or later)"),
        sms=132, l1_per_sm=256 * KB, l2=50 * MB,
        chip_source=("SMs and L2: NVIDIA, NVIDIA H100 Tensor Core GPU Architecture (2022), H100 "
                     "SXM5; L1: CUDA C++ Programming Guide 12.4, compute capability 9.0"),
        tensor_ops_per_clock=4096, max_threads_per_sm=2048, max_blocks_per_sm=32,
        rates_source=("tensor: NVIDIA H100 Tensor Core GPU Architecture (2022), twice the A100 "
                      "SM's dense rate per clock; limits: CUDA C++ Programming Guide 12.4, "
                      "compute capability 9.0"),
        l2_bytes_per_clock=5120, l2_documented=False,
        l2_source=("assumed: the A100's 5120 bytes/clk (NVIDIA A100 Tensor Core GPU Architecture, "
                   "2020); NVIDIA's H100 whitepaper and datasheet give no L2 bandwidth"),
    ),
    "H200": GPU(
        "H200", "9.0", 228 * KB, 227 * KB, _REGISTERS,
        variant="SXM, 141 GB",
        bandwidth=4800 * GIGA,
        peak={"float32": 67 * TERA, "float16": _HOPPER_DENSE, "bfloat16": _HOPPER_DENSE},
        sparse={"float16": 1979 * TERA, "bfloat16": 1979 * TERA},
        datasheet=("NVIDIA, NVIDIA H200 Tensor Core GPU, datasheet, column 'H200 SXM'; "
                   "year only: 2023 or later (issued for SC23), month not established"),
        sms=132, l1_per_sm=256 * KB, l2=50 * MB,
        chip_source=("SMs and L2: not in the H200 datasheet; the H100 SXM5's (NVIDIA, NVIDIA "
                     "H100 Tensor Core GPU Architecture, 2022), whose GH100 configuration the "
                     "H200 shares; L1: CUDA C++ Programming Guide 12.4, compute capability 9.0"),
        tensor_ops_per_clock=4096, max_threads_per_sm=2048, max_blocks_per_sm=32,
        rates_source=("tensor: the H100 SXM5's SM (the H200 datasheet prints no per-SM rate); "
                      "limits: CUDA C++ Programming Guide 12.4, compute capability 9.0"),
        l2_bytes_per_clock=5120, l2_documented=False,
        l2_source=("assumed: the A100's 5120 bytes/clk (NVIDIA A100 Tensor Core GPU Architecture, "
                   "2020); NVIDIA's H200 datasheet gives no L2 bandwidth"),
    ),
}


def cache_entries(gpu: str, bytes_per_entry: int = 2, registers: bool = True) -> int:
    """The on-chip memory of one SM of ``gpu`` in entries: an upper estimate of ``M``.

    Parameters
    ----------
    gpu : str
        A key of :data:`GPUS`.
    bytes_per_entry : int, optional
        2 for fp16 or bf16 (the default), 4 for fp32.
    registers : bool, optional
        Count the register file with the shared memory (the default), or shared memory alone.

    Returns
    -------
    int
        ``floor(bytes / bytes_per_entry)``.
    """
    if gpu not in GPUS:
        raise KeyError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    if not isinstance(bytes_per_entry, int) or bytes_per_entry < 1:
        raise ValueError(f"bytes_per_entry must be a positive integer, got {bytes_per_entry!r}")
    return GPUS[gpu].on_chip(registers) // bytes_per_entry


def marks(bytes_per_entry: int = 2, registers: bool = True) -> list[tuple[str, int]]:
    """``(names, M)`` for each distinct :func:`cache_entries` value, smallest first; GPUs with
    the same value share one mark (``"H100, H200"``).

    >>> marks()
    [('T4', 163840), ('A100', 215040), ('H100, H200', 247808)]
    """
    groups: dict[int, list[str]] = {}
    for name in GPUS:
        groups.setdefault(cache_entries(name, bytes_per_entry, registers), []).append(name)
    return [(", ".join(names), M) for M, names in sorted(groups.items())]


def _tera(ops: int) -> str:
    """``ops`` operations per second in TFLOPS, exactly, with thousands separators."""
    value = Decimal(ops) / TERA
    text = f"{value:,f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def datasheet_table() -> str:
    """The datasheet figures of :data:`GPUS` as a plain-text table, one GPU per line.

    Bandwidth in GB/s (10^9 bytes per second); peaks in TFLOPS (10^12 operations per second),
    dense, followed in parentheses by the printed with-sparsity figure where there is one
    (marked ``*``); ``-`` where the datasheet gives no such peak. The module docstring shows the
    table, so a doctest ties the documented figures to the data.
    """
    def peak(g: GPU, dtype: str) -> str:
        if dtype not in g.peak:
            return "-"
        if dtype not in g.sparse:
            return _tera(g.peak[dtype])
        return f"{_tera(g.peak[dtype])} ({_tera(g.sparse[dtype])}*)"

    rows = [("GPU", "variant", "GB/s", *DTYPES)]
    for g in GPUS.values():
        rows.append((g.name, g.variant, f"{Decimal(g.bandwidth) / GIGA:,f}",
                     *(peak(g, dtype) for dtype in DTYPES)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


#: Where each figure of :func:`table` comes from, by column (the GPU's own ``datasheet`` and
#: ``chip_source`` name the documents).
_CUDA_GUIDE = ("NVIDIA, CUDA C++ Programming Guide, release 12.4 (March 2024), table "
               "'Technical Specifications per Compute Capability'")


def ridge(gpu: str, dtype: str = "bfloat16", bytes_per_entry: int | None = None):
    """The ridge point of ``gpu``'s roofline: dense peak over HBM bandwidth, exactly.

    Parameters
    ----------
    gpu : str
        A key of :data:`GPUS`.
    dtype : str, optional
        One of :data:`DTYPES` that the GPU's datasheet gives a peak for.
    bytes_per_entry : int, optional
        None (the default): operations per byte. An integer ``w``: operations per entry of
        ``w`` bytes, ``w`` times as many.

    Returns
    -------
    fractions.Fraction

    >>> ridge("T4", "float16")
    Fraction(1625, 8)
    >>> ridge("T4", "float16", bytes_per_entry=2)
    Fraction(1625, 4)
    """
    from fractions import Fraction

    if gpu not in GPUS:
        raise KeyError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    g = GPUS[gpu]
    if dtype not in g.peak:
        raise ValueError(f"dtype {dtype!r}: the {gpu} datasheet gives peaks for "
                         f"{', '.join(g.peak)}")
    per_byte = Fraction(g.peak[dtype], g.bandwidth)
    if bytes_per_entry is None:
        return per_byte
    if not isinstance(bytes_per_entry, int) or bytes_per_entry < 1:
        raise ValueError(f"bytes_per_entry must be a positive integer, got {bytes_per_entry!r}")
    return per_byte * bytes_per_entry


def table() -> list[dict]:
    """Every hardware figure the book uses, one row per GPU of :data:`GPUS`, in their order.

    Each row is a dict: ``gpu``, ``variant``, ``compute_capability``, ``sms``, ``shared_per_sm``,
    ``l1_per_sm``, ``registers_per_sm``, ``l2`` (bytes), ``bandwidth`` (bytes/s), ``peak`` and
    ``sparse`` (operations/s by dtype, as in :class:`GPU`), ``ridge`` (operations per byte by
    dtype, :func:`ridge`), ``M`` (:func:`cache_entries`, two-byte entries) and ``sources``
    (column group to citation: ``"on-chip"`` for the per-SM sizes, ``"chip"`` for SMs and L2,
    ``"datasheet"`` for bandwidth and peaks). The values are the stored ones, unrounded.
    """
    rows = []
    for g in GPUS.values():
        rows.append({
            "gpu": g.name, "variant": g.variant, "compute_capability": g.compute_capability,
            "sms": g.sms, "shared_per_sm": g.shared_per_sm, "l1_per_sm": g.l1_per_sm,
            "registers_per_sm": g.registers_per_sm, "l2": g.l2, "bandwidth": g.bandwidth,
            "peak": dict(g.peak), "sparse": dict(g.sparse),
            "ridge": {dtype: ridge(g.name, dtype) for dtype in DTYPES if dtype in g.peak},
            "M": cache_entries(g.name),
            "sources": {"on-chip": f"{_CUDA_GUIDE}, compute capability {g.compute_capability}",
                        "chip": g.chip_source, "datasheet": g.datasheet},
        })
    return rows
