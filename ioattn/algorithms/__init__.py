"""Instrumented reference algorithms, one module per family, registered by name."""

# importing a module registers its algorithm
from . import (  # noqa: F401
    backward_flash,
    backward_square_tiling,
    backward_standard,
    flash,
    square_tiling,
    standard,
)
from .base import BACKWARD, REGISTRY, Algorithm, BackwardAlgorithm, Plan, get, variants
from .matmul import matmul_cost, plan_matmul, run_matmul

__all__ = ["BACKWARD", "REGISTRY", "Algorithm", "BackwardAlgorithm", "Plan", "get", "matmul_cost",
           "plan_matmul", "run_matmul", "variants"]
