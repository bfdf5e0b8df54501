"""Learning-rate schedules: pure functions of the (0-based) step.

- constant: the same lr at every step.
- warmup_linear (BERT, Devlin et al. 2019): linear warm-up, then linear decay to min_lr.
- warmup_cosine (GPT-1, Radford et al. 2018: "increased linearly from zero over the first
  2000 updates and annealed to 0 using a cosine schedule"; cosine annealing from
  Loshchilov & Hutter 2017, SGDR): linear warm-up, then half a cosine down to min_lr.

Warm-up gives step s the rate lr * (s + 1) / warmup, so the first step already moves
(lr / warmup) and step warmup - 1 reaches the peak lr. The decay runs over steps
warmup .. total: lr at step ``warmup``, min_lr at step ``total`` and after it.
``schedule(kind, ...)`` binds the arguments and returns ``lr_at(step)``.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable


def _check(step: int, total: int, warmup: int, lr: float, min_lr: float) -> None:
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    if not 0 <= warmup <= total:
        raise ValueError(f"warmup must be in [0, total={total}], got {warmup}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if not 0 <= min_lr <= lr:
        raise ValueError(f"min_lr must be in [0, lr={lr}], got {min_lr}")


def _decay_fraction(step: int, total: int, warmup: int) -> float:
    """0 at the end of warm-up, 1 at ``total`` and beyond."""
    return min((step - warmup) / max(total - warmup, 1), 1.0)


def constant(step: int, lr: float) -> float:
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    return float(lr)


def warmup_linear(step: int, total: int, warmup: int, lr: float, min_lr: float = 0.0) -> float:
    """lr (step + 1) / warmup during warm-up; then a straight line to ``min_lr`` at ``total``."""
    _check(step, total, warmup, lr, min_lr)
    lr, min_lr = float(lr), float(min_lr)        # Python floats: no NumPy scalar leaks out
    if step < warmup:
        return lr * (step + 1) / warmup
    return lr + (min_lr - lr) * _decay_fraction(step, total, warmup)


def warmup_cosine(step: int, total: int, warmup: int, lr: float, min_lr: float = 0.0) -> float:
    """lr (step + 1) / warmup during warm-up; then half a cosine to ``min_lr`` at ``total``."""
    _check(step, total, warmup, lr, min_lr)
    lr, min_lr = float(lr), float(min_lr)
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = _decay_fraction(step, total, warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * frac))


SCHEDULES: dict[str, Callable[..., float]] = {
    "constant": constant, "warmup_linear": warmup_linear, "warmup_cosine": warmup_cosine}


def schedule(kind: str, **kwargs) -> Callable[[int], float]:
    """``lr_at(step)`` for a named schedule, e.g. ``schedule("warmup_cosine", total=10_000,
    warmup=2000, lr=2.5e-4)`` (GPT-1). Arguments are checked once, here."""
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; expected one of {sorted(SCHEDULES)}")
    lr_at = partial(SCHEDULES[kind], **kwargs)
    lr_at(0)                                      # raises now on bad arguments
    return lr_at
