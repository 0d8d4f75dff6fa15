"""The attention kernels of :mod:`ioattn.gpu` on a real GPU, side by side: `make bench-gpu`.

The benchmark itself is :mod:`ioattn.gpu.benchmark` (so that it also runs where only the package
is installed, as in the book's notebook "Measure your GPU"); its docstring says what is measured
and how, and ``python benchmarks/gpu.py --help`` lists the options. Run from this checkout, the
results go to ``benchmarks/results/gpu-<gpu>-<date>.json`` and ``.md``.

Every public name of :mod:`ioattn.gpu.benchmark` is importable from this file too (the book's
chapter "On a real GPU" loads it by path).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from ioattn.gpu.benchmark import *  # noqa: E402,F403 - this file is the module's command line
from ioattn.gpu.benchmark import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
