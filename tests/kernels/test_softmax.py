"""Softmax backward kernel against its NumPy twin in minipt.ops.softmax: float32 within
1e-5 and float64 within 1e-12 of the largest value, dtype kept."""
import numpy as np
import pytest

from minipt import kernels
from minipt.ops.softmax import softmax_backward_numpy, softmax_forward

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
TOL = {np.float32: 1e-5, np.float64: 1e-12}


def rel_err(got, want):
    return np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / max(np.abs(want).max(), 1e-30)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (5, 13), (64, 64), (300, 257)])
def test_matches_twin(shape, dtype):
    r = np.random.default_rng(shape[0] * 1000 + shape[1])
    y, _ = softmax_forward((r.standard_normal(shape) * 2).astype(dtype))    # (N, K)
    dy = r.standard_normal(shape).astype(dtype)                             # (N, K)
    dx = kernels.get("softmax_backward")(dy, y)
    assert dx.dtype == dtype and dx.shape == shape
    assert rel_err(dx, softmax_backward_numpy(dy, y)) <= TOL[dtype]


def test_rows_of_dx_sum_to_zero():
    # softmax outputs sum to 1 whatever x is, so any dx it passes back sums to 0 per row
    r = np.random.default_rng(1)
    y, _ = softmax_forward(r.standard_normal((50, 96)))
    dx = kernels.get("softmax_backward")(r.standard_normal((50, 96)), y)
    np.testing.assert_allclose(dx.sum(axis=1), 0.0, atol=1e-14)
