"""Start processes until the system refuses one (a fork bomb that stops at a thousand).
Kind: the sandbox (number of processes).
"""
import ctypes
import os
import signal

libc = ctypes.CDLL(None)
libc.prctl(15, b"__MARKER__", 0, 0, 0)
started = 0
try:
    for _ in range(1000):
        if os.fork() == 0:
            while True:
                signal.pause()
        started += 1
except OSError:
    pass
libc.prctl(15, b"python", 0, 0, 0)
if started >= 1000:
    raise RuntimeError("nothing bounded the number of processes")
# %% solution
