"""Shared-memory wavefronts and global sectors of every kernel, per instruction site, from the
emulator's counting build (:class:`ioattn.gpu.emulator.SiteCount`, the race-check build's counts
without its race check; ``emulate.h`` states the rules it counts by). ``python
benchmarks/banks.py --out benchmarks/results/banks.md`` writes the whole of that file: every table
in it is this module's output.

A site's wavefronts per request is its bank-conflict degree (1: conflict-free, at most 4 bytes a
lane); its sectors per request the 32-byte sectors a warp's request touches (4 for 32 coalesced
floats). WMMA loads and stores (the tensor-core kernel's tiles), whose per-lane layout CUDA
leaves unspecified, are counted as ldmatrix-like 16-byte row accesses, 32 lanes a request and 8
rows a phase: 4 wavefronts a request is conflict-free, 32 is 8-way (rows of 128 or 256 bytes).
That mapping is an assumption of the model, not a measurement: NVIDIA does not document how
``wmma::load_matrix_sync`` and ``wmma::store_matrix_sync`` map to wavefronts, so the WMMA rows'
wavefronts are what ldmatrix's rows would take.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CASES", "HISTORY", "PREAMBLE", "main", "markdown", "site_counts", "timing"]

#: The launches counted: label -> (algorithm, keyword arguments of ioattn.gpu.run), or
#: ("backward", those of ioattn.gpu.run_backward), or ("decode", those of ioattn.gpu.decode
#: with :data:`DECODE`'s sizes). One head, N = 64, d = 64 (the A100 default d), blocks as the
#: default rule would give them where it fits (float32 inputs; the 16-bit kernels round them
#: to float16).
CASES = {
    "flash float32": ("flash", dict(block=(32, 32))),
    "flash float16 (tensor cores)": ("flash", dict(block=(32, 32), dtype="float16")),
    "square_tiling": ("square_tiling", dict()),
    "standard (one pass)": ("standard", dict()),
    "standard (strips)": ("standard", dict(M=40)),
    "flash backward": ("backward", dict(block=(16, 16))),
    "flash_fa2 float16 (registers)": ("flash_fa2", dict(dtype="float16")),
    "flash_fa2 backward float16": ("backward", dict(kernel="flash_fa2", dtype="float16")),
    "decoding (paged, split, grouped)": ("decode", dict(S=2, causal=True)),
}
N, D = 64, 64
#: The decoding launch: H_q = 8 query heads on H_kv = 2 (g = 4), N_q = 2 rows a head, a cache
#: of N_k = 200 keys of d = 64 in pages of P_s = 24 rows, shuffled.
DECODE = dict(H_q=8, H_kv=2, N_q=2, N_k=200, P_s=24)

#: The launches :func:`timing` times: the forward flash kernels, typical test launches.
TIMED = ("flash float32", "flash float16 (tensor cores)", "flash_fa2 float16 (registers)")


PREAMBLE = f"""# Shared-memory wavefronts and global sectors, per kernel and instruction site

Written by `python benchmarks/banks.py --out benchmarks/results/banks.md`: every table below is
that script's output for the current kernels (`ioattn/gpu/banks.py`; `ioattn/gpu/kernels/emulate.h`
states the rules). Counted by the CPU emulator's counting build (the race-check build's
instrumentation and counts, without the race check): one head, N = {N}, d = {D}, float32 inputs
(the 16-bit kernels round them to float16). Wavefronts per request is a site's bank-conflict
degree (1 for a conflict-free access of at most 4 bytes a lane; 4 for a conflict-free warp
request of 16 bytes a lane); sectors per request the 32-byte sectors a warp's request touches.
WMMA loads and stores, whose per-lane layout CUDA leaves unspecified, are counted as
ldmatrix-like 16-byte row accesses (8 rows a phase): the model's assumption, not a documented
rule. Rows of space `tensor` count a launch's tensor-core instructions (warp-level, in
`requests`) and their multiply-adds. These are exact counts of the emulator's model, not
measurements of a GPU.
"""

#: The earlier kernels, in prose: their code is no longer in the package, so no script prints
#: them; the figures are the counts this file's tables gave for them.
HISTORY = """## History: the kernels before their conflict fixes

Not regenerated (the code is gone); the counts the earlier versions of this file gave.

- `flash_tc.cu` at commit b4b2d99 (tile rows of d = 64 halves, 128 bytes, and of d floats;
  K_j, V_j and Q_i loaded one 2-byte entry a lane): every WMMA tile load and store took 32
  wavefronts a request (8-way conflicted; the P_ij loads, rows of B_c = 32 halves, 16: 4-way),
  and the tile loads (Q_i, 128 requests, then K_j and V_j, 512) 2 sectors a request, 1,280
  sectors in 640 requests. Padding every tile row by 16 bytes made each WMMA request 4
  wavefronts; cp.async copies of 16 bytes a lane move K_j and V_j in 64 requests of 16 sectors
  (the same 1,024 sectors in an eighth of the requests).
- Between that and the current kernel, Q_i was still loaded and scaled one 2-byte entry a lane:
  128 requests of 2 sectors. It is now copied 16 bytes a lane like K_j and V_j and scaled in
  shared memory, so the table below has one global read site for all three tiles.
