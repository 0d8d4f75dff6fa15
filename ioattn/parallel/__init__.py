"""Attention on ``P`` processors: exact communication, lower bounds, and runs on MPI.

- :mod:`~ioattn.parallel.costs`: the model and the exact words, messages, memory and work of
  ring attention, striped attention, all-to-all head parallelism and the two-dimensional grid
  scheme (:data:`ALGORITHMS`), and of the schemes run in practice (:data:`SCHEMES`): zigzag
  ring attention, the all-gather of ``K, V``, Ulysses x ring and head groups x grid
  (:func:`cost`, :func:`sweep`);
- :mod:`~ioattn.parallel.two_level`: both levels counted together, each processor computing
  through its own cache of ``M`` entries (``cost(..., M=)``, ``run(..., M=)``);
- :mod:`~ioattn.parallel.bounds`: the memory-independent and memory-dependent lower bounds on
  the words the busiest processor receives, and the causal one from its own rows;
- :mod:`~ioattn.parallel.engine`: the same algorithms as real MPI programs (mpi4py), counting
  every word where it is sent; :func:`run` launches them with ``mpiexec`` on this machine;
- :mod:`~ioattn.parallel.table`: the algorithms against ``P`` as a table (``ioattn parallel``).

>>> from ioattn import parallel
>>> ring, grid = parallel.cost("ring", 4096, 64, 16), parallel.cost("grid", 4096, 64, 16)
>>> grid.max_traffic < ring.max_traffic, grid.max_memory > ring.max_memory
(True, True)
>>> ring.max_received >= parallel.bounds.lower_bound(4096, 64, 16, ring.max_memory)
True
"""

from . import bounds, layout, table, two_level
from .costs import ALGORITHMS, BACKWARD, NAMES, SCHEMES, WITH_BACKWARD, ParallelCost, cost, sweep
from .launch import MPIUnavailable, ParallelRun, available, run

__all__ = ["ALGORITHMS", "BACKWARD", "MPIUnavailable", "NAMES", "ParallelCost", "ParallelRun",
           "SCHEMES", "WITH_BACKWARD", "available", "bounds", "cost", "layout", "run", "sweep",
           "table", "two_level"]
