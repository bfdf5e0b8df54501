"""A stand-in for ``benchmarks/harness.py``'s ``alternate`` (being written on another branch,
same call and same result): delete this file once the harness is merged.

Sides A and B run in alternating rounds A B A B ... after untimed warm-up calls; a round's
time is the median of ``calls`` calls; the result is the median of the per-round ratios
t_B / t_A (> 1: A is faster) with their min..max spread."""
from __future__ import annotations

import dataclasses
import statistics
import time


@dataclasses.dataclass
class Comparison:
    a: list[float]
    b: list[float]

    @property
    def ratios(self) -> list[float]:
        return [tb / ta for ta, tb in zip(self.a, self.b)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def a_median(self) -> float:
        return statistics.median(self.a)

    @property
    def b_median(self) -> float:
        return statistics.median(self.b)

    def summary(self) -> str:
        return f"{self.ratio:.2f}x ({min(self.ratios):.2f}..{max(self.ratios):.2f})"


def alternate(a, b, rounds: int = 7, calls: int = 3, warmup: int = 2, gap: float = 0.01) -> Comparison:
    def timed(fn):
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    for _ in range(warmup):
        a(), b()
    ta, tb = [], []
    for _ in range(rounds):
        time.sleep(gap)
        ta.append(timed(a))
        time.sleep(gap)
        tb.append(timed(b))
    return Comparison(ta, tb)
