"""The LSTM cell kernels against their NumPy twins (minipt.ops.lstm), padded rows included,
and the whole op with Numba on and off."""
import numpy as np
import pytest

from minipt import kernels
from minipt.ops import lstm as L

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
TOL = {np.float32: 2e-6, np.float64: 1e-13}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("B,H", [(1, 1), (5, 7), (32, 128)])
def test_pointwise_forward_and_backward_match_twins(B, H, dtype):
    r = np.random.default_rng(B * H)
    z = (3 * r.standard_normal((B, 4 * H))).astype(dtype)           # (B, 4H)
    c_prev = r.standard_normal((B, H)).astype(dtype)                 # (B, H)
    valid = r.random(B) < 0.7
    outs = {}
    for name, fn in (("kernel", kernels.get("lstm_pointwise_forward")), ("twin", L.lstm_pointwise_forward_numpy)):
        bufs = [np.full((B, 4 * H), np.nan, dtype)] + [np.full((B, H), np.nan, dtype) for _ in range(3)]
        fn(z, c_prev, valid, *bufs)
        outs[name] = bufs
    for k, t in zip(outs["kernel"], outs["twin"]):
        assert k.dtype == dtype
        np.testing.assert_allclose(k, t, rtol=TOL[dtype], atol=TOL[dtype])
    gates, c, tc, hc = outs["twin"]
    dhc, dc_next = r.standard_normal((B, H)).astype(dtype), r.standard_normal((B, H)).astype(dtype)
    back = {}
    for name, fn in (("kernel", kernels.get("lstm_pointwise_backward")), ("twin", L.lstm_pointwise_backward_numpy)):
        dz, dcp = np.full((B, 4 * H), np.nan, dtype), np.full((B, H), np.nan, dtype)
        fn(dhc, dc_next, gates, c_prev, tc, valid, dz, dcp)
        back[name] = (dz, dcp)
    for k, t in zip(back["kernel"], back["twin"]):
        np.testing.assert_allclose(k, t, rtol=TOL[dtype], atol=TOL[dtype])


def test_op_with_and_without_kernels(monkeypatch):
    r = np.random.default_rng(0)
    B, T, C, H = 4, 6, 5, 8
    x = r.standard_normal((B, T, C))
    w_ih, w_hh, b = r.standard_normal((4 * H, C)) * 0.4, r.standard_normal((4 * H, H)) * 0.4, r.standard_normal(4 * H)
    lengths = np.array([6, 3, 1, 5])
    dy = r.standard_normal((B, T, H))
    (y1, h1, c1), cache = L.lstm_forward(x, w_ih, w_hh, b, lengths=lengths)
    g1 = L.lstm_backward(dy, cache)
    monkeypatch.setattr(kernels, "ENABLED", False)
    (y2, h2, c2), cache = L.lstm_forward(x, w_ih, w_hh, b, lengths=lengths)
    g2 = L.lstm_backward(dy, cache)
    for a, b_ in zip((y1, h1, c1) + g1[:-1], (y2, h2, c2) + g2[:-1]):
        np.testing.assert_allclose(a, b_, rtol=1e-12, atol=1e-13)
