"""How far the exact optimum of the red-blue pebble game reaches: the compiled search against the
pure-Python one it replaced, side by side. Prints a table.

For attention graphs ``attention_graph(N, d)`` and matrix-product graphs ``matmul_graph(m, k, n)``
of increasing size, ``min_io`` solves each at a few cache sizes: the smallest feasible ``M`` (the
largest in-degree plus one), the next two, one in between, and ``M`` = every vertex, within a time
limit per instance (60 s by default). Each instance runs twice, one engine after the other:
*before*, the pure-Python search as it was at commit ``--before`` (``benchmarks/sides.py``:
``ioattn`` from that commit, in a process of its own), and *now*, this tree's default engine, the
search compiled by Numba, in another process (its one-off compilation happens before, and is timed
on its own line), without merging mirror images (``symmetry=False``), so that it runs the same
search; ``--merge`` runs it as ``min_io`` does by default, merging them. A family stops growing at
the first graph with an instance the compiled search does not finish in time.

Columns: vertices, ``M``, the optimum ``Q(G, M)`` found by each (``>= bound`` where a search gave
up: the lower bound it had proved), whether the optima (and, without ``--merge``, the states
expanded) are equal where both finished (they must be: the two engines run the same search), the
states each expanded, its seconds and states expanded per second, the compiled search's memory per
state reached (the bytes of its table, queue and memo arrays over the states it reached; shown from
10,000 states) and the ratio of the states per second (from 1,000 states expanded). The memory of
the Python search per state is measured once, by ``tracemalloc``, on one instance.

Run ``python benchmarks/pebble.py`` (half an hour or more; ``--time-limit 5`` for a quick look).
It needs the repository's history (for the *before* side) and Numba.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sides import BEFORE, Side  # noqa: E402

from ioattn.pebble import attention_graph, matmul_graph  # noqa: E402
from ioattn.pebble.search import MAX_VERTICES  # noqa: E402

#: The graphs of each family, by number of vertices.
ATTENTION = [(1, 1), (1, 2), (1, 3), (2, 1), (1, 4), (2, 2), (3, 1)]
MATMUL = [(1, 1, 1), (1, 2, 1), (2, 1, 2), (1, 3, 1), (2, 2, 1), (1, 4, 1), (2, 2, 2),
          (3, 2, 2), (2, 3, 2), (3, 3, 3)]
BUILDERS = {"attention": attention_graph, "matmul": matmul_graph}

#: The memory per state is shown where the compiled search reached this many states at least (below,
#: the arrays' smallest sizes dominate it).
MEMORY_FROM = 10_000

#: The instance whose memory per state is measured for the Python search.
MEMORY_INSTANCE = ("attention", (2, 1), 5)

#: Run in each side: solve one instance, leave the outcome in ``r`` (a dict).
SOLVE = """
from ioattn.pebble import attention_graph, matmul_graph, min_io, SearchLimitError
g = {build}{shape}
try:
    o = min_io(g, {M}, time_limit={T}, max_states=10**12, progress=False{options})
    r = dict(io=o.io, states=o.states, seconds=o.seconds, generated=o.generated,
             memory=getattr(o, "memory", 0), engine=getattr(o, "engine", "python"), solved=True)
except SearchLimitError as e:
    r = dict(io=e.bound, states=e.states, seconds=e.seconds,
             generated=getattr(e, "generated", None), memory=getattr(e, "memory", None),
             solved=False)
