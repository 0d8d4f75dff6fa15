"""On-chip memory of a few NVIDIA GPUs, as cache sizes ``M`` of the I/O model.

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
(2020) and *NVIDIA H100 Tensor Core GPU Architecture* (2022). The H200 (datasheet *NVIDIA H200
Tensor Core GPU*, 2024) is a Hopper GPU of compute capability 9.0, with the H100's SM and more
and faster HBM, so its per-SM figures are the H100's.

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
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["GPU", "GPUS", "KB", "cache_entries", "marks"]

#: A kilobyte as the CUDA documentation counts it.
KB = 1024


class GPU(NamedTuple):
    """One GPU's on-chip memory per SM (bytes) and its compute capability."""

    name: str
    compute_capability: str
    shared_per_sm: int
    shared_per_block: int
    registers_per_sm: int

    def on_chip(self, registers: bool = True) -> int:
        """Bytes of on-chip memory per SM: shared memory, plus the register file by default."""
        return self.shared_per_sm + (self.registers_per_sm if registers else 0)


_REGISTERS = 65536 * 4                # 64 K registers of 32 bits per SM (every GPU below)

#: The GPUs, by name, in order of release.
GPUS: dict[str, GPU] = {
    "T4": GPU("T4", "7.5", 64 * KB, 64 * KB, _REGISTERS),
    "A100": GPU("A100", "8.0", 164 * KB, 163 * KB, _REGISTERS),
    "H100": GPU("H100", "9.0", 228 * KB, 227 * KB, _REGISTERS),
    "H200": GPU("H200", "9.0", 228 * KB, 227 * KB, _REGISTERS),
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
