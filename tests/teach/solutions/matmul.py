from math import isqrt

from ioattn.tiles import Memory  # noqa: F401  (the notebook's imports)



def tiled_matmul(mem, A, B, C):
    """C = FORM through the cache: a b x b tile of C stays while strips of A and B stream past."""
    m, n = C.shape
    k = A.shape[0] if FORM == "A.T @ B" else A.shape[1]
    b = max(1, isqrt(mem.M + 1) - 1)                  # b^2 + 2b <= M
    for i in range(0, m, b):
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
