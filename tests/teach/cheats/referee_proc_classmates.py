"""Scan ``/proc/*/cmdline`` (and open files, ``/proc/*/fd``) for other notebooks being graded,
and copy the first ``tiled_matmul`` found in one of them.
Kind: reaching the referee (classmates' notebooks through ``/proc``).
"""
import glob
import json
import os


def _notebooks():
    paths = set()
    for proc in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{proc}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
            paths.update(a for a in args if a.endswith(".ipynb"))
            for fd in os.listdir(f"{proc}/fd"):
                target = os.readlink(f"{proc}/fd/{fd}")
                if target.endswith(".ipynb"):
                    paths.add(target)
        except OSError:
            continue
    return sorted(paths)


def tiled_matmul(mem, A, B, C):
    for path in _notebooks():
        with open(path) as f:
            cells = json.load(f)["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if "def tiled_matmul" in code:
            names = {}
            exec(code, names)
            return names["tiled_matmul"](mem, A, B, C)
    raise RuntimeError("no classmate's notebook in /proc")
