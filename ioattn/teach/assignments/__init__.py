"""The assignments, registered by name: ``matmul``, ``flash``, ``crossover``, ``pebbling``,
``backward``, ``decoding`` (the order of the book's assignment pages)."""

# importing a module registers its assignment
from . import backward, crossover, decoding, flash, matmul, pebbling  # noqa: F401
from .base import REGISTRY, Assignment, Context, Question, get

ORDER = ("matmul", "flash", "crossover", "pebbling", "backward", "decoding")

__all__ = ["ORDER", "REGISTRY", "Assignment", "Context", "Question", "get"]

for _name in ORDER:                      # the registry in the book's order
    REGISTRY[_name] = REGISTRY.pop(_name)
