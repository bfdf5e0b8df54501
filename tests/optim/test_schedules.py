"""Learning-rate schedules at their boundaries: step 0, end of warm-up, last step, beyond."""
import math

import numpy as np
import pytest

from minipt.optim import constant, schedule, warmup_cosine, warmup_linear


def test_constant():
    assert constant(0, 3e-4) == constant(10**6, 3e-4) == 3e-4


def test_gpt1_warmup_then_cosine_to_zero():
    lr_at = schedule("warmup_cosine", total=100_000, warmup=2000, lr=2.5e-4)
    assert lr_at(0) == pytest.approx(2.5e-4 / 2000)            # first update already moves
    assert lr_at(999) == pytest.approx(2.5e-4 * 1000 / 2000)   # linear in between
    assert lr_at(1999) == pytest.approx(2.5e-4)                # end of warm-up: the peak
    assert lr_at(2000) == pytest.approx(2.5e-4)                # the cosine starts at the peak
    assert lr_at(51_000) == pytest.approx(2.5e-4 / 2)          # half-way down the cosine
    last = lr_at(99_999)                                       # last step: just above 0
    assert 0 < last < 1e-12
    assert lr_at(100_000) == 0.0 and lr_at(10**7) == 0.0       # beyond: stays at min_lr


def test_warmup_cosine_to_a_min_lr():
    lr_at = lambda s: warmup_cosine(s, total=110, warmup=10, lr=1.0, min_lr=0.1)
    assert lr_at(0) == pytest.approx(0.1) and lr_at(9) == pytest.approx(1.0)
    assert lr_at(35) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi / 4)))
    assert lr_at(60) == pytest.approx(0.55)
    assert lr_at(110) == pytest.approx(0.1) and lr_at(500) == pytest.approx(0.1)
    values = [lr_at(s) for s in range(9, 120)]
    assert all(a >= b for a, b in zip(values, values[1:]))      # never rises after the peak


def test_warmup_linear_then_linear_decay():
    lr_at = lambda s: warmup_linear(s, total=20, warmup=4, lr=2.0)
    assert [lr_at(s) for s in range(5)] == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.0])
    assert lr_at(12) == pytest.approx(1.0)                     # half-way down
    assert lr_at(19) == pytest.approx(2.0 / 16)                # last step
    assert lr_at(20) == 0.0 and lr_at(30) == 0.0
    assert warmup_linear(20, total=20, warmup=4, lr=2.0, min_lr=0.5) == 0.5


def test_no_warmup_starts_at_the_peak():
    assert warmup_cosine(0, total=10, warmup=0, lr=1.0) == 1.0
    assert warmup_linear(0, total=10, warmup=0, lr=1.0) == 1.0
    assert warmup_cosine(0, total=0, warmup=0, lr=1.0) == 1.0   # degenerate: no decay steps


def test_values_are_python_floats():
    for lr_at in (schedule("constant", lr=1e-3), schedule("warmup_linear", total=10, warmup=2, lr=1e-3),
                  schedule("warmup_cosine", total=10, warmup=2, lr=1e-3)):
        assert all(type(lr_at(s)) is float for s in range(12))
    assert type(warmup_cosine(3, total=10, warmup=2, lr=np.float64(1e-3), min_lr=np.float32(0))) is float


@pytest.mark.parametrize("call,match", [
    (lambda: warmup_cosine(0, total=10, warmup=11, lr=1.0), r"warmup must be in \[0, total=10\], got 11"),
    (lambda: warmup_linear(-1, total=10, warmup=1, lr=1.0), "step must be >= 0, got -1"),
    (lambda: warmup_cosine(0, total=10, warmup=1, lr=0.0), "lr must be > 0, got 0.0"),
    (lambda: warmup_linear(0, total=10, warmup=1, lr=1e-3, min_lr=1e-2), r"min_lr must be in \[0, lr=0.001\]"),
    (lambda: constant(-3, 1.0), "step must be >= 0"),
    (lambda: schedule("warmup_cosine", total=10, warmup=20, lr=1.0), "warmup must be"),
    (lambda: schedule("cosine", lr=1.0), "unknown schedule 'cosine'"),
])
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
