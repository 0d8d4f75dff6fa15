"""Masks passed as arrays: costed before and after the array is read once. Prints a table.

``io_cost("flash", N, 64, 4096, mask=m)`` (``M = d^2``) at ``N = 4096`` and ``16384`` for five
arrays, each made by the side's own ``ioattn.masks``: ``causal(N)``, a writable copy of it,
``sliding_window(N, 256)``, a writable copy of that, and ``block_sparse(N, 64, 1/4)``. Each side
runs in its own process (``benchmarks/sides.py``): the time per call is the median of calls timed
alternately on the two sides, after one untimed call (so "now" has the array's description and
blocks at hand, except for the writable copies, which are read at every call); "first call" is
the first cost with a new array; the peak is tracemalloc's on the first call with another new
array, beyond the array.
Then ``bounds.crossovers(4096, 64)`` (every ``M`` from the least to ``32 d^2``), the crossover
chapter's ``crossovers(4096, 64, d^2 / 4, 4 d^2)`` and ``cheapest(4096, 64, d^2 / 4)`` (square
tiling with the outer schedule), with the causal mask as the array ``causal(4096)``, as a
writable copy, and as the structured ``Mask.causal(4096)``.

Done when (issue 17): at ``N = 16384``, ``io_cost`` with an array allocates less than ``N^2 / 4``
bytes beyond it; ``crossovers`` with an array mask is within 10x of the structured mask.

Run ``python benchmarks/masks.py`` from a clone (a few minutes; ``--before REV`` to compare with
another commit).
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sides import BEFORE, Side, interleaved, table  # noqa: E402

D, M = 64, 4096
KINDS = [("causal(N)", "masks.causal(N)"),
         ("causal(N).copy()", "masks.causal(N).copy()"),
         ("sliding_window(N, 256)", "masks.sliding_window(N, 256)"),
         ("sliding_window(N, 256).copy()", "masks.sliding_window(N, 256).copy()"),
         ("block_sparse(N, 64, 1/4)", "masks.block_sparse(N, 64, 0.25)")]
COST = f"ioattn.io_cost('flash', N, {D}, {M}, mask=m)"
SETUP = "import time\nimport numpy as np\nimport ioattn\nfrom ioattn import bounds, masks\n"


def seconds(x: float) -> str:
    return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.2f} s"


def ratio(x: float) -> str:
    return f"{x:,.0f}x" if x >= 10 else f"{x:.2f}x"


def mib(x: int) -> str:
    return f"{x / 2 ** 20:.1f} MiB"


def first_call(side: Side, make: str) -> float:
    """Seconds of the first cost with a new array."""
    side.exec(f"m = {make}\nt0 = time.perf_counter()\n{COST}\nfirst = time.perf_counter() - t0")
    return side.eval("first")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with ({BEFORE})")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed calls per side at N = 4096 (fewer at N = 16384)")
    args = parser.parse_args(argv)
    print(f"Mask arrays, before ({args.before}) and now; Python {platform.python_version()} on "
          f"{platform.machine()}; flash, d = {D}, M = {M}", flush=True)
    rows = []
    with Side(args.before) as old, Side() as new:
        sides = [old, new]
        for side in sides:
            side.exec(SETUP)
        for N in (4096, 16384):
            repeats = args.repeats if N <= 4096 else max(2, args.repeats // 2)
            limit = N * N // 4
            for label, make in KINDS:
                for side in sides:
                    side.exec(f"N = {N}")
                firsts = [first_call(side, make) for side in sides]
                peaks = []
                for side in sides:
                    side.exec(f"m = {make}")
                    peaks.append(side.peak(COST))
                before, now = interleaved(sides, COST, repeats)
                check = f"{'yes' if peaks[1] < limit else 'NO'} ({peaks[1] / limit:.3f})" \
                    if N == 16384 else ""
                rows.append((f"io_cost, {label}", f"{N:,}", seconds(before), seconds(now),
                             ratio(before / now), seconds(firsts[0]), seconds(firsts[1]),
                             mib(peaks[0]), mib(peaks[1]), check))
                print(table(rows[-1:], HEADER).splitlines()[-1], flush=True)
                for side in sides:
                    side.exec("del m")
        N = 4096
        for side in sides:
            side.exec(f"N = {N}\nm = masks.causal(N)\nc = m.copy()\ns = masks.Mask.causal(N)\n"
                      "outer = {'square_tiling': {'schedule': 'outer'}}")
        for what, call in CHOICES:
            found = [side.eval(f"[tuple(x) for x in {call.format(v)}]" if "cross" in call
                               else call.format(v)) for side in sides for v in "mcs"]
            assert all(f == found[0] for f in found), "every side and mask finds the same"
            t = {v: interleaved(sides, call.format(v), args.repeats) for v in "mcs"}
            within = t["m"][1] / t["s"][1]
            for v, label in (("m", "causal(N)"), ("c", "causal(N).copy()"),
                             ("s", "Mask.causal(N)")):
                check = f"{'yes' if within <= 10 else 'NO'} ({within:.2f}x Mask.causal)" \
                    if v == "m" else ""
                rows.append((f"{what}, {label}", f"{N:,}", seconds(t[v][0]), seconds(t[v][1]),
                             ratio(t[v][0] / t[v][1]), "", "", "", "", check))
                print(table(rows[-1:], HEADER).splitlines()[-1], flush=True)
    print()
    print(table(rows, HEADER))
    print("\nEvery side finds the same crossovers (and cheapest) with each mask. Done when: "
          "io_cost's peak < N^2/4 bytes at N = 16,384 (peak / (N^2/4) in brackets); crossovers "
          "with the array within 10x of Mask.causal (now).")


CHOICES = [("crossovers(N, 64)", "bounds.crossovers(N, 64, mask={})"),
           ("crossovers(N, 64, 1024, 16384, outer)",
            "bounds.crossovers(N, 64, 1024, 16384, options=outer, mask={})"),
           ("cheapest(N, 64, 1024, outer)", "bounds.cheapest(N, 64, 1024, options=outer, mask={})")]
HEADER = ["case", "N", "before", "now", "before/now", "first before", "first now",
          "peak before", "peak now", "done when"]


if __name__ == "__main__":
    main()
