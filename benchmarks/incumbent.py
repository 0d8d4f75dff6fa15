"""What a good game known beforehand and a second thread gain the exact pebbling search, side by
side in one process. Prints a table.

Each instance runs three ways, one after the other, within a time limit each (120 s by default):
*plain*, ``min_io`` as it runs by default (one thread, no incumbent); *incumbent*, with the game
``good_game`` finds handed over as ``incumbent`` (the search then keeps no state whose ``f``
reaches that game's I/O, and stops once none is left below it); and *2 threads*, the same on two
threads (``threads=2``). Columns: the I/O of the good game and the seconds spent finding it; for
each way the optimum (``>= bound`` where the search gave up: the lower bound it had proved), the
states expanded, the seconds (the good game's excluded) and, for the plain search, the states it
reached; the memory of each search's arrays; and the ratio of the plain search's seconds to each
other way's where both finished.

The target of ``attention_graph(2, 2)`` at ``M = 5``, proved optimal within 60 s on two cores, is
the last row.

Run ``python benchmarks/incumbent.py`` (about ten minutes; ``--time-limit 30`` for a quick look).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sides import table  # noqa: E402

from ioattn.pebble import (  # noqa: E402
    PebbleGame,
    SearchLimitError,
    attention_graph,
    compiled,
    good_game,
    matmul_graph,
    min_io,
)

#: (label, graph, M)
INSTANCES = [
    ("attention(2, 1)", attention_graph(2, 1), 3),
    ("matmul(3, 2, 2)", matmul_graph(3, 2, 2), 3),
    ("attention(3, 1)", attention_graph(3, 1), 3),
    ("attention(2, 2)", attention_graph(2, 2), 8),
    ("attention(2, 2)", attention_graph(2, 2), 7),
    ("attention(2, 2)", attention_graph(2, 2), 5),
]


def solve(graph, M: int, time_limit: float, **options) -> dict:
    try:
        o = min_io(graph, M, time_limit=time_limit, max_states=10**12, progress=False,
                   **options)
        return dict(q=str(o.io), states=o.states, seconds=o.seconds, memory=o.memory,
                    solved=True)
    except SearchLimitError as e:
        return dict(q=f">= {e.bound}", states=e.states, seconds=e.seconds, memory=e.memory,
                    solved=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=120.0,
                        help="seconds per instance and way (default 120)")
    args = parser.parse_args(argv)
    compiled.compile_seconds()
    print(f"Exact pebbling (compiled search) plain, with the good game as incumbent, and with it "
          f"on 2 threads; {args.time_limit:g} s per instance each; Python "
          f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    rows = []
    for label, g, M in INSTANCES:
        started = time.perf_counter()
        game = good_game(g, M)
        found = time.perf_counter() - started
        upper = PebbleGame.replay(g, M, game).io
        runs = [solve(g, M, args.time_limit),
                solve(g, M, args.time_limit, incumbent=game),
                solve(g, M, args.time_limit, incumbent=game, threads=2)]
        plain = runs[0]
        ratios = [f"{plain['seconds'] / r['seconds']:.2f}x"
                  if plain["solved"] and r["solved"] else "-" for r in runs[1:]]
        rows.append((label, M, upper, f"{found:.2f}",
                     *(r["q"] for r in runs),
                     *(f"{r['states']:,}" for r in runs),
                     *(f"{r['seconds']:.1f}" for r in runs),
                     *(f"{r['memory'] / 2**20:,.0f}" for r in runs), *ratios))
    print(table(rows, ["graph", "M", "good game", "s", "Q plain", "Q inc", "Q 2 thr",
                       "states plain", "states inc", "states 2 thr", "s plain", "s inc",
                       "s 2 thr", "MiB plain", "MiB inc", "MiB 2 thr", "inc faster",
                       "2 thr faster"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
