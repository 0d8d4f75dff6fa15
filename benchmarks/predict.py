"""Readable vs fast kernels on T4 / A100 / H100 / H200, predicted from exact counts at three
levels (``ioattn.gpu.predict``): global sectors over the L2 bandwidth and the compulsory ones
(each array once, where the re-read K and V of the heads in flight fit in L2) over HBM
bandwidth, shared-memory wavefronts over 128 bytes a clock per SM, tensor-core (or FP32)
multiply-adds over the dense peak; the prediction is the largest. The last column is the
pessimistic variant with every sector at HBM. Counted at small N by the emulator and scaled
exactly; nothing here is measured. ``python benchmarks/predict.py [--N 8192 --d 128 --heads 16]``."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from ioattn.gpu.predict import KERNELS, launches, predict  # noqa: E402
from ioattn.gpus import GPUS  # noqa: E402


def rows(N: int, d: int, heads: int, gpus) -> list[str]:
    out = ["| GPU | kernel | role | dtype | block | regs | blocks/SM | SMs | HBM (ms) | L2 (ms) | "
           "shared (ms) | compute (ms) | bound | predicted TFLOP/s | % of dense peak | "
           "% HBM only |",
           "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for gpu in gpus:
        g = GPUS[gpu]
        half = "bfloat16" if "bfloat16" in g.peak else "float16"
        for label, kernel in KERNELS.items():
            dtype = "float32" if kernel.backward and kernel.module == "backward" else half
            plan, _ = launches(label, N, d, heads=heads, dtype=dtype, gpu=gpu)
            block, mark = None, ""
            if N % math.lcm(plan.B_r, plan.B_c):       # ragged: the scaled count needs whole blocks
                b = 2 ** int(math.log2(min(plan.B_r, plan.B_c)))
                block, mark = (b, b), f" (default {plan.B_r} x {plan.B_c} is ragged)"
            p = predict(label, N, d, heads=heads, dtype=dtype, gpu=gpu, block=block)
            peak = g.peak[p.dtype]
            occ = p.occupancy[p.main]
            ms = {k: float(v) * 1e3 for k, v in p.times.items()}
            l2 = "-" if "L2" not in ms else f"{ms['L2']:.3f}"
            hbm = f"{ms['HBM']:.3f}" + ("" if all(p.l2_resident) else " (all)")
            worst = 100 * float(p.flops / p.pessimistic) / peak
            out.append(f"| {gpu} | {label} | {kernel.role} | {p.dtype} | "
                       f"{p.plan.B_r} x {p.plan.B_c}{mark} | {occ.registers} | {occ.blocks_per_sm} "
                       f"({occ.limit}) | {p.sms_used} | {hbm} | {l2} | "
                       f"{ms['shared']:.3f} | {ms['compute']:.3f} | {p.bound} | "
                       f"{p.tflops:.1f} | {100 * p.tflops * 1e12 / peak:.1f} | {worst:.1f} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/predict.py", description=__doc__.split("\n")[0])
    ap.add_argument("--N", type=int, default=8192)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--gpu", nargs="+", choices=list(GPUS), default=list(GPUS))
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    text = "\n".join([
        "# Predicted kernel times from exact counts at three levels", "",
        "Written by `python benchmarks/predict.py --out benchmarks/results/predict.md`.",
        f"N = {args.N}, d = {args.d}, {args.heads} heads, dense; forward and backward.",
        "Predicted (a lower bound on time: latency, tails, instruction issue, L2 misses",
        "beyond the compulsory ones left out) from counts of the CPU emulator scaled exactly",
        "to N; no GPU has run these kernels. HBM: each array once where the K and V of the",
        "heads a wave of blocks spans fit in L2 (the forward kernels), otherwise every sector",
        "(marked \"all\"); L2: every sector over the L2 bandwidth, the A100 whitepaper's 5,120",
        "bytes per clock, assumed for the H100 and H200 (no NVIDIA figure), none for the T4",
        "(no L2 level). Compute is the tensor-core multiply-adds counted (16-bit kernels) or",
        "the closed form of the matrix products (float32); % of the dense peak of the row's",
        "dtype; the last column with every sector at HBM (no L2 reuse).", "",
        *rows(args.N, args.d, args.heads, args.gpu)]) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
