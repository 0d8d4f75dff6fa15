"""The ``ioattn`` command (also ``python -m ioattn``).

``ioattn sweep --N 4096 --d 64`` prints the exact I/O of every algorithm over powers of two of M,
marks the cheapest and the crossover, and with ``--plot FILE`` saves the log-log plot. Square
tiling runs the outer-product schedule, as in the book's crossover chapter (:data:`SWEEP_OPTIONS`;
``--option square_tiling.schedule=blocked`` for the blocked one).
``--check`` also runs every point on random data through the memory model and confirms that the
counted I/O equals the closed form (slow for large N; a progress bar shows how far it is).

``ioattn parallel --N 4096 --d 64 --heads 16`` prints the exact words of attention on ``P``
processors: for each ``P`` (powers of two up to ``--P-max``, or the list ``--P 2,4,8``) and each
algorithm of :mod:`ioattn.parallel`, the busiest processor's traffic, words received, messages
and memory, the lower bound on the words it receives and their ratio, the least traffic marked
(:mod:`ioattn.parallel.table`); ``--causal``, ``--backward``, ``--json``; ``--schemes`` adds the
schemes run in practice (zigzag ring attention, the all-gather of K, V, Ulysses x ring).

``ioattn assign ASSIGNMENT --student ID`` writes a student's notebook with their own parameters
(and builds the student version and the autograder from the master notebook); ``ioattn grade
ASSIGNMENT SUBMISSION`` grades a submitted notebook, or a folder of them, locally, and prints
per-question scores (``--json`` for JSON, ``--csv FILE`` for a score sheet). See the instructor
guide in the book.

A bad argument (a name that is not known, a range of ``M`` that is empty or where no algorithm
can run, a ``--plot`` file that cannot be written) is refused before anything is computed, with
one line on stderr naming the argument, and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

from . import __version__
from ._validate import suggest
from .algorithms import BACKWARD, REGISTRY, get
from .api import io_cost, run, run_backward
from .sweep import DEFAULT_OPTIONS, powers_of_two, sweep

#: The options ``ioattn sweep`` runs the algorithms with unless ``--option`` says otherwise: those
#: of the book's crossover chapter (:data:`ioattn.sweep.DEFAULT_OPTIONS`).
SWEEP_OPTIONS = DEFAULT_OPTIONS


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
    if not names:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated algorithm names, got {text!r}; known algorithms: "
            f"{', '.join(sorted(REGISTRY))}")
    for n in names:
        if n not in REGISTRY:
            raise argparse.ArgumentTypeError(
                f"unknown algorithm {n!r}{suggest(n, REGISTRY)}; known algorithms: "
                f"{', '.join(sorted(REGISTRY))}")
    return names


def _value(text: str):
    """An option's value as typed: an integer (``8``, ``-3``), a tuple of integers (``8,8``),
    ``None``, or else the text itself (``outer``). Whether the algorithm takes it is for the
    algorithm's own checks to say."""
    def number(t):
        return int(t) if re.fullmatch(r"[+-]?\d+", t.strip()) else None

    if text.strip() in ("None", "none"):
        return None
    if "," in text:
        parts = [number(t) for t in text.split(",")]
        if None in parts:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of integers (e.g. 8,8), got {text!r}")
        return tuple(parts)
    value = number(text)
    return text if value is None else value


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
        raise argparse.ArgumentTypeError(
            f"{name} has no option {key!r}{suggest(key, get(name).options)}; its options: "
            f"{known}")
    return name, key, _value(value)


def _processors(text: str) -> list[int]:
    """``--P 2,4,8``: distinct positive integers, sorted."""
    parts = [t.strip() for t in text.split(",")]
    try:
        Ps = [int(t) for t in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of positive integers (e.g. 2,4,8), got {text!r}"
        ) from None
    bad = [P for P in Ps if P < 1]
    if bad:
        raise argparse.ArgumentTypeError(f"processor counts must be positive, got {bad[0]}")
    return sorted(set(Ps))


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its errors on one line: ``PROG: error: MESSAGE``, exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _fail(args, message: str) -> int:
    """A bad combination of arguments found after parsing: one line on stderr, exit code 2."""
    print(f"{args.parser.prog}: error: {message}", file=sys.stderr)
    return 2


