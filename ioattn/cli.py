"""The ``ioattn`` command (also ``python -m ioattn``).

``ioattn sweep --N 4096 --d 64`` prints the exact I/O of every algorithm over powers of two of M,
marks the cheapest and the crossover, and with ``--plot FILE`` saves the log-log plot.
``--check`` also runs every point on random data through the memory model and confirms that the
counted I/O equals the closed form (slow for large N; a progress bar shows how far it is).

``ioattn assign ASSIGNMENT --student ID`` writes a student's notebook with their own parameters
(and builds the student version and the autograder from the master notebook); ``ioattn grade
ASSIGNMENT SUBMISSION`` grades a submitted notebook, or a folder of them, locally, and prints
per-question scores (``--json`` for JSON, ``--csv FILE`` for a score sheet). See the instructor
guide in the book.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from . import __version__
from .algorithms import REGISTRY, get
from .api import io_cost, run, run_backward
from .sweep import powers_of_two, sweep


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in REGISTRY:
            raise argparse.ArgumentTypeError(
                f"unknown algorithm {n!r}; known algorithms: {', '.join(sorted(REGISTRY))}")
    return names


def _option(text: str) -> tuple[str, str, object]:
    try:
        target, value = text.split("=", 1)
        name, key = target.split(".", 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected NAME.KEY=VALUE (e.g. square_tiling.schedule=outer), got {text!r}") from None
    _names(name)
    if key not in get(name).options:
        known = ", ".join(sorted(get(name).options)) or "none"
        raise argparse.ArgumentTypeError(f"{name} has no option {key!r}; its options: {known}")
    return name, key, int(value) if value.isdigit() else value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ioattn", description="The I/O complexity of attention, "
                                "counted exactly in a two-level memory model.")
    p.add_argument("--version", action="version", version=f"ioattn {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="exact I/O of each algorithm over M = powers of two")
    s.add_argument("--N", type=_positive, required=True, help="sequence length")
    s.add_argument("--d", type=_positive, required=True, help="head dimension")
    s.add_argument("--M-min", type=_positive, default=4, help="smallest M (default 4)")
    s.add_argument("--M-max", type=_positive, help="largest M (default 32 d^2)")
    s.add_argument("--algorithms", type=_names, help="comma-separated names (default: all)")
    s.add_argument("--option", type=_option, action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="an algorithm's option, e.g. square_tiling.schedule=outer (repeatable)")
    s.add_argument("--plot", metavar="FILE", help="save a log-log plot (PNG, SVG, PDF...)")
    s.add_argument("--backward", action="store_true",
                   help="the backward pass (gradients dQ, dK, dV) instead of the forward")
    s.add_argument("--check", action="store_true",
                   help="also simulate every point on random data and compare with the closed form")
    sub.add_parser("algorithms", help="list the algorithms")
    from .teach.cli import add_commands

    add_commands(sub)
    return p


def _check(result, seed: int = 0) -> int:
    """Simulate every feasible point; return the number of mismatches (printed)."""
    from tqdm import tqdm

    rng = np.random.default_rng(seed)
    Q, K, V, dO = (rng.standard_normal((result.N, result.d)) for _ in range(4))
    points = [(name, M) for name, totals in sorted(result.totals.items())
              for M, t in zip(result.Ms, totals) if t is not None]
    bad = 0
    for name, M in tqdm(points, desc="simulating", unit="run", file=sys.stderr):
        opts = result.options.get(name, {})
        if result.backward:
            counted = run_backward(name, Q, K, V, dO, M, **opts).io
        else:
            counted = run(name, Q, K, V, M, **opts).io
        closed = io_cost(name, result.N, result.d, M, backward=result.backward, **opts)
        if counted != closed:
            bad += 1
            print(f"MISMATCH {name} M={M}: counted {counted}, closed form {closed}")
    print(f"checked {len(points)} runs: "
          + ("every count equals its closed form" if not bad else f"{bad} mismatches"))
    return bad


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("assign", "grade"):
        from .teach.cli import run_command

        return run_command(args)
    if args.command == "algorithms":
        for name in sorted(REGISTRY):
            print(f"{name:15} {get(name).summary}")
        return 0
    M_max = args.M_max or 32 * args.d * args.d
    if M_max < args.M_min:
        print(f"ioattn: --M-max ({M_max}) is below --M-min ({args.M_min})", file=sys.stderr)
        return 2
    Ms = powers_of_two(args.M_min, M_max)
    if not Ms:
        print(f"ioattn: no power of two between {args.M_min} and {M_max}", file=sys.stderr)
        return 2
    options: dict[str, dict] = {}
    for name, key, value in args.option:
        options.setdefault(name, {})[key] = value
    try:
        result = sweep(args.N, args.d, Ms, args.algorithms, options, backward=args.backward)
    except (TypeError, ValueError) as exc:
        print(f"ioattn: {exc}", file=sys.stderr)
        return 2
    print(result.table())
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from .plotting import plot_sweep

        ax = plot_sweep(result)
        ax.figure.savefig(args.plot, dpi=150)
        print(f"plot saved to {args.plot}")
    if args.check and _check(result):
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
