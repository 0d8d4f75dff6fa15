"""Optional dependencies, imported when a feature needs them, with an error that says what to do."""

from __future__ import annotations


def import_ipywidgets(feature: str, fallback: str):
    """``ipywidgets``, or an ImportError naming ``feature`` and the kernel-free ``fallback``."""
    try:
        import ipywidgets
    except ImportError as err:
        raise ImportError(
            f"{feature} needs ipywidgets: pip install ipywidgets (it comes with the book extras, "
            f"pip install -e '.[book]'); {fallback} gives the same picture as plain HTML, with no "
            "kernel") from err
    return ipywidgets
