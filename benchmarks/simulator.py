"""How fast the simulator and the closed forms are. Prints a table; run with `make bench`.

1. 10,000 ``io_cost`` calls over random (algorithm, N, d, M): target under 0.5 s in total.
2. ``run("flash", ...)`` through the memory model against the same FA2 tiled loop in plain NumPy
   (same block sizes, from ``ioattn.plan``), at N = 1024, d = 64, M = d^2: target ratio <= 1.5.
   Both are timed alternately in one process; the ratio of the medians is reported.
3. The explorer's curve set, 3 algorithms x 32 values of M at N = 4096, d = 64 (exact totals,
   lower bounds and exact crossovers, via ``ioattn.sweep.sweep``): target under 20 ms.
4. The garbage collector: ``run("flash", ...)`` and ``run(..., trace=True)`` at N = 1024, d = 64,
   M = d^2, this tree against the commit ``--before`` (default: the one before the speed work),
   each in its own process, timed alternately (``benchmarks/sides.py``): ``run`` now switches
   Python's cyclic garbage collector off while it simulates. In a bare process and in one that
   holds 2,000,000 live objects (as a notebook session does, where the collector's full passes
   cost most). Needs the repository's history (``--before none`` leaves it out).
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
from ioattn.sweep import sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sides import BEFORE, Side, interleaved  # noqa: E402

VARIANTS = [("flash", {}), ("flash", {"variant": "fa1"}), ("square_tiling", {}),
            ("square_tiling", {"schedule": "outer"}), ("standard", {})]


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


def bench_io_cost(calls=10_000, seed=0):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(calls):
        name, options = VARIANTS[rng.integers(len(VARIANTS))]
        N, d = int(rng.integers(1, 65_537)), int(rng.integers(1, 513))
        lo = _least(name, d, options)
        M = int(rng.integers(lo, max(lo + 1, 64 * d * d)))
        cases.append((name, N, d, M, options))
    start = time.perf_counter()
    for name, N, d, M, options in cases:
        ioattn.io_cost(name, N, d, M, **options)
    return time.perf_counter() - start


def _least(name, d, options):
    from ioattn.algorithms import get

    algo = get(name)
    return algo.min_M(d, **{**algo.options, **options})


def bench_overhead(N=1024, d=64, repeats=5, seed=0):
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


def bench_curves(N=4096, d=64, repeats=20):
    Ms = sorted({int(round(2 ** (k / 2))) for k in range(4, 36)})
    assert len(Ms) == 32
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        s = sweep(N, d, Ms)
        times.append(time.perf_counter() - t)
    return statistics.median(times), s


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
                        help=f"the commit section 4 compares with ({BEFORE}; 'none': skip it)")
    args = parser.parse_args(argv)

    t_cost = bench_io_cost()
    t_plain, t_counted, p = bench_overhead()
    t_curves, s = bench_curves()
    ratio = t_counted / t_plain
    rows = [
        ("10,000 io_cost calls", f"{t_cost:.3f} s", "< 0.5 s", t_cost < 0.5),
        (f"flash run / plain NumPy (N=1024, d=64, M=4096, B_r={p.B_r}, B_c={p.B_c})",
         f"{ratio:.2f}x ({t_counted:.3f} s / {t_plain:.3f} s)", "<= 1.5x", ratio <= 1.5),
        (f"explorer curves: {len(s.totals)} algorithms x {len(s.Ms)} M, N=4096, d=64",
         f"{t_curves * 1e3:.1f} ms", "< 20 ms", t_curves < 0.020),
    ]
    print(f"ioattn {ioattn.__version__} simulator benchmark; Python {platform.python_version()}, "
          f"NumPy {np.__version__}, {platform.machine()}")
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'measured':<34}  {'target':<8}  ok")
    for what, measured, target, ok in rows:
        print(f"{what:<{width}}  {measured:<34}  {target:<8}  {'yes' if ok else 'NO'}")
    figures = {"io_cost_10k_s": t_cost, "run_plain_s": t_plain, "run_counted_s": t_counted,
               "overhead_ratio": ratio, "curves_s": t_curves}
    if args.before.lower() != "none":
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
