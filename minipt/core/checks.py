"""Input checks shared by every op and module.

Each check raises an error that names the argument, what was expected and what was
given, so a wrong shape or dtype is found where it enters, not three layers later.
"""
from __future__ import annotations

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_float(name: str, x: np.ndarray) -> None:
    """Raise TypeError unless ``x`` is a float32 or float64 ndarray."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected dtype float32 or float64, got {x.dtype}")


def check_same_dtype(**arrays: np.ndarray | None) -> np.dtype | None:
    """All given float arrays share one dtype; returns it (None when every entry is None).
    ``None`` entries are skipped. One plain loop: every op calls this, several times a layer."""
    dtype = None
    for k, v in arrays.items():
        if v is None:
            continue
        check_float(k, v)
        if dtype is None:
            dtype = v.dtype
        elif v.dtype != dtype:
            listing = ", ".join(f"{n} {a.dtype}" for n, a in arrays.items() if a is not None)
            raise TypeError(f"dtype mismatch: {listing} (cast them to one dtype)")
    return dtype


def check_ndim(name: str, x: np.ndarray, ndim: int | tuple[int, ...]) -> None:
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if x.ndim not in allowed:
        want = " or ".join(str(n) for n in allowed)
        raise ValueError(f"{name}: expected {want} dimensions, got shape {x.shape}")


def check_last_dim(name: str, x: np.ndarray, size: int) -> None:
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{name}: expected last dimension {size}, got shape {x.shape}")


def check_shape(name: str, x: np.ndarray, shape: tuple[int, ...]) -> None:
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {x.shape}")


def check_ids(name: str, ids: np.ndarray, vocab_size: int) -> None:
    """Token ids are integers in [0, vocab_size)."""
    if not isinstance(ids, np.ndarray) or ids.dtype.kind not in "iu":          # signed or unsigned integers
        got = ids.dtype if isinstance(ids, np.ndarray) else type(ids).__name__
        raise TypeError(f"{name}: expected an integer array of token ids, got {got}")
    if ids.size == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise IndexError(f"{name}: token id {bad} is outside the vocabulary [0, {vocab_size})")


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int, or ValueError naming ``name`` unless it is a whole number
    >= ``minimum`` (1 by default; 0 for counts that may be empty)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
