"""An honest student's bug: the row loop stops one tile early, so the last tile row of C is
never written. Kind: buggy honest (q1 = 0, "never written").
"""
from math import isqrt


def tiled_matmul(mem, A, B, C):
    m, n = C.shape
    k = A.shape[0] if FORM == "A.T @ B" else A.shape[1]
    b = max(1, isqrt(mem.M + 1) - 1)
    for i in range(0, m - b, b):                 # off by one tile: should be range(0, m, b)
        for j in range(0, n, b):
            r, c = min(b, m - i), min(b, n - j)
            acc = mem.allocate((r, c))
            for t in range(k):
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
                acc += col @ row
                mem.free(a, w)
            mem.write(C, acc, slice(i, i + r), slice(j, j + c))
            mem.free(acc)
