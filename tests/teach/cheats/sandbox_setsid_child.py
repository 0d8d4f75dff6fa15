"""Start a child in a session of its own (``fork`` + ``setsid``), out of the process group the
grader ends, that keeps running after grading. Kind: the sandbox (processes outliving the
notebook).
"""
import ctypes
import os
import signal

libc = ctypes.CDLL(None)
libc.prctl(15, b"__MARKER__", 0, 0, 0)         # PR_SET_NAME: the child is born with this name
pid = os.fork()
if pid == 0:
    os.setsid()
    while True:
        signal.pause()
libc.prctl(15, b"python", 0, 0, 0)
# %% solution
