"""The red-blue pebble game laboratory: computation graphs, rule-checked games, M-partitions, the
exact optimal I/O of small graphs, and good games found fast (upper bounds on it).
:mod:`ioattn.pebble.schedules` plays the package's algorithms, forward and backward, as games.

>>> from ioattn.pebble import matmul_graph, PebbleGame
>>> g = matmul_graph(1, 2, 1)         # c = a0 b0 + a1 b1
>>> len(g), g.max_in_degree
(7, 2)
"""

from .builders import attention_backward_graph, attention_graph, chain, matmul_graph
from .game import MOVES, IllegalMove, PebbleGame, without_idle_computes
from .graph import Graph
from .partition import (
    HongKungPartition,
    PartitionCheck,
    check_partition,
    dominator_set,
    dominator_size,
    hong_kung_partition,
    is_partition_of,
    minimum_set,
)
from .search import Optimum, SearchLimitError, min_io
from .upper import good_game

__all__ = [
    "Graph", "HongKungPartition", "IllegalMove", "MOVES", "Optimum", "PartitionCheck",
    "PebbleGame", "SearchLimitError", "attention_backward_graph", "attention_graph", "chain",
    "check_partition", "dominator_set", "dominator_size", "good_game", "hong_kung_partition",
    "is_partition_of", "matmul_graph", "min_io", "minimum_set", "without_idle_computes",
]
