"""The log-log picture of a :class:`~ioattn.sweep.Sweep` (forward or backward): exact I/O against
M, the lower bound, and a vertical line at M = d^2. Used by the CLI and the book."""

from __future__ import annotations

from .sweep import Sweep

__all__ = ["plot_sweep", "STYLE", "TITLES"]

#: Colour and marker of each algorithm, shared by every figure.
STYLE = {
    "flash": dict(color="#1f77b4", marker="o"),
    "square_tiling": dict(color="#d62728", marker="s"),
    "standard": dict(color="#7f7f7f", marker="^"),
}

#: How the prose and the readouts name each algorithm.
TITLES = {"flash": "FlashAttention", "square_tiling": "square tiling",
          "standard": "standard attention"}


def plot_sweep(s: Sweep, ax=None):
    """Draw ``s`` on ``ax`` (a new figure if None) and return the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for name, totals in sorted(s.totals.items()):
        pts = [(M, t) for M, t in zip(s.Ms, totals) if t is not None]
        ax.plot(*zip(*pts), label=s.label(name), markersize=4, **STYLE.get(name, {}))
    lower = [(M, b) for M, b in zip(s.Ms, s.lower) if b > 0]
    if lower:
        ax.plot(*zip(*lower), "k--", lw=1, label="lower bound for programs (standard matmul)")
    ax.axvline(s.d ** 2, color="k", lw=0.8, alpha=0.6)
    ax.annotate(r"$M = d^2$", (s.d ** 2, 1), xycoords=("data", "axes fraction"),
                xytext=(4, -14), textcoords="offset points")
    for c in s.crossovers:
        ax.axvline(c.M, color="#2ca02c", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="cache size M (entries)",
           ylabel="I/O (entries read + written)",
           title=f"Exact I/O of {s.what}, N = {s.N}, d = {s.d}")
    ax.legend(fontsize="small")
    return ax
