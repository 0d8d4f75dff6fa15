"""How fast the simulator and the closed forms are, as ratios measured side by side in one run
(each pair timed alternately, so that the load of the machine changes both alike). Prints a
table; run with `make bench`.

1. 10,000 ``io_cost`` calls over random (algorithm, N, d, M), every registered algorithm with
   every value of its choices: this tree against the commit ``--before`` (default: the one
   before the speed work), each in its own process (``benchmarks/sides.py``).
2. ``run("flash", ...)`` through the memory model against the same FA2 tiled loop in plain NumPy
   (same block sizes, from ``ioattn.plan``), at N = 1024, d = 64, M = d^2, in one process: the
   ratio of the medians is the cost of counting every transfer.
3. The explorer's curve set, every registered algorithm x 32 values of M at N = 4096, d = 64
   (exact totals, lower bounds and exact crossovers, via ``ioattn.sweep.sweep``): this tree
   against ``--before``, as in 1.
4. The garbage collector: ``run("flash", ...)`` and ``run(..., trace=True)`` at N = 1024, d = 64,
   M = d^2, this tree against ``--before``, as in 1: ``run`` now switches Python's cyclic
   garbage collector off while it simulates. In a bare process and in one that holds 2,000,000
   live objects (as a notebook session does, where the collector's full passes cost most).

1, 3 and 4 need the repository's history; ``--before none`` leaves them out. Every row gives
the medians and their ratio; none is judged against a time, which depends on the machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import ioattn
from ioattn.algorithms import variants

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sides import BEFORE, Side, interleaved  # noqa: E402

#: Every registered algorithm with every value of its choices: (name, options).
VARIANTS = variants()


def plain_flash(Q, K, V, B_r, B_c, scale):
    """FA2 forward, the same loop as ioattn's, on plain NumPy arrays with nothing counted."""
    N, d = Q.shape
    O = np.empty_like(Q)
    for i0 in range(0, N, B_r):
        Q_i = Q[i0:i0 + B_r] * scale
        r = Q_i.shape[0]
        O_i, l_i = np.zeros((r, d)), np.zeros(r)
        m_i, m_new = np.full(r, -np.inf), np.empty(r)
        for j0 in range(0, N, B_c):
            K_j, V_j = K[j0:j0 + B_c], V[j0:j0 + B_c]
            S_ij = Q_i @ K_j.T
            np.maximum(m_i, S_ij.max(axis=1), out=m_new)
            np.subtract(m_i, m_new, out=m_i)
            np.exp(m_i, out=m_i)
            S_ij -= m_new[:, None]
            np.exp(S_ij, out=S_ij)
            l_i *= m_i
            l_i += S_ij.sum(axis=1)
            O_i *= m_i[:, None]
            O_i += S_ij @ V_j
            m_i, m_new = m_new, m_i
        O[i0:i0 + B_r] = O_i / l_i[:, None]
    return O