def _plot_target(path: str) -> str | None:
    """Why matplotlib could not save a figure to ``path`` (an unknown format, a missing or
    read-only folder), or None if it can."""
    from matplotlib.backend_bases import FigureCanvasBase

    if os.path.isdir(path):
        return f"{path!r} is a folder; name a file in it"
    formats = FigureCanvasBase.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in formats:
        return (f"cannot tell the format of {path!r}" if not ext else
                f"matplotlib cannot write .{ext} files") + \
            f"; use one of {', '.join('.' + f for f in sorted(formats))}"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"there is no folder {folder!r} to save {os.path.basename(path)!r} in"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder!r} is not writable"
    return None


def _gpu_names() -> list[str]:
    from .gpus import GPUS

    return list(GPUS)


def _link_names() -> list[str]:
    from .interconnect import LINKS

    return list(LINKS)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ioattn", description="The I/O complexity of attention, "
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
                   help="an algorithm's option, e.g. square_tiling.schedule=blocked (repeatable; "
                   "default: square_tiling.schedule=outer)")
    s.add_argument("--plot", metavar="FILE", help="save a log-log plot (PNG, SVG, PDF...)")
    s.add_argument("--backward", action="store_true",
                   help="the backward pass (gradients dQ, dK, dV) instead of the forward")
    s.add_argument("--check", action="store_true",
                   help="also simulate every point on random data and compare with the closed form")
    s.set_defaults(parser=s)
    sub.add_parser("algorithms", help="list the algorithms")
    par = sub.add_parser("parallel", help="exact words of attention on P processors, "
                         "with the lower bound (ring, striped, all_to_all, grid; --schemes "
                         "adds zigzag, all_gather, usp, usp_zigzag)",
                         description="Exact words of attention on P processors, with the lower "
                         "bound. Lists ring, striped, all_to_all and grid; --schemes adds the "
                         "schemes run in practice (zigzag, all_gather, usp, usp_zigzag).")
    par.add_argument("--N", type=_positive, required=True, help="sequence length")
    par.add_argument("--d", type=_positive, required=True, help="head dimension")
    par.add_argument("--heads", type=_positive, default=1, help="heads H (default 1)")
    which = par.add_mutually_exclusive_group()
    which.add_argument("--P", type=_processors, metavar="P1,P2,...",
                       help="processor counts, comma-separated")
    which.add_argument("--P-max", type=_positive, default=64,
                       help="powers of two from 2 to this (default 64)")
    par.add_argument("--causal", action="store_true", help="the causal mask")
    par.add_argument("--backward", action="store_true",
                     help="the backward pass (every algorithm and scheme has one)")
    par.add_argument("--schemes", action="store_true",
                     help="also the schemes run in practice: zigzag ring attention, the "
                     "all-gather of K, V, Ulysses x ring (USP, with a plain or a zigzag ring)")
    par.add_argument("--overlap", metavar="GPU", choices=_gpu_names(),
                     help="add the smallest N/P at which each ring's transfers hide behind its "
                     "compute on this GPU (a time model; forward pass): "
                     + ", ".join(_gpu_names()))
    par.add_argument("--link", choices=_link_names(), metavar="LINK",
                     help="the link for --overlap (default the GPU's link within a node): "
                     + ", ".join(_link_names()))
    par.add_argument("--json", action="store_true", help="print the rows as JSON")
    par.set_defaults(parser=par)
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


