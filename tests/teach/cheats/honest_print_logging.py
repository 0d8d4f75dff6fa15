"""The reference solution, printing progress as it goes. Kind: honest (must get 5/5)."""
# %% solution
_plain = tiled_matmul


def tiled_matmul(mem, A, B, C):
    print("start", A.shape, B.shape, C.shape, mem.M)
    _plain(mem, A, B, C)
    print("done:", mem.io)
