"""Four children that each hold __MB__ MB, together more than the notebook's memory limit,
though each is within it. Kind: the sandbox (memory of all the notebook's processes).
"""
import os
import signal

import numpy as np

read, write = os.pipe()
for _ in range(4):
    if os.fork() == 0:
        os.close(read)
        block = np.ones(__MB__ << 17)              # __MB__ MB, every page touched
        os.write(write, b"x")
        os.close(write)
        while True:
            signal.pause()
os.close(write)
held = b""
while len(held) < 4:
    got = os.read(read, 4)
    if not got:
        break
    held += got
if len(held) == 4:
    raise RuntimeError("nothing bounded the memory of the processes together")
# %% solution
