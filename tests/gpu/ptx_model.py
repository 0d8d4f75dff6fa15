"""A NumPy model of the PTX ISA's warp-level fragments, written from the ISA's tables apart from
the emulator's C++ (``ioattn/gpu/kernels/emulate.h``), to test that model lane by lane.

The tables, as the PTX ISA states them (``groupID = laneid >> 2``,
``threadID_in_group = laneid % 4``; element ``i`` of a fragment is the low half of register
``i // 2`` when ``i`` is even, its high half when odd):

* ``mma.m16n8k16`` (``.f16``/``.bf16``), A (16 x 16): row ``groupID`` for ``a_i`` with
  ``0 <= i < 2`` or ``4 <= i < 6``, else ``groupID + 8``; column ``threadID_in_group * 2 +
  (i & 1)`` for ``i < 4``, plus 8 for ``i >= 4``. B (16 x 8): row ``threadID_in_group * 2 +
  (i & 1)`` for ``i < 2``, plus 8 for ``i >= 2``; column ``groupID``.
* ``mma.m16n8k8`` (``.f16``), A (16 x 8): row ``groupID`` for ``a0, a1``, ``groupID + 8``
  for ``a2, a3``; column ``threadID_in_group * 2 + (i & 1)``. B (8 x 8): row
  ``threadID_in_group * 2 + i``, column ``groupID``.
* C and D (16 x 8, ``.f32``) of both: row ``groupID`` for ``c0, c1``, ``groupID + 8`` for
  ``c2, c3``; column ``threadID_in_group * 2 + (i & 1)``.
* ``ldmatrix.m8n8.x{1,2,4}.b16``: threads ``8 i .. 8 i + 7`` give the addresses of rows
  ``0 .. 7`` of matrix ``i``; register ``i`` of lane ``l`` holds row ``l // 4``, elements
  ``2 (l % 4)`` and ``2 (l % 4) + 1`` of matrix ``i``; with ``.trans`` the same of the
  transposed matrix (rows ``2 (l % 4)``, ``2 (l % 4) + 1`` of column ``l // 4``).
"""

from __future__ import annotations

import numpy as np

LANES = np.arange(32)


def _element_of_register(i: int) -> tuple[int, int]:
    """Register and half (0 low, 1 high) of fragment element ``i``."""
    return i // 2, i % 2


def a_position(lane: int, i: int, k: int) -> tuple[int, int]:
    """(row, column) of element ``a_i`` of ``lane`` in A of ``m16n8k{k}``."""
    group, tig = lane >> 2, lane % 4
    if k == 16:
        row = group if (0 <= i < 2 or 4 <= i < 6) else group + 8
        col = tig * 2 + (i & 1) + (8 if i >= 4 else 0)
    elif k == 8:
        row = group if i < 2 else group + 8
        col = tig * 2 + (i & 1)
    else:
        raise ValueError(f"k must be 8 or 16, got {k}")
    return row, col


def b_position(lane: int, i: int, k: int) -> tuple[int, int]:
    """(row, column) of element ``b_i`` of ``lane`` in B of ``m16n8k{k}``."""
    group, tig = lane >> 2, lane % 4
    if k == 16:
        row = tig * 2 + (i & 1) + (8 if i >= 2 else 0)
    elif k == 8:
        row = tig * 2 + i
    else:
        raise ValueError(f"k must be 8 or 16, got {k}")
    return row, group


def c_position(lane: int, i: int) -> tuple[int, int]:
    """(row, column) of element ``c_i`` (or ``d_i``) of ``lane``."""
    group, tig = lane >> 2, lane % 4
    return (group if i < 2 else group + 8), tig * 2 + (i & 1)


def halves(registers: np.ndarray) -> np.ndarray:
    """``(32, r)`` uint32 registers as ``(32, 2 r)`` uint16 elements, low half first."""
    registers = np.asarray(registers, dtype=np.uint32)
    low = (registers & 0xFFFF).astype(np.uint16)
    high = (registers >> 16).astype(np.uint16)
    return np.stack([low, high], axis=-1).reshape(registers.shape[0], -1)


