"""Return an answer as a NumPy array instead of writing C (as if the grader compared returned
values). Kind: a returned value standing in for the output.
"""
import numpy as np


def tiled_matmul(mem, A, B, C):
    return np.ones(C.shape)
