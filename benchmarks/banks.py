"""Shared-memory wavefronts and global sectors of every kernel per instruction site, counted by
the CPU emulator: ``python benchmarks/banks.py`` (the module is :mod:`ioattn.gpu.banks`)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from ioattn.gpu.banks import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