def io_cost_cases(calls=10_000, seed=0) -> list[tuple]:
    """``calls`` random (name, N, d, M, options), each feasible."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(calls):
        name, options = VARIANTS[rng.integers(len(VARIANTS))]
        N, d = int(rng.integers(1, 65_537)), int(rng.integers(1, 513))
        lo = _least(name, d, options)
        M = int(rng.integers(lo, max(lo + 1, 64 * d * d)))
        cases.append((name, N, d, M, options))
    return cases


def _least(name, d, options):
    from ioattn.algorithms import get

    algo = get(name)
    return algo.min_M(d, **{**algo.options, **options})


def bench_overhead(N=1024, d=64, repeats=5, seed=0):
    """Median seconds of the plain loop and of ``run`` (timed alternately), and the plan."""
    M = d * d
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal((N, d)) for _ in range(3))
    p = ioattn.plan("flash", N, d, M)
    plain, counted = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        ref = plain_flash(Q, K, V, p.B_r, p.B_c, 1 / np.sqrt(d))
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        out = ioattn.run("flash", Q, K, V, M).output
        counted.append(time.perf_counter() - t)
    assert np.array_equal(out, ref), "the plain loop must compute the very same numbers"
    return statistics.median(plain), statistics.median(counted), p


#: The explorer's 32 cache sizes (powers of sqrt 2 from 4 to 2^17.5, rounded).
CURVE_MS = sorted({int(round(2 ** (k / 2))) for k in range(4, 36)})


def bench_closed_forms(before, repeats=7):
    """Median seconds of the 10,000 ``io_cost`` calls and of the explorer's curve set on
    ``[before, now]``, the two sides timed alternately."""
    cases = io_cost_cases()
    setup = ("import ioattn\nfrom ioattn.sweep import sweep\n"
             f"cases = {cases!r}\nMs = {CURVE_MS!r}")
    with Side(before) as old, Side() as new:
        for side in (old, new):
            side.exec(setup)
        cost = interleaved([old, new], "for name, N, d, M, o in cases:\n"
                                       "    ioattn.io_cost(name, N, d, M, **o)", repeats)
        curves = interleaved([old, new], "sweep(4096, 64, Ms)", repeats * 3)
        algorithms = new.eval("len(sweep(4096, 64, Ms).totals)")
    return cost, curves, algorithms


def bench_collector(before, N=1024, d=64, live=0, repeats=7):
    """Median seconds of ``run("flash")`` and of ``run(..., trace=True)`` at ``(N, d, M = d^2)``
    on ``[before, now]``, the two sides timed alternately, each process holding ``live`` more
    objects that the collector tracks (as a notebook session does)."""
    setup = ("import numpy as np, ioattn\n"
             f"Q, K, V = np.random.default_rng(0).standard_normal((3, {N}, {d}))\nM = {d * d}\n"
             f"live = [{{'i': i}} for i in range({live})]")
    with Side(before) as old, Side() as new:
        for side in (old, new):
            side.exec(setup)
        plain = interleaved([old, new], "ioattn.run('flash', Q, K, V, M)", repeats)
        traced = interleaved([old, new], "ioattn.run('flash', Q, K, V, M, trace=True)", repeats)
    return plain, traced


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--before", default=BEFORE,
                        help=f"the commit 1, 3 and 4 compare with ({BEFORE}; 'none': skip them)")
    args = parser.parse_args(argv)
    compare = args.before.lower() != "none"

    print(f"ioattn {ioattn.__version__} simulator benchmark; Python {platform.python_version()}, "
          f"NumPy {np.__version__}, {platform.machine()}; medians of runs timed alternately")
    t_plain, t_counted, p = bench_overhead()
    rows = [(f"flash run / plain NumPy (N=1024, d=64, M=4096, B_r={p.B_r}, B_c={p.B_c})",
             f"{t_plain:.3f} s", f"{t_counted:.3f} s", f"{t_counted / t_plain:.2f}x")]
    figures = {"run_plain_s": t_plain, "run_counted_s": t_counted,
               "overhead_ratio": t_counted / t_plain}
    if compare:
        (c_old, c_new), (k_old, k_new), algorithms = bench_closed_forms(args.before)
        rows += [(f"10,000 io_cost calls: before ({args.before}) / now", f"{c_old:.3f} s",
                  f"{c_new:.3f} s", f"{c_new / c_old:.3f}x"),
                 (f"explorer curves, {algorithms} algorithms x {len(CURVE_MS)} M, N=4096, d=64: "
                  "before / now", f"{k_old * 1e3:.1f} ms", f"{k_new * 1e3:.1f} ms",
                  f"{k_new / k_old:.3f}x")]
        figures.update(io_cost_10k_before_s=c_old, io_cost_10k_now_s=c_new,
                       curves_before_s=k_old, curves_now_s=k_new)
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'first':>9}  {'second':>9}  second/first")
    for what, first, second, ratio in rows:
        print(f"{what:<{width}}  {first:>9}  {second:>9}  {ratio}")
    if compare:
        print(f"\nThe garbage collector off during a run: before ({args.before}) and now, "
              "N=1024, d=64, M=4096, medians of runs timed alternately")
        print(f"{'what':<50}  {'before':>9}  {'now':>9}  now/before")
        for live in (0, 2_000_000):
            (p_old, p_new), (t_old, t_new) = bench_collector(args.before, live=live)
            where = f", {live:,} live objects" if live else ""
            for what, b, n in ((f"run('flash'){where}", p_old, p_new),
                               (f"run('flash', trace=True){where}", t_old, t_new)):
                print(f"{what:<50}  {b:>8.3f}s  {n:>8.3f}s  {n / b:.3f}x")
            print(f"{'  trace overhead (traced / plain)':<50}  {t_old / p_old:>8.2f}x  "
                  f"{t_new / p_new:>8.2f}x")
            figures[f"gc_live_{live}"] = {"run_before_s": p_old, "run_now_s": p_new,
                                          "trace_before_s": t_old, "trace_now_s": t_new}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
