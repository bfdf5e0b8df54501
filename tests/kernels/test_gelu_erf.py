"""Exact (erf) GELU kernels against their NumPy twins in minipt.ops.activations: float32
within 1e-5 and float64 within 1e-12 of the largest value, dtype kept, finite far tails,
and the float32 erfc approximation within 2e-7 of the truth everywhere (absolute)."""
import numpy as np
import pytest

from minipt import kernels
from minipt.ops.activations import gelu_backward_numpy, gelu_forward_numpy

pytestmark = [pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0"), pytest.mark.usefixtures("two_threads")]
TOL = {np.float32: 1e-5, np.float64: 1e-12}


def rel_err(got, want):
    return np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / max(np.abs(want).max(), 1e-30)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 31, 4099, 1_100_001])   # the last in parts on threads
def test_forward_and_backward_match_twins(n, dtype):
    forward, backward = kernels.get("gelu_forward"), kernels.get("gelu_backward")
    r = np.random.default_rng(n)
    x = (r.standard_normal(n) * 3).astype(dtype)          # (N,)
    dy = r.standard_normal(n).astype(dtype)               # (N,)
    y, dx = forward(x), backward(dy, x)
    assert y.dtype == dtype and dx.dtype == dtype and y.shape == dx.shape == (n,)
    assert rel_err(y, gelu_forward_numpy(x)) <= TOL[dtype]
    assert rel_err(dx, gelu_backward_numpy(dy, x)) <= TOL[dtype]


def test_float32_is_within_its_rounding_of_the_exact_values_everywhere():
    x = np.linspace(-12.0, 12.0, 200_001).astype(np.float32)     # both signs, both tails
    x64 = x.astype(np.float64)
    y = kernels.get("gelu_forward")(x)
    dx = kernels.get("gelu_backward")(np.ones_like(x), x)
    # |x| Phi's error (7.5e-8) plus float32 rounding of values up to 12
    assert np.abs(y - gelu_forward_numpy(x64)).max() < 1e-6
    assert np.abs(dx - gelu_backward_numpy(np.ones_like(x64), x64)).max() < 5e-7
    small = np.abs(x64) < 1
    assert np.abs(y - gelu_forward_numpy(x64))[small].max() < 2e-7            # 7.5e-8 + rounding of y < 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tails_and_zero(dtype):
    x = np.array([-1e4, -100.0, -30.0, -9.0, -1e-3, 0.0, 1e-3, 9.0, 30.0, 100.0, 1e4], dtype=dtype)
    y = kernels.get("gelu_forward")(x)
    dx = kernels.get("gelu_backward")(np.ones_like(x), x)
    assert np.isfinite(y).all() and np.isfinite(dx).all()
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, gelu_forward_numpy(x64), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(dx, gelu_backward_numpy(np.ones_like(x64), x64), rtol=1e-5, atol=1e-7)
