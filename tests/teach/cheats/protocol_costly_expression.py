"""Make the grader's machine do half a teraflop in one request with no counted read: sixty
products of 2048 x 2048 matrices built from ``row_index`` and ``col_index``, summed into a
1 x 1 tile. Kind: reaching the referee (uncosted work).
"""
from ioattn.tiles import col_index, row_index


def tiled_matmul(mem, A, B, C):
    t = mem.allocate((1, 1))
    x = row_index(0, 2048) * col_index(0, 2048)
    e = x
    for _ in range(60):
        e = e @ x
    t[...] = e.sum(0).sum(0)
