"""The outer-product schedule through a helper class that wraps ``mem``.

Kind: honest (must get 5/5).
"""
from math import isqrt


class Cache:
    def __init__(self, mem, form):
        self.mem, self.form = mem, form
        self.b = max(1, isqrt(mem.M + 1) - 1)

    def column(self, A, t, i, r):
        if self.form == "A.T @ B":
            a = self.mem.read(A, slice(t, t + 1), slice(i, i + r))
            return a, a.T
        a = self.mem.read(A, slice(i, i + r), slice(t, t + 1))
        return a, a

    def row(self, B, t, j, c):
        if self.form == "A @ B.T":
            w = self.mem.read(B, slice(j, j + c), slice(t, t + 1))
            return w, w.T
        w = self.mem.read(B, slice(t, t + 1), slice(j, j + c))
        return w, w


def tiled_matmul(mem, A, B, C):
    cache = Cache(mem, FORM)
    m, n = C.shape
    k = A.shape[0] if FORM == "A.T @ B" else A.shape[1]
    b = cache.b
    for i in range(0, m, b):
        for j in range(0, n, b):
            r, c = min(b, m - i), min(b, n - j)
            acc = mem.allocate((r, c))
            for t in range(k):
                a, col = cache.column(A, t, i, r)
                w, row = cache.row(B, t, j, c)
                acc += col @ row
                mem.free(a, w)
            mem.write(C, acc, slice(i, i + r), slice(j, j + c))
            mem.free(acc)
