"""Global-norm gradient clipping: the norm returned, scaling in place, ties, non-finite."""
import math

import numpy as np
import pytest

from minipt.core.module import Module
from minipt.nn.linear import Linear
from minipt.optim import clip_grad_norm, grad_norm


def layer(dtype=np.float32):
    m = Linear(3, 2, rng=np.random.default_rng(0), dtype=dtype)
    m.grads["weight"][...] = 3.0                  # (2, 3): six 3s
    m.grads["bias"][...] = 4.0                    # (2,): two 4s
    return m


NORM = math.sqrt(6 * 9 + 2 * 16)                  # sqrt(86)


class Tied(Module):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.a = Linear(2, 2, bias=False, rng=rng)
        self.b = Linear(2, 2, bias=False, rng=rng)
        self.b.tie("weight", self.a, "weight")


def test_clips_to_max_norm_and_returns_the_norm_before():
    m = layer()
    w = m.grads["weight"]
    assert clip_grad_norm(m, 1.0) == pytest.approx(NORM)
    assert m.grads["weight"] is w                 # scaled in place
    assert grad_norm(m) == pytest.approx(1.0, rel=1e-5)
    assert w[0, 0] == pytest.approx(3.0 / NORM, rel=1e-5)   # direction kept
    assert w.dtype == np.float32 and m.grads["bias"].dtype == np.float32


def test_below_max_norm_nothing_changes():
    m = layer(np.float64)
    before = {n: g.copy() for n, g in m.named_grads()}
    assert clip_grad_norm(m, 10.0) == NORM
    assert all(np.array_equal(g, before[n]) for n, g in m.named_grads())


def test_infinite_max_norm_only_measures():
    m = layer()
    assert clip_grad_norm(m, math.inf) == pytest.approx(NORM)
    assert m.grads["weight"][0, 0] == 3.0


def test_tied_gradient_counted_and_scaled_once():
    m = Tied()
    m.a.grads["weight"][...] = 2.0                # one array shared by a and b
    assert clip_grad_norm(m, 1.0) == pytest.approx(4.0)     # sqrt(4 * 2^2), not sqrt(8 * 2^2)
    assert m.b.grads["weight"][0, 0] == pytest.approx(0.5, rel=1e-5)   # scaled once, not twice


def test_dict_and_list_of_grads():
    d = {"w": np.full((2, 3), 3.0), "b": np.full(2, 4.0)}
    assert grad_norm(d) == clip_grad_norm(d, 100.0) == NORM
    g = np.full(4, 1.0)
    assert clip_grad_norm([g, g], 1.0) == 2.0     # the same array twice counts once
    assert grad_norm([g]) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_norm_is_returned_without_scaling(bad):
    m = layer()
    m.grads["weight"][0, 0] = bad
    before = {n: g.copy() for n, g in m.named_grads()}
    total = clip_grad_norm(m, 1.0)
    assert not math.isfinite(total)
    assert all(np.array_equal(g, before[n], equal_nan=True) for n, g in m.named_grads())


def test_float32_overflow_of_finite_gradients_still_gives_the_norm():
    g = np.full(4, 1e20, np.float32)              # each square overflows float32
    assert clip_grad_norm([g], 1.0) == pytest.approx(2e20, rel=1e-6)
    assert g.dtype == np.float32 and np.linalg.norm(g.astype(np.float64)) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("max_norm", [0.0, -1.0, math.nan])
def test_bad_max_norm(max_norm):
    with pytest.raises(ValueError, match="max_norm must be > 0"):
        clip_grad_norm(layer(), max_norm)


def test_bad_gradients():
    with pytest.raises(TypeError, match="got int64"):
        clip_grad_norm([np.arange(3)], 1.0)
    with pytest.raises(TypeError, match="single array"):
        clip_grad_norm(np.ones(3), 1.0)
