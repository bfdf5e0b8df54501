"""Timing helpers shared by the benchmarks: median of repeats after a warm-up call."""
from __future__ import annotations

import statistics
import time


def median_ms(fn, repeat: int = 7, number: int = 1) -> float:
    """Median wall time of ``fn()`` in milliseconds; one untimed warm-up call first
    (it pays for JIT compilation and first-touch allocation)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number * 1e3)
    return statistics.median(times)


def try_torch(threads: int = 2):
    """torch if it imports (set to ``threads`` threads), else None: it is optional."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch
