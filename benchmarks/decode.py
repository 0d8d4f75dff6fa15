"""The decoding kernel's predicted time per step, from its counted bytes: prints a table.

For a few model shapes (one attention layer: ``H_q`` query heads, ``H_kv`` key/value heads,
``d = 128``), caches of ``N_k`` rows in pages of 16, a decoding step (``N_q = 1``), a
speculative verification of 4 tokens, and a batch of 1 or 16 sequences, and a prefill chunk of
:data:`CHUNK` rows where its ``g N_q`` stacked rows fit a block
(:func:`ioattn.gpu.flash_decoding.max_rows`), the kernel's plan
(:func:`ioattn.gpu.flash_decoding.decode_plan`: tiles of 64 keys, fewer for a chunk) is counted by
:func:`ioattn.decoding.decoding_cost`, the closed form the emulator's count equals (tests/gpu/
test_flash_decoding.py). ``S`` splits the cache so that the step has at least 132 blocks (an H100's SMs)
where the cache allows. The bytes are 4 an entry (the kernel reads and writes float32, and its
block-table entries are int32); with ``--dtype float16`` or ``bfloat16``, ``Q`` and the cache
take 2 bytes an entry, the partials and ``O`` staying float32. The predicted time is the larger
of the roofline's two terms (:func:`ioattn.roofline.terms`: bytes over the HBM bandwidth,
float32 operations over the CUDA-core peak), on each GPU of :mod:`ioattn.gpus`; a ``*`` marks a
time set by the operations. The plan and ``S`` are the ones an H100 (227 KiB of shared memory
per block) runs, the bytes the same on every GPU, except where a GPU's block cannot hold the
``g N_q`` rows (a T4's 64 KiB hold 61 at ``d = 128``): the kernel runs them there in row groups,
each reading the cache once, and that GPU's time, marked ``†``, is predicted from its own plan's
bytes (:func:`ioattn.gpu.flash_decoding.decode_plan` at its budget), more than the row's.

A step does about ``g N_q / 2`` float32 operations per byte of a float32 cache it reads
(``4 g N_q d`` operations per key against ``2 d`` entries of 4 bytes; ``g N_q`` in 16 bits),
under the CUDA-core ridge of these GPUs
(about 10 to 25 operations per byte) while the ``g N_q`` stacked rows are few: there decoding
is bound by reading the cache and the time is the bytes over the bandwidth. Multi-query heads
and speculation stack more rows (``g N_q = 32``, ``128`` here, ``64`` for a chunk of
multi-head attention) and cross the ridge: the table shows where.

``python benchmarks/decode.py`` prints the table; with ``--measure`` on a machine with a CUDA GPU
it also times the kernel there (median of 20 launches after 3 untimed ones; ``-`` where the
shape does not fit in the GPU's memory).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from ioattn.algorithms.base import ceil_div  # noqa: E402
from ioattn.decoding import decoding_cost, decoding_flops, decoding_terms  # noqa: E402
from ioattn.gpu.backend import EMULATED_SHARED_MEMORY  # noqa: E402
from ioattn.gpu.flash_decoding import decode_plan  # noqa: E402
from ioattn.gpu.plans import SharedMemoryExceeded  # noqa: E402
from ioattn.gpus import GPUS as GPU_SPECS  # noqa: E402
from ioattn.roofline import terms  # noqa: E402

GPUS = ("T4", "A100", "H100", "H200")
#: (label, H_q, H_kv): grouped-query (g = 4, 8), multi-head (g = 1), multi-query (g = H_q).
MODELS = [("GQA 32/8", 32, 8), ("GQA 64/8", 64, 8), ("MHA 32/32", 32, 32), ("MQA 32/1", 32, 1)]
D = 128
P_S = 16
BLOCKS = 132
#: The rows of a prefill chunk (with a batch of 1), decoded where its ``g N_q`` rows fit a block.
CHUNK = 64
ENTRY_BYTES = 4
#: Bytes of an entry of ``Q`` and the cache in each storage precision of the kernel.
WIDTH = {"float32": 4, "float16": 2, "bfloat16": 2}


def fits(H_q, H_kv, N_q, budget=EMULATED_SHARED_MEMORY) -> bool:
    """Whether the ``g N_q`` stacked rows fit one block (one row group) at ``d = 128`` (pages
    of 16)."""
    try:
        decode_plan(H_q, H_kv, N_q, 4096, D, P_s=P_S, budget=budget, B_r=H_q // H_kv * N_q)
    except SharedMemoryExceeded:
        return False
    return True


def cases():
    """The rows: ``(label, H_q, H_kv, N_q, N_k, batch)``."""
    out = []
    for label, H_q, H_kv in MODELS:
        for N_k in (4096, 32768):
            shapes = [(1, 1), (1, 16), (4, 1)] + ([(CHUNK, 1)] if fits(H_q, H_kv, CHUNK) else [])
            for N_q, batch in shapes:
                out.append((label, H_q, H_kv, N_q, N_k, batch))
    return out


def row(label, H_q, H_kv, N_q, N_k, batch, budget=EMULATED_SHARED_MEMORY, dtype="float32"):
    """One row of the table: the plan, the exact count, and the predicted microseconds per step
    on every GPU of :data:`GPUS`, with ``Q`` and the cache stored in ``dtype`` (the table
    entries, the partials and ``O`` are 4 bytes in every precision)."""
    p, S, nbytes = _planned(H_q, H_kv, N_q, N_k, batch, budget, dtype)
    cost = decoding_cost(H_q, H_kv, N_q, N_k, D, B_c=p.B_c, P_s=P_S, S=S, batch=batch)
    flops = decoding_flops(H_q, N_q, N_k, D, batch=batch)
    us, compute_bound, grouped = {}, {}, {}
    for gpu in GPUS:
        own = nbytes
        grouped[gpu] = not fits(H_q, H_kv, N_q, budget=GPU_SPECS[gpu].shared_per_block)
        if grouped[gpu]:                # row groups: this GPU's own plan, its bytes
            own = _planned(H_q, H_kv, N_q, N_k, batch, GPU_SPECS[gpu].shared_per_block,
                           dtype)[2]
        memory, compute = terms(own, flops, gpu=gpu, dtype="float32")
        us[gpu] = 1e6 * max(memory, compute)
        compute_bound[gpu] = compute > memory
    tokens = batch * N_q
    return {"model": label, "H_q": H_q, "H_kv": H_kv, "N_q": N_q, "N_k": N_k, "batch": batch,
            "B_c": p.B_c, "S": S, "reads": cost.reads, "writes": cost.writes, "bytes": nbytes,
            "bytes_per_token": nbytes // tokens, "flops": flops, "us": us,
            "compute_bound": compute_bound, "row_groups": grouped}


def _planned(H_q, H_kv, N_q, N_k, batch, budget, dtype):
    """The kernel's plan at ``budget`` bytes of shared memory a block (row groups where the
    rows do not fit), its ``S`` and the bytes of its exact count."""
    p = decode_plan(H_q, H_kv, N_q, N_k, D, P_s=P_S, batch=batch, budget=budget)
    S = min(p.T, max(1, ceil_div(BLOCKS, H_kv * batch)))
    t = decoding_terms(H_q, H_kv, N_q, N_k, D, B_c=p.B_c, P_s=P_S, S=S, batch=batch, B_r=p.B_r)
    nbytes = (WIDTH[dtype] * (t["Q"] + t["KV"])
              + ENTRY_BYTES * (t["table"] + t["partial writes"] + t["partial reads"] + t["O"]))
    return p, S, nbytes


def measure(r, repeats=20, dtype="float32"):  # pragma: no cover - needs a GPU
    """The kernel's median time in microseconds on this machine's GPU for row ``r``."""
    import cupy as cp
    import numpy as np

    from ioattn.gpu.flash_decoding import prepare_decode

    rng = np.random.default_rng(0)
    n = ceil_div(r["N_k"], P_S)
    pool = r["batch"] * n
    table = cp.asarray(rng.permutation(pool).reshape(r["batch"], n).astype(np.int32))
    Q = cp.random.standard_normal((r["batch"], r["H_q"], r["N_q"], D), dtype=cp.float32)
    K, V = (cp.random.standard_normal((pool, r["H_kv"], P_S, D), dtype=cp.float32)
            for _ in range(2))
    launch = prepare_decode(Q, K, V, table, r["N_k"], S=r["S"], B_c=r["B_c"], dtype=dtype)
    for _ in range(3):
        launch()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
    return float(np.median(times))


def _measured(r, dtype) -> str:  # pragma: no cover - needs a GPU
    import cupy as cp

    try:
        return f"{measure(r, dtype=dtype):.1f}"
    except cp.cuda.memory.OutOfMemoryError:
        return "-"
    finally:
        cp.get_default_memory_pool().free_all_blocks()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true",
                        help="also time the kernel on this machine's CUDA GPU")
    parser.add_argument("--dtype", choices=sorted(WIDTH), default="float32",
                        help="the storage precision of Q and the cache (default float32)")
    args = parser.parse_args(argv)
    head = (f"| model | N_q | N_k | batch | B_c | S | bytes/step | bytes/token | "
            + " | ".join(f"{g} µs" for g in GPUS) + (" | measured µs" if args.measure else "")
            + " |")
    print(f"One attention layer, d = {D}, pages of {P_S} rows, Q and the cache in {args.dtype}; "
          "predicted µs per step (* where the float32 operations, not the bytes, set it; "
          "† in row groups, each reading the cache once).")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for case in cases():
        r = row(*case, dtype=args.dtype)
        cells = [r["model"], r["N_q"], r["N_k"], r["batch"], r["B_c"], r["S"],
                 f"{r['bytes']:,}", f"{r['bytes_per_token']:,}",
                 *(f"{r['us'][g]:.1f}{'*' if r['compute_bound'][g] else ''}"
                   f"{'†' if r['row_groups'][g] else ''}" for g in GPUS)]
        if args.measure:
            cells.append(_measured(r, args.dtype))
        print("| " + " | ".join(str(c) for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
