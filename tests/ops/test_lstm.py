"""LSTM op: float64 gradchecks (states in and out, padding, LSTMP), padding equals running
each row alone, Numba and NumPy paths agree, and bad input is refused by name."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_op
from minipt.ops import lstm as L

B, T, C, H, P = 3, 5, 4, 3, 2


def make(rng, proj=False, dtype=np.float64):
    x = rng.standard_normal((B, T, C)).astype(dtype)                    # (B, T, C)
    w_ih = (0.5 * rng.standard_normal((4 * H, C))).astype(dtype)        # (4H, C)
    Pd = P if proj else H
    w_hh = (0.5 * rng.standard_normal((4 * H, Pd))).astype(dtype)       # (4H, P)
    b = (0.3 * rng.standard_normal(4 * H)).astype(dtype)                # (4H,)
    h0 = rng.standard_normal((B, Pd)).astype(dtype)                     # (B, P)
    c0 = rng.standard_normal((B, H)).astype(dtype)                      # (B, H)
    w_proj = (0.7 * rng.standard_normal((P, H))).astype(dtype) if proj else None
    return x, w_ih, w_hh, b, h0, c0, w_proj


def packed(lengths, proj):
    """The op with its three outputs flattened into one vector, so one check covers the
    gradients flowing in from y, h_n and c_n (the truncated-BPTT hand-over)."""
    def forward(x, w_ih, w_hh, b, h0, c0, *w_proj):
        (y, hn, cn), cache = L.lstm_forward(x, w_ih, w_hh, b, h0, c0, lengths, w_proj[0] if proj else None)
        return np.concatenate([y.ravel(), hn.ravel(), cn.ravel()]), (cache, y.shape, hn.shape)

    def backward(d, pack):
        cache, ys, hs = pack
        ny, nh = int(np.prod(ys)), int(np.prod(hs))
        g = L.lstm_backward(d[:ny].reshape(ys), cache, d[ny:ny + nh].reshape(hs), d[ny + nh:].reshape(B, H))
        dx, dh0, dc0, dw_ih, dw_hh, db, dw_proj = g
        return (dx, dw_ih, dw_hh, db, dh0, dc0) + ((dw_proj,) if proj else ())
    return forward, backward


@pytest.mark.parametrize("proj", [False, True], ids=["plain", "lstmp"])
@pytest.mark.parametrize("lengths", [None, np.array([5, 2, 1])], ids=["full", "padded"])
def test_gradcheck_states_in_and_out(proj, lengths):
    x, w_ih, w_hh, b, h0, c0, w_proj = make(np.random.default_rng(0), proj)
    fwd, bwd = packed(lengths, proj)
    inputs = dict(x=x, w_ih=w_ih, w_hh=w_hh, b=b, h0=h0, c0=c0)
    if proj:
        inputs["w_proj"] = w_proj
    res = check_op(fwd, bwd, inputs, params=("w_ih", "w_hh", "b", "w_proj"))
    assert res.passed, str(res)


@pytest.mark.parametrize("proj", [False, True])
def test_padding_equals_each_row_alone(proj):
    x, w_ih, w_hh, b, h0, c0, w_proj = make(np.random.default_rng(1), proj)
    lengths = np.array([5, 3, 1])
    x_pad = x.copy()
    x_pad[1, 3:] = 99.0                               # garbage past the length must not matter
    (y, hn, cn), _ = L.lstm_forward(x_pad, w_ih, w_hh, b, h0, c0, lengths, w_proj)
    for r, n in enumerate(lengths):
        (yr, hr, cr), _ = L.lstm_forward(x[r:r + 1, :n], w_ih, w_hh, b, h0[r:r + 1], c0[r:r + 1], None, w_proj)
        np.testing.assert_allclose(y[r, :n], yr[0], rtol=1e-12, atol=1e-14)
        assert np.all(y[r, n:] == 0)
        np.testing.assert_allclose(hn[r], hr[0], rtol=1e-12)
        np.testing.assert_allclose(cn[r], cr[0], rtol=1e-12)


def test_chunks_with_state_equal_one_pass():
    x, w_ih, w_hh, b, h0, c0, _ = make(np.random.default_rng(2))
    (y, hn, cn), _ = L.lstm_forward(x, w_ih, w_hh, b, h0, c0)
    (y1, h1, c1), _ = L.lstm_forward(x[:, :2], w_ih, w_hh, b, h0, c0)
    (y2, h2, c2), _ = L.lstm_forward(x[:, 2:], w_ih, w_hh, b, h1, c1)
    np.testing.assert_allclose(np.concatenate([y1, y2], 1), y, rtol=1e-12)
    np.testing.assert_allclose(h2, hn, rtol=1e-12)
    np.testing.assert_allclose(c2, cn, rtol=1e-12)


def test_float32_stays_float32():
    x, w_ih, w_hh, b, h0, c0, _ = make(np.random.default_rng(3), dtype=np.float32)
    (y, hn, cn), cache = L.lstm_forward(x, w_ih, w_hh, b, h0, c0, np.array([5, 4, 2]))
    grads = L.lstm_backward(np.ones_like(y), cache)
    assert y.dtype == hn.dtype == cn.dtype == np.float32
    assert all(g.dtype == np.float32 for g in grads if g is not None)


def test_bad_input_is_named():
    x, w_ih, w_hh, b, h0, c0, _ = make(np.random.default_rng(4))
    with pytest.raises(ValueError, match=r"lengths.*\[1, T=5\].*got 6"):
        L.lstm_forward(x, w_ih, w_hh, b, lengths=np.array([6, 1, 1]))
    with pytest.raises(ValueError, match=r"lengths.*got 0"):
        L.lstm_forward(x, w_ih, w_hh, b, lengths=np.array([3, 0, 1]))
    with pytest.raises(ValueError, match=r"lengths: expected shape \(3,\)"):
        L.lstm_forward(x, w_ih, w_hh, b, lengths=np.array([3, 1]))
    with pytest.raises(ValueError, match=r"h0 \(initial hidden state\): expected shape \(3, 3\), got \(3, 4\)"):
        L.lstm_forward(x, w_ih, w_hh, b, h0=np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"c0 \(initial cell state\): expected shape"):
        L.lstm_forward(x, w_ih, w_hh, b, c0=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="empty batch"):
        L.lstm_forward(x[:0], w_ih, w_hh, b)
    with pytest.raises(TypeError, match="lengths: expected an integer array"):
        L.lstm_forward(x, w_ih, w_hh, b, lengths=np.array([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="dtype mismatch"):
        L.lstm_forward(x.astype(np.float32), w_ih, w_hh, b)
