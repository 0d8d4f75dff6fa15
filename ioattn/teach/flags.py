"""What in a notebook hides code or reaches past its functions: flags for the instructor.

A flag is a lead for a person to read, never a mark: honest notebooks rarely need any of these,
and a notebook that has one may still be honest (``inspect`` to print a function's source). The
marks come from the grader's checks on hidden data. :func:`flags` scans the code cells of a
notebook for

- code run from text: ``exec``, ``eval``, ``compile``, ``__import__``, and ``importlib``;
- encoded blobs: long string literals of the base64 (or hexadecimal) alphabet, and the modules
  that decode them (``base64``, ``zlib``, ``marshal``, ``pickle``, ...);
- ways out: ``socket``, ``ctypes``, ``subprocess``, ``os.system`` and the like;
- walking the interpreter: ``gc``, ``sys._getframe``, ``inspect``, frame and code attributes
  (``f_back``, ``f_globals``, ``__globals__``, ``__code__``, ``__subclasses__``, ...);
- processes: ``os._exit``, ``kill``, ``setsid``, and paths under ``/proc``, ``/dev`` and
  ``/sys``.

Each flag names the cell (numbered from 1 among all the notebook's cells, as Jupyter shows them)
and the line::

    for line in notebook_flags("submissions/ada/flash.ipynb"):
        print("flag:", line)

>>> for line in flags(["import numpy as np", "import zlib\\nexec(zlib.decompress(blob))"]):
...     print(line)
cell 2, line 1: imports zlib (decompresses data: often hidden code)
cell 2, line 2: calls exec (runs code made at run time)
cell 2, line 2: uses .decompress (decompresses data: often hidden code)
"""

from __future__ import annotations

import ast
import re
from os import PathLike
from pathlib import Path

__all__ = ["BLOB_CHARS", "flags", "notebook_flags"]

#: A string literal of at least this many characters of the base64 alphabet (or of hexadecimal
#: digits), with no spaces, is flagged as an encoded blob.
BLOB_CHARS = 64

#: Calls (or mere uses) of these names.
_NAMES = {
    "exec": "runs code made at run time",
    "eval": "runs code made at run time",
    "compile": "makes code at run time",
    "__import__": "imports a module by a computed name",
    "globals": "reaches the notebook's globals",
    "breakpoint": "starts a debugger",
    "__builtins__": "reaches the builtins",
}

#: Modules whose import is flagged.
_MODULES = {
    "base64": "decodes text: often hidden code",
    "binascii": "decodes text: often hidden code",
    "codecs": "decodes text: often hidden code",
    "zlib": "decompresses data: often hidden code",
    "lzma": "decompresses data: often hidden code",
    "bz2": "decompresses data: often hidden code",
    "gzip": "decompresses data: often hidden code",
    "marshal": "loads code objects",
    "pickle": "loads objects that may run code",
    "types": "builds functions and code objects",
    "importlib": "imports modules by computed names",
    "socket": "network or local sockets",
    "ssl": "network access",
    "http": "network access",
    "urllib": "network access",
    "requests": "network access",
    "ctypes": "calls C directly, past Python",
    "cffi": "calls C directly, past Python",
    "subprocess": "starts other programs",
    "multiprocessing": "starts other processes",
    "signal": "handles or sends signals",
    "gc": "walks the interpreter's objects",
    "inspect": "walks frames and source",
    "traceback": "walks frames",
    "builtins": "reaches the builtins",
}

#: Attributes whose use is flagged.
_ATTRIBUTES = {
    "_getframe": "walks the call stack",
    "f_back": "walks the call stack",
    "f_globals": "reads another frame's globals",
    "f_locals": "reads another frame's locals",
    "f_builtins": "reaches a frame's builtins",
    "tb_frame": "walks the call stack",
    "gi_frame": "walks a generator's frame",
    "cr_frame": "walks a coroutine's frame",
    "__globals__": "reads a function's globals",
    "__code__": "reads or replaces a function's code",
    "__closure__": "reads a function's closure",
    "__subclasses__": "walks the class tree",
    "__builtins__": "reaches the builtins",
    "__dict__": "reads or patches an object's attributes",
    "get_objects": "walks the interpreter's objects",
    "get_referrers": "walks the interpreter's objects",
    "get_referents": "walks the interpreter's objects",
    "system": "runs a shell command",
    "popen": "runs a shell command",
    "fork": "starts another process",
    "_exit": "ends the process at once",
    "kill": "sends a signal to a process",
    "setsid": "leaves the process group",
    "execv": "replaces the process",
    "execve": "replaces the process",
    "modules": "reaches every loaded module (sys.modules)",
    "b64decode": "decodes base64: often hidden code",
    "decompress": "decompresses data: often hidden code",
    "loads": "loads serialised data or code",
}

_BASE64 = re.compile(r"[A-Za-z0-9+/=_-]+")
_HEX = re.compile(r"[0-9a-fA-F]+")


