"""LSTM and BiLSTM modules over ``minipt.ops.lstm`` (Hochreiter & Schmidhuber 1997).

``LSTM``: one layer, optionally projected (LSTMP, Sak et al. 2014) and residual
(y = LSTM(x) + x, ELMo's connection between its layers, Peters et al. 2018). Initial
states in, final states out (``final_state``), lengths for padded batches. Weights are
drawn from U(-1/sqrt(H), 1/sqrt(H)) as in PyTorch, and the forget-gate bias starts at 1
(Gers et al. 2000; Jozefowicz et al. 2015): the cell remembers by default.

``BiLSTM``: a forward and a backward stack (Schuster & Paliwal 1997). The backward
direction reads each row reversed *within its length*, so padding stays at the end and
the first real token is the backward LSTM's last. ``merge="concat"``: layer l+1 reads
both directions of layer l (PyTorch's bidirectional LSTM); ``merge="separate"``: each
direction's stack reads only itself (ELMo's biLM: two language models that share only
the token encoder and the softmax). Either way every layer's output is [forward;
backward] (B, T, 2P).
"""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.checks import check_ndim
from ..core.module import Module
from ..ops.lstm import check_lengths, lstm_backward, lstm_forward


class LSTM(Module):
    def __init__(self, input_size: int, hidden_size: int, *, proj_size: int | None = None,
                 residual: bool = False, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        H, C = hidden_size, input_size
        P = H if proj_size is None else proj_size
        if residual and C != P:
            raise ValueError(f"residual LSTM needs input_size == output size, got {C} and {P}")
        k = 1.0 / np.sqrt(H)
        self.add_param("weight_ih", rng.uniform(-k, k, (4 * H, C)).astype(dtype))   # (4H, C) rows i f g o
        self.add_param("weight_hh", rng.uniform(-k, k, (4 * H, P)).astype(dtype))   # (4H, P)
        bias = init.zeros(4 * H, dtype)
        bias[H:2 * H] = 1.0                                                         # forget gate bias 1
        self.add_param("bias", bias)                                                # (4H,)
        if proj_size is not None:
            self.add_param("weight_hr", rng.uniform(-k, k, (P, H)).astype(dtype))   # (P, H) PyTorch's name
        self.input_size, self.hidden_size, self.out_size, self.residual = C, H, P, residual
        self.final_state: tuple[np.ndarray, np.ndarray] | None = None
        self._cache = None

    def forward(self, x: np.ndarray, h0: np.ndarray | None = None, c0: np.ndarray | None = None,
                lengths: np.ndarray | None = None) -> np.ndarray:
        """x (B, T, C) -> y (B, T, P); ``self.final_state`` = (h_n (B, P), c_n (B, H))."""
        p = self.params
        (y, hn, cn), self._cache = lstm_forward(x, p["weight_ih"], p["weight_hh"], p["bias"], h0, c0,
                                                lengths, p.get("weight_hr"))
        self.final_state = (hn, cn)
        return y + x if self.residual else y

    def backward(self, dy: np.ndarray, dh_n: np.ndarray | None = None, dc_n: np.ndarray | None = None):
        """dy (B, T, P) [, dh_n (B, P), dc_n (B, H)] -> (dx (B, T, C), dh0 (B, P), dc0 (B, H))."""
        dx, dh0, dc0, dw_ih, dw_hh, db, dw_hr = lstm_backward(dy, self._cache, dh_n, dc_n)
        self.grads["weight_ih"] += dw_ih
        self.grads["weight_hh"] += dw_hh
        self.grads["bias"] += db
        if dw_hr is not None:
            self.grads["weight_hr"] += dw_hr
        if self.residual:
            dx = dx + dy
        return dx, dh0, dc0


def reverse_padded(x: np.ndarray, lengths: np.ndarray | None) -> np.ndarray:
    """x (B, T, ...) with each row's first ``lengths[b]`` steps reversed and its padding left
    in place. Its own inverse, so it also maps gradients back."""
    if lengths is None:
        return x[:, ::-1]
    B, T = x.shape[:2]
    t = np.arange(T)[None, :]                                     # (1, T)
    src = np.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)   # (B, T)
    return x[np.arange(B)[:, None], src]


class BiLSTM(Module):
    def __init__(self, input_size: int, hidden_size: int, n_layers: int = 1, *, proj_size: int | None = None,
                 residual: bool = False, merge: str = "concat", rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        if merge not in ("concat", "separate"):
            raise ValueError(f"merge must be 'concat' or 'separate', got {merge!r}")
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        P = hidden_size if proj_size is None else proj_size
        if residual and merge == "concat":
            raise ValueError("residual connections need merge='separate' (a layer's input and output "
                             "widths differ, 2P and P, when directions are concatenated)")
        self.merge, self.n_layers, self.out_size = merge, n_layers, P
        self.forward_layers, self.backward_layers = [], []
        for layer in range(n_layers):
            C = input_size if layer == 0 else (2 * P if merge == "concat" else P)
            res = residual and layer > 0
            for stack in (self.forward_layers, self.backward_layers):
                stack.append(LSTM(C, hidden_size, proj_size=proj_size, residual=res, rng=rng, dtype=dtype))
        self._lengths = None

    def forward(self, x: np.ndarray, lengths: np.ndarray | None = None) -> list[np.ndarray]:
        """x (B, T, C) -> one (B, T, 2P) array per layer: [forward; backward] along C."""
        check_ndim("x", x, 3)
        if lengths is not None:
            lengths = check_lengths(lengths, x.shape[0], x.shape[1])
        self._lengths = lengths
        f_in, b_in = x, reverse_padded(x, lengths)                # b_in in reversed time
        outs = []
        for fl, bl in zip(self.forward_layers, self.backward_layers):
            yf = fl(f_in, lengths=lengths)                        # (B, T, P)
            yb = bl(b_in, lengths=lengths)                        # (B, T, P), reversed time
            outs.append(np.concatenate([yf, reverse_padded(yb, lengths)], axis=-1))   # (B, T, 2P)
            if self.merge == "concat":
                f_in, b_in = outs[-1], reverse_padded(outs[-1], lengths)
            else:
                f_in, b_in = yf, yb
        return outs

    def backward(self, douts: list[np.ndarray | None]) -> np.ndarray:
        """douts: one (B, T, 2P) gradient (or None) per layer -> dx (B, T, C)."""
        if len(douts) != self.n_layers:
            raise ValueError(f"douts: expected {self.n_layers} layer gradients, got {len(douts)}")
        lengths, P = self._lengths, self.out_size
        df = db = None                                            # gradients reaching layer l+1's inputs
        for layer in range(self.n_layers - 1, -1, -1):
            d = douts[layer]
            if d is None:
                ref = self.forward_layers[layer]._cache.h
                d = np.zeros((ref.shape[1], ref.shape[0] - 1, 2 * P), ref.dtype)   # (B, T, 2P)
            if df is not None and self.merge == "concat":
                d = d + df + reverse_padded(db, lengths)
            dyf, dyb = d[..., :P], reverse_padded(d[..., P:], lengths)
            if df is not None and self.merge == "separate":
                dyf, dyb = dyf + df, dyb + db
            df = self.forward_layers[layer].backward(dyf)[0]
            db = self.backward_layers[layer].backward(dyb)[0]
        return df + reverse_padded(db, lengths)
