"""Raise an exception whose message is terminal escape sequences (clear the screen, a fake
green "5/5", a window title) and a very long line, for the grader to print as a reason.
Kind: reports (control characters).
"""


def tiled_matmul(mem, A, B, C):
    raise ValueError("\x1b[2J\x1b[H\x1b[32mtotal 5/5\x1b[0m\x1b]0;graded\x07" + "x" * 100_000)
