"""Input checks shared by every entry point: clear errors naming the problem, early."""

from __future__ import annotations

import numbers

import numpy as np


def as_count(value, name: str, least: int = 1) -> int:
    """``value`` as a Python int ``>= least``: TypeError if not an integer, ValueError if less."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if value < least:
        raise ValueError(f"{name} must be at least {least}, got {value}")
    return value


def as_matrix(x, name: str) -> np.ndarray:
    """``x`` as a finite float64 matrix; errors name the array and what is wrong with it."""
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as exc:  # ragged nested lists and the like
            raise TypeError(f"{name} must be a 2-D array of floats: {exc}") from None
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (N x d), got {arr.ndim}-D with shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"{name} must hold floating-point values, got dtype {arr.dtype}")
    if 0 in arr.shape:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    bad = arr.size - int(np.count_nonzero(np.isfinite(arr)))
    if bad:
        raise ValueError(f"{name} has {bad} non-finite value(s) (NaN or infinity)")
    return arr.astype(np.float64, copy=False)


def as_scale(scale, d: int) -> float:
    """The softmax scale tau: ``1/sqrt(d)`` by default, else a finite positive number."""
    if scale is None:
        return 1.0 / np.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not np.isfinite(scale) \
            or scale <= 0:
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    return float(scale)


def as_flag(value, name: str) -> bool:
    """``value`` as a Python bool: a TypeError unless it is ``True`` or ``False`` (a NumPy
    boolean counts), never the truth value of something else (``"no"`` is not False)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)