def _parallel(args) -> int:
    from .parallel.costs import ALGORITHMS, NAMES
    from .parallel.table import data, text

    Ps = args.P if args.P is not None else powers_of_two(2, args.P_max)
    if not Ps:
        args.parser.error(f"argument --P-max: {args.P_max} is less than 2 (on one processor "
                          "there is nothing to communicate; --P 1 shows it)")
    if Ps[-1] > args.N:
        what = "--P" if args.P is not None else "--P-max"
        args.parser.error(f"argument {what}: P = {Ps[-1]} is more than N = {args.N}; every "
                          "processor needs at least one row")
    if args.link is not None and args.overlap is None:
        args.parser.error("argument --link: it is the link of --overlap GPU; give --overlap too")
    table = data(args.N, args.d, Ps, heads=args.heads, causal=args.causal,
                 backward=args.backward, names=NAMES if args.schemes else ALGORITHMS,
                 overlap=args.overlap, link=args.link)
    if args.json:
        print(json.dumps(table, indent=1, ensure_ascii=False))
    else:
        print(text(args.N, args.d, Ps, heads=args.heads, causal=args.causal,
                   backward=args.backward, table=table["rows"], overlap=args.overlap,
                   link=args.link))
    return 0


def main(argv=None) -> int:
    try:
        code = _main(argv)
        # buffered output is written here, not at exit, where a closed pipe could not be caught
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # the reader of the output closed it early (`ioattn sweep ... | true`): stop quietly,
        # with the rest of the output sent nowhere so that Python's flush at exit cannot fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv) -> int:
    args = _parser().parse_args(argv)
    if args.command == "parallel":
        return _parallel(args)
    if args.command in ("assign", "grade"):
        from .teach.cli import run_command

        return run_command(args)
    if args.command == "algorithms":
        for name in sorted(REGISTRY):
            print(f"{name:15} {get(name).summary}")
        return 0
    return _sweep(args)


def _sweep(args) -> int:
    """``ioattn sweep``: every check of the arguments first, then the sweep."""
    M_max = args.M_max or 32 * args.d * args.d
    if M_max < args.M_min:
        return _fail(args, f"argument --M-max: {M_max} is less than --M-min = {args.M_min}: "
                     "the range of M is empty")
    Ms = powers_of_two(args.M_min, M_max)
    if not Ms:
        return _fail(args, f"argument --M-min: no power of two between {args.M_min} and "
                     f"{M_max}")
    if args.plot and (why := _plot_target(args.plot)):
        return _fail(args, f"argument --plot: {why}")
    options: dict[str, dict] = {name: dict(opts) for name, opts in SWEEP_OPTIONS.items()}
    for name, key, value in args.option:
        options.setdefault(name, {})[key] = value
    names = args.algorithms or sorted(BACKWARD if args.backward else REGISTRY)
    least = {}
    for name in names:
        try:
            algo = get(name, args.backward)
        except ValueError as exc:
            return _fail(args, f"argument --algorithms: {exc}")
        try:
            least[name] = algo.min_M(args.d, **algo.check_options(options.get(name, {})))
        except (TypeError, ValueError) as exc:
            return _fail(args, f"argument --option: {exc}")
    if Ms[-1] < min(least.values()):
        needs = ", ".join(f"{n} needs M >= {least[n]:,}" for n in sorted(least))
        return _fail(args, f"argument --M-max: no algorithm can run at the largest M swept, "
                     f"{Ms[-1]:,} (the largest power of two <= {M_max:,}), with d = {args.d} "
                     f"({needs})")
    try:
        result = sweep(args.N, args.d, Ms, args.algorithms, options, backward=args.backward)
    except (TypeError, ValueError) as exc:
        return _fail(args, str(exc))
    except MemoryError as exc:          # the exact crossovers of a very wide range of M
        return _fail(args, f"not enough memory for the sweep over M = {Ms[0]:,} to "
                     f"{Ms[-1]:,} ({exc}); narrow the range with --M-min and --M-max")
    print(result.table())
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from .plotting import plot_sweep

        ax = plot_sweep(result)
        try:
            ax.figure.savefig(args.plot, dpi=150)
        except OSError as exc:
            return _fail(args, f"argument --plot: {exc}")
        print(f"plot saved to {args.plot}")
    if args.check and _check(result):
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
