import math

import numpy as np
import pytest

from minipt.nn import Linear
from minipt.optim import clip_grad_norm, grad_norm, warmup_cosine, warmup_linear


def test_warmup_cosine_boundaries():
    lr = lambda s: warmup_cosine(s, total=100, warmup=10, lr=1.0, min_lr=0.1)
    assert lr(0) == pytest.approx(0.1)            # (0 + 1) / 10
    assert lr(9) == pytest.approx(1.0)            # end of warm-up
    assert lr(10) == pytest.approx(1.0)           # cosine starts at the peak
    assert lr(55) == pytest.approx(0.55)          # half-way: (1 + 0.1) / 2
    assert lr(100) == pytest.approx(0.1) and lr(500) == pytest.approx(0.1)


def test_warmup_linear_boundaries():
    lr = lambda s: warmup_linear(s, total=20, warmup=4, lr=2.0)
    assert [lr(s) for s in (0, 3)] == [pytest.approx(0.5), pytest.approx(2.0)]
    assert lr(12) == pytest.approx(1.0) and lr(20) == 0.0 and lr(30) == 0.0


def test_schedule_bad_input():
    with pytest.raises(ValueError, match="warmup"):
        warmup_cosine(0, total=10, warmup=11, lr=1.0)
    with pytest.raises(ValueError, match="step"):
        warmup_linear(-1, total=10, warmup=1, lr=1.0)


def test_clip_scales_to_max_norm_and_returns_norm_before():
    m = Linear(3, 2, rng=np.random.default_rng(0))
    m.grads["weight"][...] = 3.0
    m.grads["bias"][...] = 4.0
    before = math.sqrt(6 * 9 + 2 * 16)
    assert clip_grad_norm(m, 1.0) == pytest.approx(before)
    assert grad_norm(m) == pytest.approx(1.0, rel=1e-5)
    assert clip_grad_norm(m, 10.0) == pytest.approx(1.0, rel=1e-5)   # below: untouched


def test_clip_leaves_non_finite_alone():
    m = Linear(3, 2, rng=np.random.default_rng(0))
    m.grads["weight"][0, 0] = np.nan
    assert math.isnan(clip_grad_norm(m, 1.0))
