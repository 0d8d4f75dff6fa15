"""How far the exact optimum of the red-blue pebble game reaches. Prints a table.

For attention graphs ``attention_graph(N, d)`` and matrix-product graphs ``matmul_graph(m, k, n)``
of increasing size, ``ioattn.pebble.search.min_io`` solves each at a few cache sizes: the
smallest feasible ``M`` (the largest in-degree plus one), the next two, one in between, and
``M`` = every vertex, within a time limit per instance (60 s by default). A family stops
growing at the first graph with an instance that does not finish in time. Columns: vertices,
``M``, the optimum ``Q(G, M)`` (or ``>= bound`` where the search gave up: the lower bound it had
proved), states expanded, seconds, and states expanded per second.

Run ``python benchmarks/pebble.py`` (several minutes; ``--time-limit 5`` for a quick look).
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time

from ioattn.pebble import attention_graph, matmul_graph
from ioattn.pebble.search import MAX_VERTICES, SearchLimitError, min_io

#: The graphs of each family, by number of vertices.
ATTENTION = [(1, 1), (1, 2), (1, 3), (2, 1), (1, 4), (2, 2), (3, 1)]
MATMUL = [(1, 1, 1), (1, 2, 1), (2, 1, 2), (1, 3, 1), (2, 2, 1), (1, 4, 1), (2, 2, 2),
          (3, 2, 2), (2, 3, 2), (3, 3, 3)]


def cache_sizes(graph) -> list[int]:
    """The smallest feasible M and the next two, one in between (the geometric mean of the
    smallest and the number of vertices) and all vertices."""
    low, top = graph.max_in_degree + 1, len(graph)
    mid = round(math.sqrt(low * top))
    return sorted({M for M in (low, low + 1, low + 2, mid, top) if low <= M <= top})


def run_family(name, build, shapes, time_limit, out):
    """Solve the family's graphs in order; return the rows (dicts) of every instance tried."""
    rows = []
    for shape in shapes:
        graph = build(*shape)
        if len(graph) > MAX_VERTICES:
            print(f"  {name}{shape}: {len(graph)} vertices, more than the search takes "
                  f"({MAX_VERTICES}); the family stops here", file=out)
            break
        failed = False
        for M in cache_sizes(graph):
            started = time.perf_counter()
            try:
                opt = min_io(graph, M, time_limit=time_limit, max_states=10**9, progress=False)
                row = dict(io=str(opt.io), states=opt.states, seconds=opt.seconds, solved=True)
            except SearchLimitError as stop:
                row = dict(io=f">= {stop.bound}", states=stop.states,
                           seconds=time.perf_counter() - started, solved=False)
                failed = True
            row.update(family=name, shape=shape, vertices=len(graph), M=M)
            rows.append(row)
            print(format_row(row), file=out, flush=True)
        if failed:
            print(f"  {name}{shape} has an instance not solved in {time_limit:g} s: the family "
                  "stops here", file=out, flush=True)
            break
    return rows


HEADER = (f"{'graph':<22}{'vertices':>9}{'M':>5}{'optimum':>10}{'states':>12}{'seconds':>10}"
          f"{'states/s':>11}")


def format_row(row) -> str:
    shape = ", ".join(map(str, row["shape"]))
    rate = row["states"] / row["seconds"] if row["seconds"] > 0 else float("nan")
    mark = "" if row["solved"] else "  (gave up)"
    return (f"{row['family'] + '(' + shape + ')':<22}{row['vertices']:>9}{row['M']:>5}"
            f"{row['io']:>10}{row['states']:>12,}{row['seconds']:>10.2f}{rate:>11,.0f}{mark}")


def describe(rows, vertices) -> str:
    """One graph's instances: which M were solved (with Q) and which were not."""
    at = [r for r in rows if r["vertices"] == vertices]
    shape = ", ".join(map(str, at[0]["shape"]))
    solved = ", ".join(f"{r['M']} (Q = {r['io']}, {r['seconds']:.1f} s)"
                       for r in at if r["solved"])
    failed = [str(r["M"]) for r in at if not r["solved"]]
    text = f"{at[0]['family']}({shape}), {vertices} vertices: solved at M = {solved}"
    return text + (f"; not at M = {', '.join(failed)}" if failed else "")


def largest(rows) -> list[str]:
    """The largest graph solved at every M tried (the smallest feasible M included), and the
    largest solved at some M, if larger."""
    lines = []
    whole = [v for v in {r["vertices"] for r in rows}
             if all(r["solved"] for r in rows if r["vertices"] == v)]
    some = [r["vertices"] for r in rows if r["solved"]]
    if whole:
        lines.append(f"  at every M tried: {describe(rows, max(whole))}")
    if some and (not whole or max(some) > max(whole)):
        lines.append(f"  at some M: {describe(rows, max(some))}")
    return lines or ["  none"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds per instance (default 60)")
    parser.add_argument("--family", choices=["attention", "matmul", "both"], default="both")
    args = parser.parse_args(argv)
    out = sys.stdout
    print(f"Exact red-blue pebbling (ioattn.pebble.search.min_io), {args.time_limit:g} s per "
          f"instance; Python {platform.python_version()} on {platform.machine()}", file=out)
    print(HEADER, file=out)
    started = time.perf_counter()
    results = {}
    if args.family in ("attention", "both"):
        results["attention"] = run_family("attention", attention_graph, ATTENTION,
                                          args.time_limit, out)
    if args.family in ("matmul", "both"):
        results["matmul"] = run_family("matmul", matmul_graph, MATMUL, args.time_limit, out)
    print(f"\nTotal {time.perf_counter() - started:.0f} s.", file=out)
    for name, rows in results.items():
        print(f"Largest {name} instance solved within {args.time_limit:g} s:", file=out)
        for line in largest(rows):
            print(line, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
