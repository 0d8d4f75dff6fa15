"""Sphinx extension: pages carry no live-code machinery that would reach the network.

jupyter-book always loads sphinx-thebe, whose scripts name a library on unpkg.com and fetch it
when a reader asks for live code; this book offers none (``launch_buttons.thebe`` is false: its
notebooks run on Colab or Binder instead). sphinx-thebe also adds its configuration script
twice, which makes browsers report a redeclared constant. This extension drops sphinx-thebe's
scripts and stylesheet from every page, so nothing on a page refers to another host.
"""

from __future__ import annotations


def _thebe(asset) -> bool:
    name = str(getattr(asset, "filename", asset) or "")
    body = str(getattr(asset, "attributes", {}).get("body", ""))
    return "thebe" in name or "THEBE_JS_URL" in body or "thebe_selector" in body


def _drop_thebe(app, pagename, templatename, context, doctree):
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _thebe(asset)]


def setup(app):
    app.connect("html-page-context", _drop_thebe, priority=900)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
