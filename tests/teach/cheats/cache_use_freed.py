"""Free a tile but keep using its handle, hoping the values stay readable for free.
Kind: keeping data outside the counted cache (a freed tile).
"""


def tiled_matmul(mem, A, B, C):
    a = mem.read(A, slice(0, 1))
    mem.free(a)
    t = mem.allocate(a.shape)
    t[...] = a * 1.0
    mem.write(C, a, slice(0, 1), slice(0, a.shape[1]))
