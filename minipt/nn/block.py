"""The Transformer block (Vaswani et al. 2017), in both LayerNorm placements.

post-LN (original Transformer, GPT-1, BERT):
    h = LN_1(x + Drop(Attn(x)))                      y = LN_2(h + Drop(FFN(h)))
pre-LN (GPT-2, T5, LLaMA; Xiong et al. 2020, "On Layer Normalization in the Transformer
Architecture"):
    h = x + Drop(Attn(LN_1(x)))                      y = h + Drop(FFN(LN_2(h)))

With ``cross_attention`` (the decoder of an encoder-decoder) a cross-attention sub-layer
over the encoder memory sits between the two, in the same placement:
    pre-LN  h' = h + Drop(Cross(LN_c(h), memory)),   post-LN  h' = LN_c(h + Drop(Cross(h, memory))).
Children are named as in Hugging Face GPT-2 (``ln_1``, ``attn``, ``ln_2``, ``mlp``) plus
``ln_cross`` and ``cross_attn``. Residual dropout sits on each branch (its own Generator,
so a gradcheck can replay it); attention dropout is inside ``attn``.

Backward mirrors forward bottom-up: a residual y = h + f(h) sends dy straight to h and
through f; a post-LN y = LN(z) first turns dy into dz.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core.checks import check_positive_int
from ..core.module import Module
from .attention import MultiHeadAttention
from .dropout import Dropout
from .feedforward import FeedForward
from .norms import LayerNorm, RMSNorm


def make_norm(kind: str, dim: int, eps: float, dtype) -> Module:
    """``"layer"`` -> LayerNorm (GPT, BERT), ``"rms"`` -> RMSNorm (T5, LLaMA)."""
    if kind == "layer":
        return LayerNorm(dim, eps, dtype=dtype)
    if kind == "rms":
        return RMSNorm(dim, eps, dtype=dtype)
    raise ValueError(f"norm must be 'layer' or 'rms', got {kind!r}")


def residual(kept: np.ndarray, branch: np.ndarray) -> np.ndarray:
    """kept + branch, both (B, T, C), added into ``branch``'s array when it is a new one of the
    same shape and dtype: each sub-layer returns an array it keeps no hold on, so this saves
    one (B, T, C) array and a pass over memory. Addition commutes bit for bit."""
    if branch is kept or branch.shape != kept.shape or branch.dtype != kept.dtype:
        return kept + branch
    branch += kept
    return branch


class BlockGrads(NamedTuple):
    """What a block's (and a stack's) backward returns, the same fields every time."""
    dx: np.ndarray                  # (B, T, C)
    dmemory: np.ndarray | None      # (B, S, C) with cross-attention, else None
    dattn_bias: np.ndarray | None   # gradient of the self-attention bias (T5's relative bias)
    dcross_bias: np.ndarray | None  # gradient of the cross-attention bias


class TransformerBlock(Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, rng: np.random.Generator, norm: str = "layer",
                 prenorm: bool = True, activation: str = "gelu_tanh", bias: bool = True, dropout: float = 0.0,
                 attn_dropout: float | None = None, cross_attention: bool = False, rope: bool = False,
                 eps: float = 1e-5, out_std: float | None = None, scale: float | None = None,
                 dtype=np.float32):
        super().__init__()
        check_positive_int("d_ff", d_ff)
        self.d_model, self.prenorm, self.has_cross = d_model, prenorm, cross_attention
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        sub = lambda: np.random.default_rng(rng.integers(2**63)) if dropout else None
        mha = dict(rng=rng, bias=bias, dropout=attn_dropout, out_std=out_std, scale=scale, dtype=dtype)
        self.ln_1 = make_norm(norm, d_model, eps, dtype)
        self.attn = MultiHeadAttention(d_model, n_heads, rope=rope, **mha)
        self.drop_1 = Dropout(dropout, rng=sub())
        if cross_attention:
            self.ln_cross = make_norm(norm, d_model, eps, dtype)
            self.cross_attn = MultiHeadAttention(d_model, n_heads, cross=True, **mha)
            self.drop_cross = Dropout(dropout, rng=sub())
        self.ln_2 = make_norm(norm, d_model, eps, dtype)
        self.mlp = FeedForward(d_model, d_ff, rng=rng, activation=activation, bias=bias, dropout=dropout,
                               out_std=out_std, dtype=dtype)        # its dropout is the residual one
        self._cached = False

    def forward(self, x: np.ndarray, memory: np.ndarray | None = None, *, mask: np.ndarray | None = None,
                causal: bool = False, attn_bias: np.ndarray | None = None, positions: np.ndarray | None = None,
                memory_mask: np.ndarray | None = None, cross_bias: np.ndarray | None = None,
                cache=None) -> np.ndarray:
        """x (B, T, C) [, memory (B, S, C)] -> y (B, T, C).

        mask / causal / attn_bias / positions go to self-attention; memory_mask and
        cross_bias to cross-attention; cache is this layer's ``LayerCache`` (inference)."""
        if memory is not None and not self.has_cross:
            raise ValueError("this block has no cross-attention; build it with cross_attention=True to pass memory")
        self._cached = cache is not None

        def attn(h):                                                     # (B, T, C) -> (B, T, C)
            return self.drop_1(self.attn(h, mask=mask, causal=causal, bias=attn_bias, positions=positions,
                                         cache=cache))

        def cross(h):                                                    # (B, T, C) -> (B, T, C)
            return self.drop_cross(self.cross_attn(h, memory, mask=memory_mask, bias=cross_bias, cache=cache))

        if self.prenorm:
            h = residual(x, attn(self.ln_1(x)))                          # (B, T, C)
            if self.has_cross:
                h = residual(h, cross(self.ln_cross(h)))
            return residual(h, self._ffn(self.ln_2(h)))
        h = self.ln_1(residual(x, attn(x)))                              # (B, T, C)
        if self.has_cross:
            h = self.ln_cross(residual(h, cross(h)))
        return self.ln_2(residual(h, self._ffn(h)))

    def _ffn(self, h: np.ndarray) -> np.ndarray:
        """The MLP on 2-D rows (B*T, C): one GEMM per projection, not B batched ones."""
        return self.mlp(h.reshape(-1, h.shape[-1])).reshape(h.shape)

    def _ffn_backward(self, dy: np.ndarray) -> np.ndarray:
        return self.mlp.backward(dy.reshape(-1, dy.shape[-1])).reshape(dy.shape)

    def backward(self, dy: np.ndarray) -> "BlockGrads":
        """dy (B, T, C) -> BlockGrads(dx (B, T, C), dmemory (B, S, C) or None,
        dattn_bias, dcross_bias (each the bias's shape, or None))."""
        if self._cached:
            raise RuntimeError("TransformerBlock.backward after a KV-cached forward: the cache is for "
                               "inference only; run forward without a cache to train")
        cross = None
        if self.prenorm:
            dh = residual(dy, self.ln_2.backward(self._ffn_backward(dy)))  # y = h + FFN(LN_2(h))
            if self.has_cross:                                           # h' = h + Cross(LN_c(h))
                cross = self.cross_attn.backward(self.drop_cross.backward(dh))
                dh = residual(dh, self.ln_cross.backward(cross.dx))
            att = self.attn.backward(self.drop_1.backward(dh))
            dx = residual(dh, self.ln_1.backward(att.dx))
        else:
            dz = self.ln_2.backward(dy)                                  # y = LN_2(z), z = h + FFN(h)
            dh = residual(dz, self._ffn_backward(dz))
            if self.has_cross:                                           # h' = LN_c(h + Cross(h))
                dz = self.ln_cross.backward(dh)
                cross = self.cross_attn.backward(self.drop_cross.backward(dz))
                dh = residual(dz, cross.dx)
            dz = self.ln_1.backward(dh)                                  # h = LN_1(x + Attn(x))
            att = self.attn.backward(self.drop_1.backward(dz))
            dx = residual(dz, att.dx)
        if cross is None:
            return BlockGrads(dx, None, att.dbias, None)
        return BlockGrads(dx, cross.dmemory, att.dbias, cross.dbias)