"""


def site_counts(label: str) -> tuple:
    """The :class:`~ioattn.gpu.emulator.SiteCount` of every site of launch ``label``, by the
    plain emulator's counting build (:func:`ioattn.gpu.emulator.counting_sites`)."""
    import ioattn.gpu as g
    from ioattn.gpu.backend import get_backend
    from ioattn.gpu.emulator import counting_sites

    algorithm, kw = CASES[label]
    be = get_backend("emulator")
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((N, D)).astype(np.float32) for _ in range(3))
    be.take_accesses()
    if algorithm == "decode":
        H_q, H_kv, N_q, N_k, P_s = (DECODE[k] for k in ("H_q", "H_kv", "N_q", "N_k", "P_s"))
        pages = -(-N_k // P_s)
        Qd = rng.standard_normal((H_q, N_q, D)).astype(np.float32)
        pool = [rng.standard_normal((pages, H_kv, P_s, D)).astype(np.float32) for _ in range(2)]
        table = rng.permutation(pages).astype(np.int32)
        with counting_sites():
            return g.decode(Qd, *pool, table, N_k, backend="emulator", **kw).accesses
    if algorithm == "backward":
        fwd = g.run("flash", Q, K, V, save_lse=True, backend="emulator")
        dO = rng.standard_normal((N, D)).astype(np.float32)
        with counting_sites():
            out = g.run_backward(Q, K, V, fwd.output, dO, fwd.lse, backend="emulator", **kw)
        return out.accesses + be.take_accesses()
    with counting_sites():
        return g.run(algorithm, Q, K, V, backend="emulator", **kw).accesses


def timing(labels, repeats: int = 5) -> str:
    """A Markdown table of what counting costs: the wall time of one launch of each forward
    case in ``labels`` (the fastest of ``repeats``, after a first launch that compiles) in the
    emulator's counting build and its race-check build, as ratios to its plain build's,
    measured side by side (ratios of this machine's times, unlike every other figure here)."""
    import time

    import ioattn.gpu as g
    from ioattn.gpu.emulator import counting_sites

    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((N, D)).astype(np.float32) for _ in range(3))
    lines = ["## What counting costs", "",
             "The wall time of one launch with `count_io=True` (the fastest of "
             f"{repeats}, compiled",
             "beforehand, all measured side by side in one run) in the counting build",
             "(`ioattn.gpu.emulator.counting_sites()` or `IOATTN_EMULATOR_COUNT=1`) and in the",
             "race-check build, as a multiple of the plain build's, which counts no sites.", "",
             "| launch | counting / plain | race check / plain |", "|---|---:|---:|"]
    for label in labels:
        algorithm, kw = CASES[label]
        best = {}
        for mode in ("plain", "counting", "race"):
            backend = "emulator-racecheck" if mode == "race" else "emulator"

            def once():
                if mode == "counting":
                    with counting_sites():
                        g.run(algorithm, Q, K, V, backend=backend, count_io=True, **kw)
                else:
                    g.run(algorithm, Q, K, V, backend=backend, count_io=True, **kw)
            once()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                once()
                times.append(time.perf_counter() - t0)
            best[mode] = min(times) * 1e3
        lines.append(f"| {label} | {best['counting'] / best['plain']:.2f} | "
                     f"{best['race'] / best['plain']:.2f} |")
    return "\n".join(lines) + "\n"


def markdown(label: str, counts) -> str:
    """One launch's sites as a Markdown table."""
    sizes = (", ".join(f"{k} = {v}" for k, v in DECODE.items()) + f", d = {D}"
             if CASES[label][0] == "decode" else f"N = {N}, d = {D}")
    lines = [f"### {label} ({sizes})", "",
             "| kernel | line | space | requests | wavefronts | per request | sectors | "
             "per request | code |", "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for c in counts:
        if c.space == "tensor":               # tensor-core instructions: no memory counts
            lines.append(f"| {c.kernel} | - | tensor | {c.requests:,} | - | - | - | - | "
                         f"`{c.code}` ({c.accesses:,} multiply-adds) |")
            continue
        shared = c.space == "shared"
        per = (c.wavefronts if shared else c.sectors) / c.requests
        code = c.code if len(c.code) <= 60 else c.code[:57] + "..."
        lines.append(f"| {c.kernel} | {c.line} | {c.space} | {c.requests:,} | "
                     f"{c.wavefronts:,} | {per if shared else '-':{'.2f' if shared else ''}} | "
                     f"{c.sectors:,} | {'-' if shared else f'{per:.2f}'} | "
                     f"`{code.replace('|', '/')}` |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(prog="benchmarks/banks.py", description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="+", choices=sorted(CASES), default=None)
    p.add_argument("--out", type=Path, default=None, help="also write the tables here")
    p.add_argument("--no-timing", action="store_true", help="leave out the wall-time table")
    args = p.parse_args(argv)
    labels = args.only or list(CASES)
    parts = [PREAMBLE, HISTORY]
    if not args.no_timing:
        parts.append(timing([label for label in TIMED if label in labels]))
    parts.append("## Every kernel now\n")
    parts += [markdown(label, site_counts(label)) for label in labels]
    text = "\n".join(parts)
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0
