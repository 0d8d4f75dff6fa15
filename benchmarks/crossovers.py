"""How fast every crossover is found. Prints a table.

:func:`ioattn.bounds.crossovers` costs every integer ``M`` of its range (from the least feasible
``M`` to ``32 d^2``: 131,070 values at ``d = 64``) for every algorithm, through
:func:`ioattn.totals`, which applies the block-size rules and the closed forms to whole arrays
of ``M`` at once (with Python ints past 64 bits, as at ``N = 10^6``). For comparison, the same
exhaustive scan with one :func:`ioattn.io_cost` call per algorithm and ``M`` is timed on a slice
of the range and scaled to the whole range (the per-``M`` cost is flat), measured in the same
run; the ratio is the speed-up. Nothing is compared with a fixed time.

Run ``python benchmarks/crossovers.py`` (about two minutes).
"""

from __future__ import annotations

import platform
import statistics
import sys
import time

import ioattn
from ioattn import bounds
from ioattn.masks import Mask

N, D = 4096, 64
OUTER = {"square_tiling": {"schedule": "outer"}}


def timed(f, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def per_M_scan(n, backward, options, mask, count=2000):
    """Seconds per M of the scan made of one io_cost call per algorithm and M."""
    names = ioattn.algorithms(backward)
    start = max(ioattn.min_M(name, D, backward=backward, **options.get(name, {}))
                for name in names)
    t = time.perf_counter()
    for M in range(start, start + count):
        bounds.cheapest(n, D, M, options=options, backward=backward, mask=mask)
    return (time.perf_counter() - t) / count


def main(out=sys.stdout):
    big = 10 ** 6
    cases = [("forward, dense", N, False, {}, None),
             ("forward, dense, outer schedule", N, False, OUTER, None),
             ("backward, dense", N, True, {}, None),
             ("backward, dense, outer schedule", N, True, OUTER, None),
             ("forward, causal (structured mask)", N, False, OUTER, Mask.causal(N)),
             ("backward, causal (structured mask)", N, True, OUTER, Mask.causal(N)),
             ("forward, dense, N = 10^6", big, False, {}, None),
             ("forward, causal, N = 10^6", big, False, {}, Mask.causal(big))]
    span = 32 * D * D - 3
    print(f"crossovers over every M in [3, 32 d^2] ({span:,} values), N = {N} (and 10^6), "
          f"d = {D}; Python {platform.python_version()} on {platform.machine()}", file=out)
    print(f"{'case':<36}{'crossovers()':>14}{'changes':>9}{'per-M io_cost scan':>21}"
          f"{'ratio':>9}", file=out)
    for label, n, backward, options, mask in cases:
        seconds, found = timed(lambda: bounds.crossovers(n, D, options=options,
                                                         backward=backward, mask=mask))
        scan = per_M_scan(n, backward, options, mask) * span
        print(f"{label:<36}{seconds:>12.3f} s{len(found):>9}{scan:>19.1f} s"
              f"{scan / seconds:>8.0f}x", file=out)


if __name__ == "__main__":
    main()
