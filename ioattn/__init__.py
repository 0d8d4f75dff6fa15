"""ioattn: the I/O complexity of attention, counted exactly.

>>> import numpy as np, ioattn
>>> Q = K = V = np.random.default_rng(0).standard_normal((256, 32))
>>> r = ioattn.run("flash", Q, K, V, M=1024)
>>> r.io == ioattn.io_cost("flash", 256, 32, 1024)
True

Causal attention, block-sparse: about half the I/O.

>>> mask = ioattn.masks.causal(256)
>>> c = ioattn.run("flash", Q, K, V, M=1024, mask=mask)
>>> c.io == ioattn.io_cost("flash", 256, 32, 1024, mask=mask), c.io.total < r.io.total
(True, True)

A decoding step: one query row against a cache of 256 keys (rectangular attention).

>>> d = ioattn.run("flash", Q[:1], K, V, M=1024)
>>> d.io == ioattn.io_cost("flash", 1, 32, 1024, N_k=256), d.plan.B_r
(True, 1)
"""

from . import bounds, inference, masks
from .algorithms import matmul_cost, plan_matmul, run_matmul
from .api import (
    BackwardResult,
    RunResult,
    algorithms,
    io_cost,
    min_M,
    plan,
    run,
    run_backward,
    saved_for_backward,
    totals,
)
from .memory import CacheOverflowError, IOCount, SlowArray, Transfer, TwoLevelMemory

__version__ = "0.1.0"


def __getattr__(name):
    # The submodules that need matplotlib or ipywidgets load on first use:
    # ``ioattn.widgets.explorer()`` works after a plain ``import ioattn``.
    if name in ("explorer", "pebble", "plotting", "sweep", "widgets"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "BackwardResult", "CacheOverflowError", "IOCount", "RunResult", "SlowArray", "Transfer",
    "TwoLevelMemory", "algorithms", "bounds", "inference", "io_cost", "masks", "matmul_cost",
    "min_M", "plan",
    "plan_matmul", "run", "run_backward", "run_matmul", "saved_for_backward",
    "totals",
]
