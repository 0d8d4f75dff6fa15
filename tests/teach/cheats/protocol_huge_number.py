"""Send a tile request whose number is an integer far beyond float64's range, through the
program's own channel: ``["set", ["tile", id], ["num", 10**400]]``. The machine must refuse
it as a bad number, not fail while converting it. Kind: reaching the referee (malformed values).
"""


def tiled_matmul(mem, A, B, C):
    t = mem.allocate((1, 1))
    mem._request(["set", ["tile", t.id], ["num", 10 ** 400]])