def registers(elements: np.ndarray) -> np.ndarray:
    """``(32, 2 r)`` uint16 elements packed as ``(32, r)`` uint32 registers."""
    e = np.asarray(elements, dtype=np.uint32).reshape(elements.shape[0], -1, 2)
    return (e[..., 0] | (e[..., 1] << 16)).astype(np.uint32)


def to_float(bits: np.ndarray, dtype: str) -> np.ndarray:
    """16-bit patterns as float64: float16 or bfloat16."""
    bits = np.asarray(bits, dtype=np.uint16)
    if dtype == "float16":
        return bits.view(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    raise ValueError(f"dtype must be float16 or bfloat16, got {dtype!r}")


def from_float(x: np.ndarray, dtype: str) -> np.ndarray:
    """float values as 16-bit patterns (round to nearest even)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float16":
        return x.astype(np.float16).view(np.uint16)
    b = x.view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def fragment_a(A: np.ndarray, k: int) -> np.ndarray:
    """The ``(32, k // 4)`` uint32 registers of 16-bit matrix A (``16 x k`` bit patterns)."""
    e = np.zeros((32, k // 2), np.uint16)
    for lane in LANES:
        for i in range(k // 2):
            e[lane, i] = A[a_position(int(lane), i, k)]
    return registers(e)


def fragment_b(B: np.ndarray, k: int) -> np.ndarray:
    """The ``(32, k // 8)`` uint32 registers of 16-bit matrix B (``k x 8`` bit patterns)."""
    e = np.zeros((32, k // 4), np.uint16)
    for lane in LANES:
        for i in range(k // 4):
            e[lane, i] = B[b_position(int(lane), i, k)]
    return registers(e)


def fragment_c(C: np.ndarray) -> np.ndarray:
    """The ``(32, 4)`` float32 accumulators of the ``16 x 8`` matrix C."""
    return np.array([[C[c_position(int(lane), i)] for i in range(4)] for lane in LANES],
                    dtype=np.float32)


def matrix_c(c: np.ndarray) -> np.ndarray:
    """The ``16 x 8`` matrix that the ``(32, 4)`` accumulators ``c`` hold."""
    C = np.full((16, 8), np.nan)
    for lane in LANES:
        for i in range(4):
            C[c_position(int(lane), i)] = c[lane, i]
    return C


def mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, k: int, dtype: str) -> np.ndarray:
    """The ``(32, 4)`` D registers (float64) of ``mma.m16n8k{k}`` for lanes' registers ``a``
    (``32 x k/4``), ``b`` (``32 x k/8``), ``c`` (``32 x 4``): D = A B + C, exactly."""
    A, B = np.full((16, k), np.nan), np.full((k, 8), np.nan)
    ea, eb = halves(a), halves(b)
    for lane in LANES:
        for i in range(k // 2):
            A[a_position(int(lane), i, k)] = to_float(ea[lane, i], dtype)
        for i in range(k // 4):
            B[b_position(int(lane), i, k)] = to_float(eb[lane, i], dtype)
    D = A @ B + matrix_c(np.asarray(c, np.float64))
    return np.array([[D[c_position(int(lane), i)] for i in range(4)] for lane in LANES])


def ldmatrix(memory: np.ndarray, rows: np.ndarray, num: int, trans: bool) -> np.ndarray:
    """The ``(32, num)`` uint32 registers ``ldmatrix.x{num}{.trans}`` gives, for 16-bit
    ``memory`` and each lane's row address ``rows[lane]`` (an element index)."""
    out = np.zeros((32, num), np.uint32)
    for i in range(num):
        M = np.stack([memory[rows[8 * i + j]:rows[8 * i + j] + 8] for j in range(8)])
        if trans:
            M = M.T
        for lane in LANES:
            pair = M[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2].astype(np.uint32)
            out[lane, i] = pair[0] | (pair[1] << 16)
    return out
