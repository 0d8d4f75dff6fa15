"""The solution over several cells, after an unrelated cell that fails (a typo'd import).

Kind: honest (must get 5/5, with the failing cell in ``report.cell_errors``).
"""
import numpy as nmpy_typo_oops
nmpy_typo_oops.no_such_function()
# %%
from math import isqrt


def side(M):
    return max(1, isqrt(M + 1) - 1)
# %%
def strips(mem, A, B, t, i, r, j, c):
    if FORM == "A.T @ B":
        a = mem.read(A, slice(t, t + 1), slice(i, i + r))
        col = a.T
    else:
        a = mem.read(A, slice(i, i + r), slice(t, t + 1))
        col = a
    if FORM == "A @ B.T":
        w = mem.read(B, slice(j, j + c), slice(t, t + 1))
        row = w.T
    else:
        w = mem.read(B, slice(t, t + 1), slice(j, j + c))
        row = w
    return a, w, col, row
# %%
def tiled_matmul(mem, A, B, C):
    m, n = C.shape
    k = A.shape[0] if FORM == "A.T @ B" else A.shape[1]
    b = side(mem.M)
    for i in range(0, m, b):
        for j in range(0, n, b):
            r, c = min(b, m - i), min(b, n - j)
            acc = mem.allocate((r, c))
            for t in range(k):
                a, w, col, row = strips(mem, A, B, t, i, r, j, c)
                acc += col @ row
                mem.free(a, w)
            mem.write(C, acc, slice(i, i + r), slice(j, j + c))
            mem.free(acc)
