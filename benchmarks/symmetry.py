"""What merging mirror images gains the exact pebbling search: ``min_io`` with ``symmetry=False``
(every state) against its default (one state for each set of images under the graph's
automorphisms, ``ioattn.pebble.symmetry``), side by side in one process. Prints a table.

Each instance runs both ways, one after the other, within a time limit each (30 s by default):
the optimum (or ``>= bound``, the lower bound proved when the search gave up), the states
expanded, the seconds, and the ratio of the states expanded where both finished. A second table
gives, for the instances neither way finishes, how far each gets with the same number of states
expanded: the bound proved, and the seconds.

Run ``python benchmarks/symmetry.py`` (about ten minutes; ``--time-limit 5`` for a quick look).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sides import table  # noqa: E402

from ioattn.pebble import (  # noqa: E402
    SearchLimitError,
    attention_graph,
    compiled,  # noqa: E402
    matmul_graph,
    min_io,
)
from ioattn.pebble.symmetry import Symmetry  # noqa: E402

#: (label, graph, M): solved both ways, or at least with merging.
INSTANCES = [
    ("attention(2, 1)", attention_graph(2, 1), 3),
    ("attention(2, 1)", attention_graph(2, 1), 4),
    ("attention(1, 4)", attention_graph(1, 4), 3),
    ("attention(3, 1)", attention_graph(3, 1), 3),
    ("matmul(2, 2, 2)", matmul_graph(2, 2, 2), 3),
    ("matmul(3, 2, 2)", matmul_graph(3, 2, 2), 3),
    ("attention(2, 2)", attention_graph(2, 2), 9),
    ("attention(2, 2)", attention_graph(2, 2), 8),
]
#: (label, graph, M, states): the same number of states expanded both ways.
BUDGETS = [
    ("attention(2, 2)", attention_graph(2, 2), 7, 1_000_000),
    ("attention(2, 2)", attention_graph(2, 2), 6, 1_000_000),
    ("attention(2, 2)", attention_graph(2, 2), 5, 1_000_000),
]


def solve(graph, M: int, symmetry: bool, time_limit=None, max_states=10**12) -> dict:
    try:
        o = min_io(graph, M, time_limit=time_limit, max_states=max_states, progress=False,
                   symmetry=symmetry)
        return dict(q=str(o.io), states=o.states, seconds=o.seconds, solved=True)
    except SearchLimitError as e:
        return dict(q=f">= {e.bound}", states=e.states, seconds=e.seconds, solved=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=30.0,
                        help="seconds per instance and way (default 30)")
    args = parser.parse_args(argv)
    compiled.compile_seconds()
    print(f"Exact pebbling with and without merging mirror images (compiled search), "
          f"{args.time_limit:g} s per instance each; Python {platform.python_version()} on "
          f"{platform.machine()}, {os.cpu_count()} cores")
    rows = []
    for label, g, M in INSTANCES:
        every = solve(g, M, False, args.time_limit)
        merged = solve(g, M, True, args.time_limit)
        ratio = (f"{every['states'] / merged['states']:.1f}x"
                 if every["solved"] and merged["solved"] else "-")
        rows.append((label, len(g), len(Symmetry(g)), M, every["q"], merged["q"],
                     f"{every['states']:,}", f"{merged['states']:,}",
                     f"{every['seconds']:.2f}", f"{merged['seconds']:.2f}", ratio))
    print(table(rows, ["graph", "vertices", "images", "M", "Q every", "Q merged",
                       "states every", "states merged", "s every", "s merged",
                       "fewer states"]))
    rows = []
    for label, g, M, budget in BUDGETS:
        every = solve(g, M, False, max_states=budget)
        merged = solve(g, M, True, max_states=budget)
        rows.append((label, M, f"{budget:,}", every["q"], merged["q"],
                     f"{every['seconds']:.2f}", f"{merged['seconds']:.2f}"))
    print(table(rows, ["graph", "M", "states expanded", "Q every", "Q merged", "s every",
                       "s merged"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
