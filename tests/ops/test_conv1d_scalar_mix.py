"""conv1d and the scalar mix: float64 gradchecks, a direct-sum reference, bad input."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_op
from minipt.ops.conv1d import conv1d_backward, conv1d_forward
from minipt.ops.scalar_mix import scalar_mix_backward, scalar_mix_forward


def test_conv1d_matches_direct_sum_and_gradchecks():
    r = np.random.default_rng(0)
    x, w, b = r.standard_normal((3, 7, 4)), r.standard_normal((5, 4, 3)), r.standard_normal(5)
    y, _ = conv1d_forward(x, w, b)
    ref = np.array([[[b[o] + sum(x[n, t + k, c] * w[o, c, k] for k in range(3) for c in range(4))
                      for o in range(5)] for t in range(5)] for n in range(3)])
    np.testing.assert_allclose(y, ref, rtol=1e-12)
    res = check_op(conv1d_forward, conv1d_backward, dict(x=x, w=w, b=b), params=("w", "b"))
    assert res.passed, str(res)


def test_conv1d_bad_input():
    with pytest.raises(ValueError, match="shorter than the kernel width 4"):
        conv1d_forward(np.zeros((2, 3, 4)), np.zeros((5, 4, 4)), None)
    with pytest.raises(ValueError, match="expected 4 input channels"):
        conv1d_forward(np.zeros((2, 6, 4)), np.zeros((5, 3, 2)), None)


def test_scalar_mix_gradcheck_and_value():
    r = np.random.default_rng(1)
    hs = [r.standard_normal((2, 3, 4)) for _ in range(3)]
    w, gamma = r.standard_normal(3), np.array([1.7])

    def fwd(h0, h1, h2, w, gamma):
        return scalar_mix_forward([h0, h1, h2], w, gamma)

    def bwd(dy, cache):
        dl, dw, dg = scalar_mix_backward(dy, cache)
        return (*dl, dw, dg)
    res = check_op(fwd, bwd, dict(h0=hs[0], h1=hs[1], h2=hs[2], w=w, gamma=gamma), params=("w", "gamma"))
    assert res.passed, str(res)
    s = np.exp(w) / np.exp(w).sum()
    np.testing.assert_allclose(fwd(*hs, w, gamma)[0], 1.7 * (s[0] * hs[0] + s[1] * hs[1] + s[2] * hs[2]))
    with pytest.raises(ValueError, match=r"one mixing weight per layer\): expected shape \(3,\)"):
        scalar_mix_forward(hs, np.zeros(2), gamma)
