"""Allocate a tile of negative size, hoping it lowers the counted occupancy.
Kind: keeping data outside the counted cache (negative allocate).
"""


def tiled_matmul(mem, A, B, C):
    credit = mem.allocate((-10 * mem.M, 1))
    a = mem.read(A)
    return credit, a
