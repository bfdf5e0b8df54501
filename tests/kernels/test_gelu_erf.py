"""Exact-GELU kernels against their NumPy twins in minipt.ops.activations (float32 within
2e-7 and float64 within 1e-14 of the largest value, dtype kept), and both against values
of x Phi(x) from the normal table."""
import numpy as np
import pytest

from minipt import kernels
from minipt.ops.activations import gelu_backward_numpy, gelu_forward_numpy

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
TOL = {np.float32: 2e-7, np.float64: 1e-14}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 33, 5000])
def test_forward_and_backward_match_twins(n, dtype):
    forward, backward = kernels.get("gelu_forward"), kernels.get("gelu_backward")
    r = np.random.default_rng(n)
    x = (r.standard_normal(n) * 3).astype(dtype)          # (N,)
    dy = r.standard_normal(n).astype(dtype)               # (N,)
    y, dx = forward(x), backward(dy, x)
    assert y.dtype == dtype and dx.dtype == dtype and y.shape == dx.shape == (n,)
    for got, want in ((y, gelu_forward_numpy(x)), (dx, gelu_backward_numpy(dy, x))):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / np.abs(want).max()
        assert err <= TOL[dtype], err


def test_values_from_the_normal_table():
    # Phi(1) = 0.8413447460685429, Phi(-2) = 0.022750131948179195, phi(1) = 0.24197072451914337
    x = np.array([1.0, -2.0, 0.0, 40.0, -40.0])
    want_y = np.array([0.8413447460685429, -2 * 0.022750131948179195, 0.0, 40.0, 0.0])
    want_dx = np.array([0.8413447460685429 + 0.24197072451914337,
                        0.022750131948179195 - 2 * 0.05399096651318806, 0.5, 1.0, 0.0])
    for fwd, bwd in ((kernels.get("gelu_forward"), kernels.get("gelu_backward")),
                     (gelu_forward_numpy, gelu_backward_numpy)):
        np.testing.assert_allclose(fwd(x), want_y, rtol=1e-14, atol=1e-300)
        np.testing.assert_allclose(bwd(np.ones_like(x), x), want_dx, rtol=1e-14, atol=1e-300)
