"""How a claim is judged from runs over seeds: one rule for every row of the ledger.

A claim says that one arm beats another on a metric (``better``: "higher" or "lower").
Each seed ran both arms on the same data, so the comparison is paired: d_s is the signed
advantage of the claimed winner on seed s, and its mean is compared with its standard
error s_d / sqrt(n).

- fewer than ``MIN_SEEDS`` seeds: **not testable** (too few seeds to see the spread);
- an arm not clear of its trivial floor (mean margin over the floor at most two standard
  errors): **not testable at this scale**: an arm that learnt nothing cannot be compared;
- mean advantage above two standard errors: **reproduced**;
- below minus two standard errors: **reversed**;
- otherwise **not reproduced** (the difference lies within the seeds' noise).

The standard error is never taken below what the test items alone imply: where the
experiment reports per-item scores, the paired difference on the same test items has a
sampling error se_i on seed i, and the mean over n seeds at least sqrt(mean(se_i^2) / n).
Three seeds can agree by chance (three accuracies that differ by one test example give
a spread of zero); the test set's own noise still counts.

Two standard errors of the mean of three to five paired differences is a lenient bar
(a t-test at n = 3 would ask for 4.3): a "reproduced" here is the direction holding on
every seed with room to spare, not a p-value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_SEEDS = 3
VERDICTS = ("reproduced", "not reproduced", "reversed", "not testable at this scale")


@dataclass(frozen=True)
class Spread:
    """Mean, sample standard deviation and standard error of per-seed values."""
    mean: float
    sd: float
    se: float
    n: int

    @classmethod
    def of(cls, values) -> "Spread":
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 1 or len(x) == 0 or not np.isfinite(x).all():
            raise ValueError(f"expected a non-empty list of finite per-seed values, got {values!r}")
        sd = float(x.std(ddof=1)) if len(x) > 1 else float("nan")
        return cls(float(x.mean()), sd, sd / math.sqrt(len(x)) if len(x) > 1 else float("nan"), len(x))

    def text(self, digits: int = 3) -> str:
        return f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}" if self.n > 1 else f"{self.mean:.{digits}f}"


@dataclass(frozen=True)
class Judgement:
    verdict: str
    why: str
    winner: Spread            # the arm the paper says wins
    loser: Spread             # the arm it says it beats
    floor: Spread
    advantage: Spread         # signed paired advantage of the claimed winner (positive = as claimed)


def paired_se(a, b) -> float:
    """Standard error of mean(a - b) over paired per-item scores (the same test items)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim != 1 or len(d) < 2:
        raise ValueError(f"paired scores: expected two equal 1-D arrays of at least 2 items, got {d.shape}")
    return float(d.std(ddof=1) / np.sqrt(len(d)))


def judge(winner, loser, floor, better: str, *, names: tuple[str, str], unit: str = "",
          item_se=None) -> Judgement:
    """The verdict on "``names[0]`` beats ``names[1]``" from per-seed values (same seeds,
    same order), the per-seed trivial floor of the metric and, where known, the per-seed
    standard error of the paired difference on the test items (``item_se``)."""
    if better not in ("higher", "lower"):
        raise ValueError(f"better: expected 'higher' or 'lower', got {better!r}")
    a, b, f = (np.asarray(v, dtype=np.float64) for v in (winner, loser, floor))
    if not (a.shape == b.shape == f.shape):
        raise ValueError(f"per-seed values differ in length: {a.shape}, {b.shape}, floor {f.shape}")
    sign = 1.0 if better == "higher" else -1.0
    A, B, F, D = Spread.of(a), Spread.of(b), Spread.of(f), Spread.of(sign * (a - b))
    tested = ""
    if item_se is not None:
        items = np.asarray(item_se, dtype=np.float64)
        if items.shape != a.shape or not np.isfinite(items).all():
            raise ValueError(f"item_se: expected one finite value per seed, got {item_se!r}")
        floor_se = float(np.sqrt(np.mean(items ** 2) / len(items)))
        if floor_se > D.se or not np.isfinite(D.se):
            D = Spread(D.mean, D.sd, floor_se, D.n)
            tested = ", the test items' own noise"
    unit = f" {unit}" if unit else ""
    said = (f"{names[0]} {A.text()} vs {names[1]} {B.text()}{unit} ({better} is better, floor {F.text()}); "
            f"advantage {D.mean:+.3f} (SE {D.se:.3f}{tested}) over {D.n} seeds")
    if D.n < MIN_SEEDS:
        return Judgement("not testable at this scale", f"only {D.n} seed(s), {MIN_SEEDS} needed: {said}",
                         A, B, F, D)
    for name, x in ((names[0], a), (names[1], b)):
        margin = Spread.of(sign * (x - f))
        if not margin.mean > 2 * margin.se:
            return Judgement("not testable at this scale",
                             f"{name} is not clear of its floor (margin {margin.mean:+.3f}, SE {margin.se:.3f}): "
                             f"{said}", A, B, F, D)
    if D.mean > 2 * D.se:
        verdict = "reproduced"
    elif D.mean < -2 * D.se:
        verdict = "reversed"
    else:
        verdict = "not reproduced"
    return Judgement(verdict, said, A, B, F, D)
