"""LayerNorm and RMSNorm kernels (forward; backward with dx, dg (, db) in one pass) against their NumPy
twins in minipt.ops.norms: float32 within 1e-5 and float64 within 1e-12 of the largest
value, dtype kept."""
import numpy as np
import pytest

from minipt import kernels
from minipt.ops.norms import (
    layer_norm_backward_numpy,
    layer_norm_forward_numpy,
    rms_norm_backward_numpy,
    rms_norm_forward_numpy,
)

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
TOL = {np.float32: 1e-5, np.float64: 1e-12}
# (N, C): one row, C not a multiple of 8, GPT widths
SHAPES = [(1, 5), (3, 13), (9, 64), (65, 192), (130, 770)]


def rel_err(got, want):
    return np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / max(np.abs(want).max(), 1e-30)


def data(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_backward_match_twins(shape, dtype):
    forward, backward = kernels.get("layer_norm_forward"), kernels.get("layer_norm_backward")
    x = data(shape, dtype, 0) * 3 + 2                     # (N, C), mean away from 0
    dy = data(shape, dtype, 1)                            # (N, C)
    g, b = data(shape[1], dtype, 2), data(shape[1], dtype, 3)
    want = layer_norm_forward_numpy(x, g, b, 1e-5)
    got = forward(x, g, b, 1e-5)
    for name, a, w in zip(("y", "mean", "rstd"), got, want):
        assert a.dtype == dtype and a.shape == w.shape, f"{name}: {a.dtype}{a.shape} vs {w.dtype}{w.shape}"
        assert rel_err(a, w) <= TOL[dtype], f"{name}: error {rel_err(a, w):.2e}"
    _, mean, rstd = want
    got = backward(dy, x, mean, rstd, g)
    for name, a, w in zip(("dx", "dg", "db"), got, layer_norm_backward_numpy(dy, x, mean, rstd, g)):
        assert a.dtype == dtype and a.shape == w.shape, f"{name}: {a.dtype}{a.shape} vs {w.dtype}{w.shape}"
        assert rel_err(a, w) <= TOL[dtype], f"{name}: error {rel_err(a, w):.2e}"


def test_float32_statistics_accumulate_in_float64():
    # a large offset with a small spread: a naive float32 sum of squares would lose it
    x = (1000.0 + data((4, 768), np.float64, 4)).astype(np.float32)
    g, b = np.ones(768, np.float32), np.zeros(768, np.float32)
    y, mean, rstd = kernels.get("layer_norm_forward")(x, g, b, 1e-5)
    x64 = x.astype(np.float64)
    y64, m64, r64 = layer_norm_forward_numpy(x64, g.astype(np.float64), b.astype(np.float64), 1e-5)
    assert rel_err(mean, m64) < 1e-6 and rel_err(rstd, r64) < 1e-5
    assert rel_err(y, y64) < 1e-4                        # the float32 mean itself rounds by 3e-5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_matches_twins(shape, dtype):
    x = data(shape, dtype, 5) * 3 + 2                     # (N, C)
    dy = data(shape, dtype, 6)                            # (N, C)
    g = data(shape[1], dtype, 7)
    got, want = kernels.get("rms_norm_forward")(x, g, 1e-6), rms_norm_forward_numpy(x, g, 1e-6)
    for name, a, w in zip(("y", "r"), got, want):
        assert a.dtype == dtype and a.shape == w.shape, name
        assert rel_err(a, w) <= TOL[dtype], f"{name}: error {rel_err(a, w):.2e}"
    r = want[1]
    got = kernels.get("rms_norm_backward")(dy, x, r, g)
    for name, a, w in zip(("dx", "dg"), got, rms_norm_backward_numpy(dy, x, r, g)):
        assert a.dtype == dtype and a.shape == w.shape, name
        assert rel_err(a, w) <= TOL[dtype], f"{name}: error {rel_err(a, w):.2e}"
