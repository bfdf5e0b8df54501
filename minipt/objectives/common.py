"""What the objectives share: the ignore index and argument checks."""
from __future__ import annotations

import numpy as np

IGNORE = -100        # targets here are not predicted (cross_entropy's ignore_index)


def check_ids_array(name: str, ids, ndim: int | tuple[int, ...] = (1, 2)) -> np.ndarray:
    ids = np.asarray(ids)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{name}: expected integer token ids, got dtype {ids.dtype}")
    if ids.ndim not in allowed:
        raise ValueError(f"{name}: expected {' or '.join(map(str, allowed))} dimensions, got shape {ids.shape}")
    if ids.size == 0:
        raise ValueError(f"{name} is empty: an objective needs at least one token")
    return ids.astype(np.int64)


def check_probability(name: str, p: float, *, open_top: bool = False) -> float:
    ok = 0.0 <= p < 1.0 if open_top else 0.0 <= p <= 1.0
    if not ok:
        raise ValueError(f"{name} must be in [0, {'1)' if open_top else '1]'}, got {p}")
    return float(p)
