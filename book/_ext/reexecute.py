"""Sphinx extension: re-read, and so re-execute, every page on every build.

With ``execute_notebooks: force`` MyST-NB executes a notebook page whenever Sphinx reads it, but
Sphinx only re-reads the pages whose source changed since the last build in the same output
folder. The numbers and figures in this book come from the ``ioattn`` package, which changes
while the pages do not, so an incremental ``make book`` would keep stale results. Declaring every
page outdated makes each build read and execute everything, as a fresh build would.
"""

from __future__ import annotations


def _every_page(app, env, added, changed, removed):
    return sorted(env.found_docs - added - changed - removed)


def setup(app):
    app.connect("env-get-outdated", _every_page)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
