"""GELU (tanh approximation) kernels against their NumPy twins in minipt.ops.activations:
float32 within 1e-5 and float64 within 1e-12 of the largest value, dtype kept, finite far
tails; the float32 kernel's own exp is checked on its whole range."""
import numba
import numpy as np
import pytest

from minipt import kernels
from minipt.ops.activations import gelu_tanh_backward_numpy, gelu_tanh_forward_numpy

pytestmark = [pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0"), pytest.mark.usefixtures("two_threads")]
TOL = {np.float32: 1e-5, np.float64: 1e-12}


def rel_err(got, want):
    return np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / max(np.abs(want).max(), 1e-30)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 31, 4099, 1_100_001])   # the last in parts on threads
def test_forward_and_backward_match_twins(n, dtype):
    forward, backward = kernels.get("gelu_tanh_forward"), kernels.get("gelu_tanh_backward")
    r = np.random.default_rng(n)
    x = (r.standard_normal(n) * 3).astype(dtype)          # (N,)
    dy = r.standard_normal(n).astype(dtype)               # (N,)
    y, dx = forward(x), backward(dy, x)
    assert y.dtype == dtype and dx.dtype == dtype and y.shape == dx.shape == (n,)
    assert rel_err(y, gelu_tanh_forward_numpy(x)) <= TOL[dtype]
    assert rel_err(dx, gelu_tanh_backward_numpy(dy, x)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tails_and_zero(dtype):
    # far tails: gelu(x) -> x and -> 0, gelu'(x) -> 1 and -> 0, no overflow to inf or nan
    x = np.array([-1e4, -100.0, -30.0, -9.0, -1e-3, 0.0, 1e-3, 9.0, 30.0, 100.0, 1e4], dtype=dtype)
    y = kernels.get("gelu_tanh_forward")(x)
    dx = kernels.get("gelu_tanh_backward")(np.ones_like(x), x)
    assert np.isfinite(y).all() and np.isfinite(dx).all()
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, gelu_tanh_forward_numpy(x64), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(dx, gelu_tanh_backward_numpy(np.ones_like(x64), x64), rtol=1e-5, atol=1e-7)


def test_float32_exp_is_accurate_over_its_range():
    from minipt.kernels.gelu import _exp32

    @numba.njit
    def exp_all(z):
        out = np.empty_like(z)
        for i in range(z.shape[0]):
            out[i] = _exp32(z[i])
        return out

    z = np.linspace(-87.0, 88.0, 200_001, dtype=np.float32)
    got = exp_all(z)
    assert got.dtype == np.float32
    err = np.abs(got.astype(np.float64) / np.exp(z.astype(np.float64)) - 1).max()
    assert err < 2.5e-7, f"exp32 relative error {err:.2e} (float32 rounding is 6e-8)"
