"""The attention and cross-entropy kernels' row max (minipt.kernels.attention_rows._row_max), an
integer max over the floats' bits: the exact max of row[:n] for every sign, zero, tiny,
huge, infinite and masked (-1e30) value, in float32 and float64."""
import numba
import numpy as np
import pytest

from minipt import kernels
from minipt.kernels.attention_rows import _row_max

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")


@numba.njit(cache=False)
def row_max(row, n):
    return _row_max(row, n)


SPECIAL = [0.0, -0.0, 1e-40, -1e-40, 1e-30, -1e30, 3.5, -3.5, 1e30, -np.inf, np.inf, 7.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_max_of_the_first_n(dtype):
    r = np.random.default_rng(0)
    for trial in range(300):
        size = int(r.integers(1, 70))
        row = (r.standard_normal(size) * 10.0 ** r.integers(-3, 4)).astype(dtype)
        if trial % 3 == 0:
            row = -np.abs(row)                                    # all negative: the flipped keys
        if trial % 5 == 0:
            row[r.random(size) < 0.4] = dtype(-1e30)              # masked keys
        n = int(r.integers(1, size + 1))
        row[n:] = dtype(1e38)                                     # past n: never read
        got = row_max(row, n)
        assert got == row[:n].max(), (row[:n], got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signs_zeros_and_infinities(dtype):
    vals = np.array(SPECIAL, dtype=dtype)
    for i in range(len(vals)):
        for j in range(len(vals)):
            row = np.array([vals[i], vals[j], dtype(-1e30)], dtype=dtype)
            assert row_max(row, 3) == row.max()
    assert np.signbit(row_max(np.array([-0.0], dtype=dtype), 1))          # -0 stays -0 alone
    assert not np.signbit(row_max(np.array([-0.0, 0.0], dtype=dtype), 2))  # +0 above -0