def flags(cells) -> list[str]:
    """The flags of a notebook's code cells.

    Parameters
    ----------
    cells : sequence of str, or of (int, str)
        The code cells' sources in order, numbered from 1; or ``(number, source)`` pairs, to
        number them as the notebook does (markdown cells included).

    Returns
    -------
    list of str
        ``"cell 3, line 2: calls exec (runs code made at run time)"``, in the order of the
        cells and lines; empty if nothing is flagged.
    """
    out = []
    for k, item in enumerate(cells, start=1):
        number, source = item if isinstance(item, tuple) else (k, item)
        if not isinstance(source, str):
            raise TypeError(f"a cell's source must be a str, not {type(source).__name__}")
        seen = set()
        for line, what in _scan(source):
            if (line, what) not in seen:
                seen.add((line, what))
                out.append(f"cell {number}, line {line}: {what}")
    return out


def notebook_flags(path) -> list[str]:
    """:func:`flags` of the code cells of the notebook at ``path`` (``.ipynb``), numbered as the
    notebook's cells are."""
    from .build import _need

    nbformat = _need("nbformat")
    if not isinstance(path, (str, PathLike)):
        raise TypeError(f"path must be a path, not {type(path).__name__}")
    if not Path(path).is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    nb = nbformat.read(Path(path), as_version=4)
    return flags([(k, c.source) for k, c in enumerate(nb.cells, start=1)
                  if c.cell_type == "code"])


# ---------------------------------------------------------------------- the scan
def _scan(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of one cell, from its syntax tree (IPython's ``%`` and ``!`` lines
    blanked first), or from its text where it does not parse."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line
             for line in source.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return _scan_text(source)
    found = []
    for node in ast.walk(tree):
        found += [(getattr(node, "lineno", 0), what) for what in _node(node)]
    for number, line in enumerate(source.splitlines(), start=1):
        if line.lstrip().startswith("!"):
            found.append((number, "runs a shell command (!)"))
    return sorted(found, key=lambda f: f[0])


def _node(node) -> list[str]:
    """What one node of the syntax tree is flagged for."""
    if isinstance(node, ast.Import):
        return [_module(alias.name) for alias in node.names if _module(alias.name)]
    if isinstance(node, ast.ImportFrom) and node.module:
        found = [_module(node.module)] if _module(node.module) else []
        if node.module.split(".")[0] == "sys":
            found += [f"imports sys.{a.name} ({_ATTRIBUTES[a.name]})" for a in node.names
                      if a.name in _ATTRIBUTES]
        return found
    if isinstance(node, ast.Name) and node.id in _NAMES:
        verb = "calls" if isinstance(getattr(node, "_parent_call", None), ast.Call) else "uses"
        return [f"{verb} {node.id} ({_NAMES[node.id]})"]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        node.func._parent_call = node                # so the Name below reads "calls"
        return []
    if isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTES:
        return [f"uses .{node.attr} ({_ATTRIBUTES[node.attr]})"]
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        return _literal(node.value)
    return []


def _module(name: str) -> str:
    top = name.split(".")[0]
    return f"imports {name} ({_MODULES[top]})" if top in _MODULES else ""


def _literal(value) -> list[str]:
    """A long encoded blob, or a string naming something flagged (``getattr(x, "exec")``)."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    if text in _NAMES or text in _ATTRIBUTES and text.startswith("_") or text in _MODULES:
        return [f"names {text!r} in a string (reached by name: {_describe(text)})"]
    if text.startswith(("/proc", "/dev/", "/sys/")):
        return [f"names {text[:40]!r} (the system's files on processes and devices)"]
    if len(text) < BLOB_CHARS or " " in text.strip():
        return []
    packed = re.sub(r"\s", "", text)
    if len(packed) < BLOB_CHARS:
        return []
    if _HEX.fullmatch(packed):
        return [f"a {len(packed):,}-character hexadecimal string (encoded data or code)"]
    if _BASE64.fullmatch(packed) and re.search(r"\d", packed) and re.search(r"[A-Z]", packed) \
            and re.search(r"[a-z]", packed):
        return [f"a {len(packed):,}-character base64 string (encoded data or code)"]
    if isinstance(value, bytes) and sum(b < 32 or b > 126 for b in value) > len(value) // 4:
        return [f"a {len(value):,}-byte binary string (encoded data or code)"]
    return []


def _describe(text: str) -> str:
    return _NAMES.get(text) or _ATTRIBUTES.get(text) or _MODULES[text]


_WORDS = re.compile(r"\b(" + "|".join(map(re.escape, sorted(set(_NAMES) | set(_MODULES))))
                    + r")\b|\.(" + "|".join(map(re.escape, sorted(_ATTRIBUTES))) + r")\b")


def _scan_text(source: str) -> list[tuple[int, str]]:
    """For a cell that does not parse: the flagged words on each line, by their text."""
    found = []
    for number, line in enumerate(source.splitlines(), start=1):
        for match in _WORDS.finditer(line):
            word = match.group(1) or match.group(2)
            found.append((number, f"mentions {word} ({_describe(word)}; the cell does not parse)"))
        for blob in re.findall(r"[A-Za-z0-9+/=]{%d,}" % BLOB_CHARS, line):
            found += [(number, what) for what in _literal(blob)]
    return found
