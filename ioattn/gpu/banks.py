"""Shared-memory wavefronts and global sectors of every kernel, per instruction site, from the
emulator's race-check build (:class:`ioattn.gpu.emulator.SiteCount`; ``emulate.h`` states the
rules it counts by). ``python benchmarks/banks.py`` prints the table.

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

__all__ = ["CASES", "main", "markdown", "site_counts"]

#: The launches counted: label -> (algorithm, keyword arguments of ioattn.gpu.run, or
#: "backward"). One head, N = 64, d = 64 (the A100 default d), blocks as the default rule
#: would give them where it fits (float32 inputs; the tensor-core kernel rounds them to
#: float16).
CASES = {
    "flash float32": ("flash", dict(block=(32, 32))),
    "flash float16 (tensor cores)": ("flash", dict(block=(32, 32), dtype="float16")),
    "square_tiling": ("square_tiling", dict()),
    "standard (one pass)": ("standard", dict()),
    "standard (strips)": ("standard", dict(M=40)),
    "flash backward": ("backward", dict(block=(16, 16))),
    "flash_fa2 float16 (registers)": ("flash_fa2", dict(dtype="float16")),
}
N, D = 64, 64


def site_counts(label: str) -> tuple:
    """The :class:`~ioattn.gpu.emulator.SiteCount` of every site of launch ``label``."""
    import ioattn.gpu as g
    from ioattn.gpu.backend import get_backend

    algorithm, kw = CASES[label]
    be = get_backend("emulator-racecheck")
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((N, D)).astype(np.float32) for _ in range(3))
    be.take_accesses()
    if algorithm == "backward":
        fwd = g.run("flash", Q, K, V, save_lse=True, backend="emulator")
        dO = rng.standard_normal((N, D)).astype(np.float32)
        g.run_backward(Q, K, V, fwd.output, dO, fwd.lse, backend="emulator-racecheck", **kw)
        return be.take_accesses()
    return g.run(algorithm, Q, K, V, backend="emulator-racecheck", **kw).accesses


def markdown(label: str, counts) -> str:
    """One launch's sites as a Markdown table."""
    lines = [f"### {label} (N = {N}, d = {D})", "",
             "| kernel | line | space | requests | wavefronts | per request | sectors | "
             "per request | code |", "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for c in counts:
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
    args = p.parse_args(argv)
    text = "\n".join(markdown(label, site_counts(label)) for label in (args.only or CASES))
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0