del g
"""


def cache_sizes(graph) -> list[int]:
    """The smallest feasible M and the next two, one in between (the geometric mean of the
    smallest and the number of vertices) and all vertices."""
    low, top = graph.max_in_degree + 1, len(graph)
    mid = round(math.sqrt(low * top))
    return sorted({M for M in (low, low + 1, low + 2, mid, top) if low <= M <= top})


def solve(side: Side, family: str, shape, M: int, time_limit: float, options: str = "") -> dict:
    side.exec(SOLVE.format(build=family + "_graph", shape=shape, M=M, T=time_limit,
                           options=options))
    return side.eval("r")


#: The options of the *now* side: the same search as before (``--merge``: merging mirror images,
#: which expands fewer states, so that only the optima are compared).
NOW = {"options": ", symmetry=False", "merge": False}


def same_search(before: dict, now: dict) -> bool:
    """Equal optima and (unless the now side merges mirror images) equal states expanded."""
    return before["io"] == now["io"] and (NOW["merge"] or before["states"] == now["states"])


def run_family(name, shapes, time_limit, old, new, out):
    """Solve the family's graphs in order on both sides; return the rows (dicts)."""
    rows = []
    for shape in shapes:
        graph = BUILDERS[name](*shape)
        if len(graph) > MAX_VERTICES:
            print(f"  {name}{shape}: {len(graph)} vertices, more than the search takes "
                  f"({MAX_VERTICES}); the family stops here", file=out)
            break
        failed = False
        for M in cache_sizes(graph):
            before = solve(old, name, shape, M, time_limit)
            now = solve(new, name, shape, M, time_limit, NOW["options"])
            if now["solved"] and now["engine"] != "compiled":
                raise SystemExit(f"the compiled engine did not run (engine {now['engine']!r}): "
                                 "is numba installed?")
            row = dict(family=name, shape=shape, vertices=len(graph), M=M, before=before,
                       now=now)
            rows.append(row)
            print(format_row(row), file=out, flush=True)
            failed = failed or not now["solved"]
        if failed:
            print(f"  {name}{shape} has an instance the compiled search does not solve in "
                  f"{time_limit:g} s: the family stops here", file=out, flush=True)
            break
    return rows


HEADER = (f"{'graph':<18}{'vert':>5}{'M':>4}{'Q before':>10}{'Q now':>9}{'same':>6}"
          f"{'states before':>15}{'states now':>13}{'s before':>10}{'s now':>8}"
          f"{'states/s before':>17}{'states/s now':>14}{'B/state':>9}{'ratio':>8}")


def _q(r) -> str:
    return str(r["io"]) if r["solved"] else f">= {r['io']}"


def _rate(r) -> float:
    return r["states"] / r["seconds"] if r["seconds"] > 0 else float("nan")


def format_row(row) -> str:
    b, n = row["before"], row["now"]
    shape = ", ".join(map(str, row["shape"]))
    same = ("yes" if same_search(b, n) else "NO") if b["solved"] and n["solved"] else "-"
    per_state = (f"{n['memory'] / n['generated']:.0f}" if n["generated"] >= MEMORY_FROM
                 else "-")
    ratio = _rate(n) / _rate(b) if b["states"] > 1000 and n["states"] > 1000 else float("nan")
    ratio_text = f"{ratio:.0f}x" if math.isfinite(ratio) else "-"
    return (f"{row['family'] + '(' + shape + ')':<18}{row['vertices']:>5}{row['M']:>4}"
            f"{_q(b):>10}{_q(n):>9}{same:>6}{b['states']:>15,}{n['states']:>13,}"
            f"{b['seconds']:>10.2f}{n['seconds']:>8.2f}{_rate(b):>17,.0f}{_rate(n):>14,.0f}"
            f"{per_state:>9}{ratio_text:>8}")


def describe(rows, vertices, side) -> str:
    """One graph's instances on one side: which M were solved (with Q) and which were not."""
    at = [r for r in rows if r["vertices"] == vertices]
    shape = ", ".join(map(str, at[0]["shape"]))
    solved = ", ".join(f"{r['M']} (Q = {r[side]['io']}, {r[side]['seconds']:.1f} s)"
                       for r in at if r[side]["solved"])
    failed = [str(r["M"]) for r in at if not r[side]["solved"]]
    text = f"{at[0]['family']}({shape}), {vertices} vertices: solved at M = {solved or 'none'}"
    return text + (f"; not at M = {', '.join(failed)}" if failed else "")


def largest(rows, side) -> list[str]:
    """The largest graph solved at every M tried (the smallest feasible M included), and the
    largest solved at some M, if larger."""
    lines = []
    whole = [v for v in {r["vertices"] for r in rows}
             if all(r[side]["solved"] for r in rows if r["vertices"] == v)]
    some = [r["vertices"] for r in rows if r[side]["solved"]]
    if whole:
        lines.append(f"  at every M tried: {describe(rows, max(whole), side)}")
    if some and (not whole or max(some) > max(whole)):
        lines.append(f"  at some M: {describe(rows, max(some), side)}")
    return lines or ["  none"]


