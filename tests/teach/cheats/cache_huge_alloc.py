"""Allocate one tile as large as C and accumulate the whole product in it.
Kind: keeping data outside the counted cache (huge allocate).
"""


def tiled_matmul(mem, A, B, C):
    acc = mem.allocate(C.shape)
    mem.write(C, acc)
