"""Gradcheck cases: the attention op under every mask kind, with a bias and dropout;
RoPE and the T5 bias table."""
import numpy as np

from ..core.gradcheck import check_op
from ..nn import masks
from ..ops.attention import attention_backward, attention_forward
from ..ops.positions import (
    rope_backward,
    rope_forward,
    t5_bias_backward,
    t5_bias_forward,
)
from . import Case

B, H, T, S, D = 2, 2, 4, 4, 3


def _qkv(T=T, S=S, seed=0):
    rng = np.random.default_rng(seed)
    return {"q": rng.standard_normal((B, H, T, D)), "k": rng.standard_normal((B, H, S, D)),
            "v": rng.standard_normal((B, H, S, D))}


def _attn(T=T, S=S, **kw):
    """kw go to check_op, which passes them to the forward and rewinds any Generator."""
    return lambda: check_op(attention_forward, lambda d, c: attention_backward(d, c)[:3], _qkv(T, S), **kw)


def _attn_bias():
    inputs = {**_qkv(), "bias": np.random.default_rng(3).standard_normal((H, T, S))}
    fwd = lambda q, k, v, bias: attention_forward(q, k, v, causal=True, bias=bias)
    return check_op(fwd, attention_backward, inputs, params=("bias",))


def _rope():
    x = np.random.default_rng(0).standard_normal((B, H, T, 4))
    return check_op(lambda x: rope_forward(x, np.arange(2, 2 + T)), rope_backward, {"x": x})


def _t5_bias():
    table = np.random.default_rng(0).standard_normal((8, H))
    return check_op(lambda t: t5_bias_forward(t, 5, 6, True, max_distance=16), t5_bias_backward,
                    {"table": table}, params=("table",))


_pad = masks.padding(np.array([4, 0]), S, queries=False)          # sequence 2: all padding
CASES = [
    Case("op attention", "q,k,v (2,2,4,3)", _attn()),
    Case("op attention causal", "fast path", _attn(causal=True)),
    Case("op attention causal S>T", "T 2, S 4 (KV cache)", _attn(T=2, causal=True)),
    Case("op attention bool mask", "prefix (T,S)", _attn(mask=masks.prefix(T, 2))),
    Case("op attention batch mask", "(B,T,S) right-to-left",
         _attn(mask=np.stack([masks.right_to_left(T), masks.bidirectional(T)]))),
    Case("op attention padding", "(B,1,S), a row fully masked", _attn(mask=_pad)),
    Case("op attention banded", "window 2", _attn(mask=masks.banded(T, 2))),
    Case("op attention bias", "causal + (H,T,S) bias", _attn_bias),
    Case("op attention dropout", "p 0.3", _attn(dropout_p=0.3, rng=np.random.default_rng(0))),
    Case("op rope", "x (2,2,4,4)", _rope),
    Case("op t5_bias", "table (8,2) -> (2,5,6)", _t5_bias),
]
