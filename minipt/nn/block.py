"""The Transformer block (Vaswani et al. 2017), in both LayerNorm placements.

post-LN (original Transformer, GPT-1, BERT):  h = LN(x + Drop(Attn(x)));  y = LN(h + FFN(h))
pre-LN  (GPT-2, T5, LLaMA; Xiong et al. 2020): h = x + Drop(Attn(LN(x)));  y = h + FFN(LN(h))
With ``cross_attention`` (the decoder of an encoder-decoder) a cross-attention sub-block
over the encoder memory sits between the two. Children are named as in Hugging Face
GPT-2 (ln_1, attn, ln_2, mlp) plus ln_cross, cross_attn.
"""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from .attention import MultiHeadAttention
from .dropout import Dropout
from .feedforward import FeedForward
from .norms import LayerNorm, RMSNorm


def make_norm(kind: str, dim: int, eps: float, dtype) -> Module:
    if kind == "layer":
        return LayerNorm(dim, eps, dtype=dtype)
    if kind == "rms":
        return RMSNorm(dim, eps, dtype=dtype)
    raise ValueError(f"norm must be 'layer' or 'rms', got {kind!r}")


class TransformerBlock(Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, rng: np.random.Generator, norm: str = "layer",
                 prenorm: bool = True, activation: str = "gelu_tanh", bias: bool = True, dropout: float = 0.0,
                 attn_dropout: float | None = None, cross_attention: bool = False, rope: bool = False,
                 eps: float = 1e-5, out_std: float | None = None, dtype=np.float32):
        super().__init__()
        self.prenorm, self.has_cross = prenorm, cross_attention
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        sub = lambda: np.random.default_rng(rng.integers(2**63))
        mha = dict(rng=rng, bias=bias, dropout=attn_dropout, rope=rope, out_std=out_std, dtype=dtype)
        self.ln_1 = make_norm(norm, d_model, eps, dtype)
        self.attn = MultiHeadAttention(d_model, n_heads, **mha)
        self.drop_1 = Dropout(dropout, rng=sub() if dropout else None)
        if cross_attention:
            self.ln_cross = make_norm(norm, d_model, eps, dtype)
            self.cross_attn = MultiHeadAttention(d_model, n_heads, cross=True, **{**mha, "rope": False})
            self.drop_cross = Dropout(dropout, rng=sub() if dropout else None)
        self.ln_2 = make_norm(norm, d_model, eps, dtype)
        self.mlp = FeedForward(d_model, d_ff, rng=rng, activation=activation, bias=bias, dropout=dropout,
                               out_std=out_std, dtype=dtype)

    def forward(self, x: np.ndarray, memory: np.ndarray | None = None, *, mask=None, causal: bool = False,
                attn_bias=None, positions=None, memory_mask=None, cross_bias=None, cache=None) -> np.ndarray:
        """x (B, T, C) [, memory (B, S, C)] -> y (B, T, C)."""
        attn = lambda h: self.drop_1(self.attn(h, mask=mask, causal=causal, bias=attn_bias,
                                               positions=positions, cache=cache))
        cross = lambda h: self.drop_cross(self.cross_attn(h, memory=memory, mask=memory_mask,
                                                          bias=cross_bias, cache=cache))
        if self.prenorm:
            h = x + attn(self.ln_1(x))
            if self.has_cross:
                h = h + cross(self.ln_cross(h))
            return h + self.mlp(self.ln_2(h))
        h = self.ln_1(x + attn(x))
        if self.has_cross:
            h = self.ln_cross(h + cross(h))
        return self.ln_2(h + self.mlp(h))

    def backward(self, dy: np.ndarray):
        """dy (B, T, C) -> dx, or (dx, dmemory) with cross-attention."""
        dmem = None
        if self.prenorm:
            dh = dy + self.ln_2.backward(self.mlp.backward(dy))
            if self.has_cross:
                dq, dmem = self.cross_attn.backward(self.drop_cross.backward(dh))
                dh = dh + self.ln_cross.backward(dq)
            dx = dh + self.ln_1.backward(self.attn.backward(self.drop_1.backward(dh)))
        else:
            dz = self.ln_2.backward(dy)
            dh = dz + self.mlp.backward(dz)
            if self.has_cross:
                dz = self.ln_cross.backward(dh)
                dq, dmem = self.cross_attn.backward(self.drop_cross.backward(dz))
                dh = dz + dq
            dz = self.ln_1.backward(dh)
            dx = dz + self.attn.backward(self.drop_1.backward(dz))
        return (dx, dmem) if self.has_cross else dx
