"""Write __MB__ MB to file descriptor 2 (the grader keeps the notebook's standard error), hoping
the grader reads it all back. Kind: the sandbox (file size).
"""
import os

block = b"x" * (1 << 20)
for _ in range(__MB__):
    os.write(2, block)
# %% solution
