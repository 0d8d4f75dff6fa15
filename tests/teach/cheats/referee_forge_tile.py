"""Find the grader's socket through ``gc`` (the runner's ``Connection``) and send forged
``{"tile": ...}`` requests: internal operations (``_op_`` names, ``load``, a ``scratch`` array
named ``C`` to replace the output), reading the answer itself, with a fake ``{"ok": ...}``
queued for the program's own next request. Kind: reaching the referee (forged protocol).
"""
import gc
import json
from multiprocessing.connection import Connection


def tiled_matmul(mem, A, B, C):
    conns = [o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed]
    if not conns:
        raise RuntimeError("no connection in gc")
    conn = conns[0]
    replies = []
    for req in (["load", "C", [[1.0]]], ["scratch", "C", list(C.shape)],
                ["_op_io"], ["values", ["tile", 0]], {"ok": [0, [1, 1]]}):
        conn.send_bytes(json.dumps({"tile": req}).encode())
        replies.append(json.loads(conn.recv_bytes()))
    raise RuntimeError(json.dumps(replies))
