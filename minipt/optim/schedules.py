"""Learning-rate schedules as pure functions of the step (0-based).

GPT-1 (Radford et al. 2018): linear warm-up over 2000 steps, then cosine annealing to 0.
BERT (Devlin et al. 2019): linear warm-up, then linear decay.
"""
from __future__ import annotations

import math


def _check(step: int, total: int, warmup: int) -> None:
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if not 0 <= warmup <= total:
        raise ValueError(f"warmup must be in [0, total={total}], got {warmup}")


def constant(step: int, lr: float) -> float:
    return lr


def warmup_linear(step: int, total: int, warmup: int, lr: float, min_lr: float = 0.0) -> float:
    """(step + 1) / warmup * lr during warm-up; then linear to ``min_lr`` at ``total``."""
    _check(step, total, warmup)
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = min((step - warmup) / max(total - warmup, 1), 1.0)
    return lr + (min_lr - lr) * frac


def warmup_cosine(step: int, total: int, warmup: int, lr: float, min_lr: float = 0.0) -> float:
    """(step + 1) / warmup * lr during warm-up; then half a cosine to ``min_lr`` at ``total``."""
    _check(step, total, warmup)
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = min((step - warmup) / max(total - warmup, 1), 1.0)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * frac))
