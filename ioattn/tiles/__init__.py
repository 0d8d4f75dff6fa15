"""Tile programs: a schedule written once, run against the memory model here or in a grader.

A tile program is a function ``f(mem, *arrays)`` that moves tiles between slow memory and a cache
of ``mem.M`` entries and computes in the cache with expressions, never holding a value itself:

- :class:`Memory` (``read``, ``write``, ``allocate``, ``free``, ``io``) and :class:`Slow`, the
  handles it gets (:mod:`ioattn.tiles.memory`);
- :class:`Tile` and the expressions built from tiles with NumPy's operators and
  :func:`exp`, :func:`log`, :func:`sqrt`, :func:`maximum`, :func:`minimum`, :func:`where`,
  :func:`row_index`, :func:`col_index` (:mod:`ioattn.tiles.expr`);
- :class:`Machine`, which holds the values and counts every entry moved with
  :class:`ioattn.memory.TwoLevelMemory` (:mod:`ioattn.tiles.machine`).

``Memory(M)`` runs a program in this process; the classroom grader runs the same program
against a machine in a process of its own (:mod:`ioattn.teach.referee`), so the program can
neither see the data nor hold more than ``M`` entries.
"""

from ..memory import CacheOverflowError, IOCount
from .expr import Expr, Tile, col_index, exp, log, maximum, minimum, row_index, sqrt, where
from .machine import Machine, TileError
from .memory import Memory, Slow

__all__ = ["CacheOverflowError", "Expr", "IOCount", "Machine", "Memory", "Slow", "Tile",
           "TileError", "col_index", "exp", "log", "maximum", "minimum", "row_index", "sqrt",
           "where"]
