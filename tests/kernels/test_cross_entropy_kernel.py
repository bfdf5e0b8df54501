"""The fused cross-entropy kernels against their NumPy twins in minipt.ops.cross_entropy
(per-row loss, log-sum-exp and the logits' gradient), float32 and float64, with and without
label smoothing, vocabularies below and off the unrolling width; through the op, a
non-finite logit still gives a NaN loss."""
import numpy as np
import pytest

from minipt import kernels
from minipt.ops import cross_entropy as C

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
TOL = {np.float32: 2e-6, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("N,V", [(1, 1), (3, 5), (7, 37), (64, 512)])
def test_rows_match_twins(N, V, eps, dtype):
    r = np.random.default_rng(V)
    z = (r.standard_normal((N, V)) * 4).astype(dtype)
    t = r.integers(0, V, N)
    w = r.random(N)
    nll, lse = kernels.get("cross_entropy_rows")(z, t, eps)
    want, logp = C._rows_numpy(z, t, eps)
    assert lse.dtype == dtype and np.abs(nll - want).max() <= TOL[dtype] * max(1.0, np.abs(want).max())
    assert np.abs(lse - (z - logp)[:, 0]).max() <= TOL[dtype] * max(1.0, np.abs(lse).max())
    dz = kernels.get("cross_entropy_rows_backward")(z, t, lse, w, eps)
    assert dz.dtype == dtype and np.abs(dz - C._rows_backward_numpy(logp, t, w, eps)).max() <= TOL[dtype]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_logit_gives_a_nan_loss(bad):
    z = np.zeros((2, 3, 9), np.float32)
    z[1, 2, 4] = bad
    loss, _ = C.cross_entropy_forward(z, np.zeros((2, 3), np.int64))
    assert np.isnan(loss)
