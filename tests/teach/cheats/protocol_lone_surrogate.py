"""Send the grader a tile request holding a lone surrogate (text that is not Unicode, which
JSON can still spell ``"\\ud800"``) over the program's socket. Kind: reaching the referee
(malformed messages).
"""
import gc
import json
from multiprocessing.connection import Connection


def tiled_matmul(mem, A, B, C):
    conn = [o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed][0]
    conn.send_bytes(json.dumps({"tile": ["read", "A\ud800", [[0, 1], [0, 1]]]}).encode())
    conn.recv_bytes()
