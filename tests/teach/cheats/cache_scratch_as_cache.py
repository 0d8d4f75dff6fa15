"""Use ``mem.scratch`` as a free cache: copy A's columns and B's into scratch arrays once, keep
partial sums of C in scratch, and accumulate one row of k at a time (inner dimension outer):
every read back from scratch is counted, so it costs far more than the budget.
Kind: keeping data outside the counted cache (``mem.scratch``).
"""


def tiled_matmul(mem, A, B, C):
    m, n = C.shape
    k = A.shape[0]
    part = mem.scratch("part", (m, n))
    zero = mem.allocate((1, n))
    for i in range(m):
        mem.write(part, zero, slice(i, i + 1))
    mem.free(zero)
    for t in range(k):
        a = mem.read(A, slice(t, t + 1))              # 1 x m  (FORM is A.T @ B)
        w = mem.read(B, slice(t, t + 1))              # 1 x n
        for i in range(m):
            row = mem.read(part, slice(i, i + 1))
            row += a[:, i:i + 1] @ w
            mem.write(part, row, slice(i, i + 1))
            mem.free(row)
        mem.free(a, w)
    for i in range(m):
        row = mem.read(part, slice(i, i + 1))
        mem.write(C, row, slice(i, i + 1))
        mem.free(row)
