"""The ReLU kernels against their NumPy twins in minipt.ops.activations: the same values
bit for bit (ReLU only selects), float32 and float64, small arrays and one large enough
to run in parts on threads; NaN passes through the forward as in np.maximum."""
import numpy as np
import pytest

from minipt import kernels
from minipt.ops.activations import relu_backward_numpy, relu_forward_numpy

pytestmark = [pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0"), pytest.mark.usefixtures("two_threads")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 31, 4099, 1_100_001])   # the last in parts on threads
def test_forward_and_backward_equal_twins(n, dtype):
    r = np.random.default_rng(n)
    x = r.standard_normal(n).astype(dtype)
    x[: min(n, 3)] = 0.0                                   # the kink: gradient 0 there
    dy = r.standard_normal(n).astype(dtype)
    y, dx = kernels.get("relu_forward")(x), kernels.get("relu_backward")(dy, x)
    assert y.dtype == dtype and dx.dtype == dtype
    assert np.array_equal(y, relu_forward_numpy(x)) and np.array_equal(dx, relu_backward_numpy(dy, x))
    assert not dx[: min(n, 3)].any()


def test_nan_passes_through_the_forward():
    x = np.array([np.nan, -1.0, 2.0], np.float32)
    y = kernels.get("relu_forward")(x)
    assert np.isnan(y[0]) and y[1] == 0 and y[2] == 2
