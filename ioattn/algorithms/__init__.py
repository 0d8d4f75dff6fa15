"""Instrumented reference algorithms, one module per family, registered by name."""

from . import flash, square_tiling, standard  # noqa: F401  (registration)
from .base import BACKWARD, REGISTRY, Algorithm, BackwardAlgorithm, Plan, get
from .matmul import matmul_cost, plan_matmul, run_matmul

__all__ = ["BACKWARD", "REGISTRY", "Algorithm", "BackwardAlgorithm", "Plan", "get", "matmul_cost",
           "plan_matmul", "run_matmul"]
