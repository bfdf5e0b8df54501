"""Gradcheck cases: the LSTM op (states in and out, padding, LSTMP), LSTM / BiLSTM
modules, conv1d, the character CNN, highway and the scalar mix."""
import numpy as np

from ..core.gradcheck import check_module, check_op
from ..core.module import Module
from ..nn.char_cnn import CharCNN, CharVocab, Highway
from ..nn.lstm import LSTM, BiLSTM
from ..nn.scalar_mix import ScalarMix
from ..ops.conv1d import conv1d_backward, conv1d_forward
from ..ops.lstm import lstm_backward, lstm_forward
from ..ops.scalar_mix import scalar_mix_backward, scalar_mix_forward
from . import Case

F64 = np.float64
rng = np.random.default_rng


def _lstm_op(proj: bool):
    def run():
        r = rng(0)
        B, T, C, H, P = 3, 5, 4, 3, (2 if proj else 3)
        lengths = np.array([5, 2, 1])
        inputs = dict(x=r.standard_normal((B, T, C)), w_ih=0.5 * r.standard_normal((4 * H, C)),
                      w_hh=0.5 * r.standard_normal((4 * H, P)), b=0.3 * r.standard_normal(4 * H),
                      h0=r.standard_normal((B, P)), c0=r.standard_normal((B, H)))
        if proj:
            inputs["w_proj"] = 0.7 * r.standard_normal((P, H))

        def fwd(x, w_ih, w_hh, b, h0, c0, *wp):
            (y, hn, cn), cache = lstm_forward(x, w_ih, w_hh, b, h0, c0, lengths, wp[0] if wp else None)
            return np.concatenate([y.ravel(), hn.ravel(), cn.ravel()]), cache   # all outputs at once

        def bwd(d, cache):
            n = B * T * P
            dx, dh0, dc0, dw_ih, dw_hh, db, dwp = lstm_backward(
                d[:n].reshape(B, T, P), cache, d[n:n + B * P].reshape(B, P), d[n + B * P:].reshape(B, H))
            return (dx, dw_ih, dw_hh, db, dh0, dc0) + ((dwp,) if proj else ())
        return check_op(fwd, bwd, inputs, params=("w_ih", "w_hh", "b", "w_proj"))
    return run


class _AllLayers(Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, lengths):
        return np.stack(self.inner(x, lengths))              # (L, B, T, 2P)

    def backward(self, dy):
        return self.inner.backward(list(dy))


def _bilstm(merge, residual):
    return lambda: check_module(_AllLayers(BiLSTM(3, 4, 2, proj_size=3, residual=residual, merge=merge,
                                                  rng=rng(1), dtype=F64)),
                                rng(2).standard_normal((3, 5, 3)), np.array([5, 3, 1]))


def _char_cnn():
    r = rng(4)
    v = CharVocab("abcde", max_chars=7)
    m = CharCNN(v.size, 3, ((1, 2), (2, 3), (3, 2)), 2, 4, rng=r, dtype=F64)
    for conv in m.convs:
        conv.params["bias"][...] = r.standard_normal(conv.params["bias"].shape)
    return check_module(m, v.encode(["abc", "e", "dcbaed", "bad"]).reshape(1, 4, 7))


def _highway():
    m = Highway(5, rng=rng(3), dtype=F64)
    m.gate.params["bias"][...] = rng(4).standard_normal(5)
    return check_module(m, rng(5).standard_normal((4, 5)))


def _scalar_mix():
    r = rng(6)
    hs = [r.standard_normal((2, 3, 4)) for _ in range(3)]

    def bwd(dy, cache):
        dl, dw, dg = scalar_mix_backward(dy, cache)
        return (*dl, dw, dg)
    return check_op(lambda h0, h1, h2, w, g: scalar_mix_forward([h0, h1, h2], w, g), bwd,
                    dict(h0=hs[0], h1=hs[1], h2=hs[2], w=r.standard_normal(3), g=np.array([1.3])), params=("w", "g"))


CASES = [
    Case("ops.lstm", "B3 T5 C4 H3, padded, h0/c0 in, h_n/c_n out", _lstm_op(False)),
    Case("ops.lstm LSTMP", "B3 T5 C4 H3 P2, padded, states", _lstm_op(True)),
    Case("nn.LSTM residual LSTMP", "x (3,4,4), states in, padded",
         lambda: check_module(LSTM(4, 5, proj_size=4, residual=True, rng=rng(0), dtype=F64),
                              rng(1).standard_normal((3, 4, 4)), rng(2).standard_normal((3, 4)),
                              rng(3).standard_normal((3, 5)), np.array([4, 2, 1]))),
    Case("nn.BiLSTM concat", "2 layers, x (3,5,3), padded", _bilstm("concat", False)),
    Case("nn.BiLSTM separate residual", "2 layers (ELMo), padded", _bilstm("separate", True)),
    Case("ops.conv1d", "x (3,7,4) w (5,4,3)",
         lambda: check_op(conv1d_forward, conv1d_backward, dict(x=rng(0).standard_normal((3, 7, 4)),
                          w=rng(1).standard_normal((5, 4, 3)), b=rng(2).standard_normal(5)), params=("w", "b"))),
    Case("nn.CharCNN", "4 words x 7 chars, widths 1-3, 2 highways", _char_cnn),
    Case("nn.Highway", "x (4,5)", _highway),
    Case("ops.scalar_mix", "3 layers (2,3,4), gamma", _scalar_mix),
    Case("nn.ScalarMix", "3 layers (2,3,4)", lambda: check_module(ScalarMix(3, dtype=F64),
                                                                  [rng(7 + j).standard_normal((2, 3, 4)) for j in range(3)])),
]