def compile_times() -> tuple[float, float]:
    """Seconds to make the compiled kernels ready in a fresh process: compiling them (an empty
    Numba cache), and loading them from the cache that wrote."""
    times = []
    for _ in range(2):
        with Side(label="compile") as side:
            times.append(side.eval("__import__('ioattn.pebble.compiled', fromlist=['x'])"
                                   ".compile_seconds()"))
    return times[0], times[1]


def python_memory(old: Side, time_limit: float) -> str:
    """The Python search's memory per state reached on :data:`MEMORY_INSTANCE`."""
    family, shape, M = MEMORY_INSTANCE
    r = solve(old, family, shape, M, time_limit)
    if not r["solved"]:
        return f"{family}{shape} at M = {M} not solved in {time_limit:g} s: not measured"
    code = (f"from ioattn.pebble import {family}_graph, min_io\n"
            f"min_io({family}_graph{shape}, {M}, progress=False)")
    peak = old.peak(code)
    return (f"{peak / r['generated']:,.0f} bytes per state reached, {peak / r['states']:,.0f} "
            f"per state expanded (tracemalloc peak {peak / 2**20:,.0f} MiB, {r['generated']:,} "
            f"states reached, {r['states']:,} expanded) on {family}{shape} at M = {M}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds per instance and engine (default 60)")
    parser.add_argument("--family", choices=["attention", "matmul", "both"], default="both")
    parser.add_argument("--before", default=BEFORE,
                        help=f"the commit of the Python search compared (default {BEFORE})")
    parser.add_argument("--merge", action="store_true",
                        help="the compiled search merges mirror images (min_io's default); "
                             "without it, symmetry=False: the same states as the Python search")
    args = parser.parse_args(argv)
    if args.merge:
        NOW.update(options="", merge=True)
    out = sys.stdout
    print(f"Exact red-blue pebbling (min_io): the pure-Python search at {args.before} (before) "
          f"and the compiled search (now), {args.time_limit:g} s per instance each; Python "
          f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores",
          file=out)
    started = time.perf_counter()
    saved = os.environ.get("NUMBA_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="ioattn-numba-") as cache:
        os.environ["NUMBA_CACHE_DIR"] = cache        # every "now" process uses this cache only
        try:
            compiling, loading = compile_times()
            print(f"Compiling the kernels (once per installation; Numba caches them on disk): "
                  f"{compiling:.1f} s. Loading them from the cache in a new process: "
                  f"{loading:.2f} s. Neither is in the seconds below.", file=out, flush=True)
            with Side(args.before) as old, Side() as new:
                new.exec("from ioattn.pebble import compiled; compiled.compile_seconds()")
                print(HEADER, file=out, flush=True)
                results = {}
                for name, shapes in (("attention", ATTENTION), ("matmul", MATMUL)):
                    if args.family in (name, "both"):
                        results[name] = run_family(name, shapes, args.time_limit, old, new, out)
                print(f"\nMemory of the Python search (before): "
                      f"{python_memory(old, args.time_limit)}.", file=out)
        finally:
            if saved is None:
                os.environ.pop("NUMBA_CACHE_DIR", None)
            else:
                os.environ["NUMBA_CACHE_DIR"] = saved
    rows = [r for family in results.values() for r in family]
    both = [r for r in rows if r["before"]["solved"] and r["now"]["solved"]]
    equal = sum(same_search(r["before"], r["now"]) for r in both)
    what = "Optimum" if NOW["merge"] else "Optimum and states expanded"
    print(f"{what} equal on {equal} of the {len(both)} instances both solved.", file=out)
    print(f"Total {time.perf_counter() - started:.0f} s.", file=out)
    for name, family in results.items():
        for side, label in (("before", "Python, before"), ("now", "compiled, now")):
            print(f"Largest {name} instance solved within {args.time_limit:g} s ({label}):",
                  file=out)
            for line in largest(family, side):
                print(line, file=out)
    return 0 if equal == len(both) else 1


if __name__ == "__main__":
    sys.exit(main())
