"""The exact pebbling search before and after counting ``h`` once per evicted vertex. Prints a
table.

Where the heuristic has no term ``E`` (the attention and matrix-product graphs), the ``h`` of a
successor that places ``x`` and evicts ``u`` comes from one count of the state with ``u`` evicted,
shared by every ``x`` (``ioattn.pebble.compiled._h_evicting``); before, each such successor was
counted in full. The search is the same: the same states, in the same order, to the same optimum.

Each instance runs on both sides, each side in its own process (``benchmarks/sides.py``), timed
alternately ``--repeats`` times after both have compiled the search; the table gives the median
seconds of each side, their ratio, the optimum and the states expanded (equal on both sides, or
the benchmark stops). The last two rows are the target of issue 17: ``attention_graph(2, 2)`` at
``M = 5`` proved optimal within 60 s on two cores, with the game ``good_game`` finds as the
incumbent (its seconds excluded), on one thread and on two.

Run ``python benchmarks/evictions.py`` from a clone (8 to 15 minutes on 2 cores; ``--before REV``
to compare with another commit).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sides import Side, table  # noqa: E402

#: The commit before the change.
BEFORE = "439e218"

#: (label, graph, M, options of min_io)
INSTANCES = [
    ("attention(2, 1), M = 3", "attention_graph(2, 1)", 3, ""),
    ("matmul(3, 2, 2), M = 3", "matmul_graph(3, 2, 2)", 3, ""),
    ("attention(2, 2), M = 8", "attention_graph(2, 2)", 8, ""),
    ("attention(2, 2), M = 5, incumbent", "attention_graph(2, 2)", 5, "incumbent=game"),
    ("attention(2, 2), M = 5, incumbent, 2 threads", "attention_graph(2, 2)", 5,
     "incumbent=game, threads=2"),
]

SETUP = """
from ioattn.pebble import attention_graph, matmul_graph, min_io, good_game, compiled
compiled.compile_seconds()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the commit to compare with")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per side")
    args = parser.parse_args()
    rows = []
    with Side(args.before) as old, Side() as new:
        for side in (old, new):
            side.exec(SETUP)
        for label, graph, M, options in INSTANCES:
            for side in (old, new):
                side.exec(f"g = {graph}\ngame = good_game(g, {M})")
            run = f"o = min_io(g, {M}, max_states=10**12, progress=False, {options})"
            seconds = [[], []]
            for _ in range(args.repeats):
                for side, t in zip((old, new), seconds):
                    t.append(side.time(run))
            found = [side.eval("(o.io, o.states)") for side in (old, new)]
            if found[0] != found[1]:
                raise SystemExit(f"{label}: the two sides differ: {found}")
            before, now = (statistics.median(t) for t in seconds)
            rows.append([label, found[1][0], f"{found[1][1]:,}", f"{before:.1f}", f"{now:.1f}",
                         f"{before / now:.2f}x"])
            print(table(rows[-1:], ["instance", "Q", "states", "s before", "s now", "faster"]),
                  file=sys.stderr, flush=True)
    print(f"Exact pebbling (compiled search) before ({args.before}) and now, median of "
          f"{args.repeats} runs each, timed alternately; Python {platform.python_version()} on "
          f"{platform.machine()}, {os.cpu_count()} cores")
    print(table(rows, ["instance", "Q", "states", "s before", "s now", "faster"]))


if __name__ == "__main__":
    main()
