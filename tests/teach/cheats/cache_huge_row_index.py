"""Build an enormous intermediate with ``row_index``/``col_index`` (a would-be free buffer).
Kind: keeping data outside the counted cache (huge row_index / col_index).
"""
from ioattn.tiles import col_index, row_index


def tiled_matmul(mem, A, B, C):
    t = mem.allocate((1, 1))
    t[...] = (row_index(0, 10 ** 6) * col_index(0, 10 ** 6)).sum(0).sum(0)
    mem.write(C, t, slice(0, 1), slice(0, 1))
