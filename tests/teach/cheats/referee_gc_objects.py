"""Search ``gc.get_objects()`` for a ``Machine``, a ``TwoLevelMemory`` or float arrays of A's
and B's shapes, to compute C outside the cache; say so if there are none.
Kind: reaching the referee (the garbage collector).
"""
import gc

import numpy as np


def tiled_matmul(mem, A, B, C):
    machines = [o for o in gc.get_objects() if type(o).__name__ in ("Machine", "TwoLevelMemory")]
    arrays = [o for o in gc.get_objects()
              if isinstance(o, np.ndarray) and o.shape in (A.shape, B.shape)]
    if not machines and not arrays:
        raise RuntimeError("gc holds no machine and no input array")
    raise RuntimeError(f"found {len(machines)} machines, {len(arrays)} arrays")
