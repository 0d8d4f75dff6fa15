"""Sphinx extension: the execution cache is only valid for the ``ioattn`` it was made with.

MyST-NB caches executed notebooks by their code cells (``execute_notebooks: cache``), so a warm
build re-executes only the pages whose code changed. But the numbers and figures of this book
come from the ``ioattn`` package, which changes while the pages do not. This extension hashes the
package's sources; when the hash differs from the one stored beside the cache, it empties the
cache and declares every page outdated, so the build reads and executes everything again, as a
fresh build would. With an unchanged package, Sphinx's usual incremental build applies.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import ioattn

STAMP = "ioattn-sources.sha256"


def package_hash() -> str:
    """SHA-256 over the paths and contents of the installed ``ioattn`` package's sources."""
    root = Path(ioattn.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in {".py", ".cu", ".cuh", ".h"}):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _check_cache(app):
    cache = Path(app.env.mystnb_config.execution_cache_path)
    stamp = cache / STAMP
    current = package_hash()
    stale = not stamp.is_file() or stamp.read_text().strip() != current
    if stale and cache.exists():
        shutil.rmtree(cache)
    app.env.ioattn_stale = stale
    if stale:
        cache.mkdir(parents=True, exist_ok=True)
        stamp.write_text(current + "\n")


def _outdated(app, env, added, changed, removed):
    return sorted(env.found_docs - added - changed - removed) if env.ioattn_stale else []


def setup(app):
    # After MyST-NB's own builder-inited handler, which sets the cache path.
    app.connect("builder-inited", _check_cache, priority=900)
    app.connect("env-get-outdated", _outdated)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
