"""Raise ``SystemExit(0)`` inside the tile program. Kind: reaching the referee (ending early).
"""


def tiled_matmul(mem, A, B, C):
    raise SystemExit(0)
