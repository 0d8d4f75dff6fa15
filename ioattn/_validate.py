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


def as_real(value, name: str, *, least=None, most=None, positive: bool = False) -> float:
    """``value`` as a finite float: TypeError if it is not a real number (a string, a bool),
    ValueError if it is NaN or infinite, not positive (with ``positive``), or outside
    ``[least, most]`` (either end optional); the message names the range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if least is not None and value < least or most is not None and value > most:
        span = (f"between {least:g} and {most:g}" if least is not None and most is not None
                else f"at least {least:g}" if least is not None else f"at most {most:g}")
        raise ValueError(f"{name} must be {span}, got {value:g}")
    return value


def as_counts(values, name: str, least: int = 1, most: int | None = None) -> list[int]:
    """A non-empty sequence of counts (:func:`as_count` each, at most ``most``), as a list."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of integers, got {values!r}")
    out = [as_count(v, name, least) for v in values]
    if not out:
        raise ValueError(f"{name} is empty: give at least one value")
    if most is not None and max(out) > most:
        raise ValueError(f"{name} must be at most {most:,}, got {max(out):,}")
    return out


def suggest(value, known) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``known`` to ``value``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(str(value), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def as_name(value, name: str, known, what: str = "algorithm") -> str:
    """``value`` if it is one of ``known`` (strings); ValueError naming the closest otherwise."""
    known = list(known)
    if not isinstance(value, str) or value not in known:
        raise ValueError(f"{name}: unknown {what} {value!r}{suggest(value, known)}; "
                         f"known: {', '.join(sorted(known))}")
    return value


def as_names(values, name: str, known, what: str = "algorithm") -> list[str]:
    """A list of names, each one of ``known`` (:func:`as_name`); a single string is refused
    (it would be read letter by letter). May be empty."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of {what} names, got {values!r}")
    return [as_name(v, name, known, what) for v in values]


def cores() -> int:
    """The CPU cores this process may run on (its affinity where the system tells it)."""
    import os

    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def as_threads(threads, name: str = "threads") -> int:
    """``threads`` as a count, capped at :func:`cores` with a RuntimeWarning saying so (more
    threads than cores only add memory, each its own buffers)."""
    import warnings

    threads = as_count(threads, name)
    have = cores()
    if threads > have:
        warnings.warn(f"{name} = {threads} is more than the {have} core(s) this process can "
                      f"use; running on {have}", RuntimeWarning, stacklevel=3)
        threads = have
    return threads
