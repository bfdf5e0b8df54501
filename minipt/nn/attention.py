"""Multi-head attention (Vaswani et al. 2017), self or cross, over ``ops.attention``.

Self-attention projects x once into q, k, v with a fused ``c_attn`` (C -> 3C; q, k, v in
that order, head h in columns h*D:(h+1)*D of each third, as Hugging Face GPT-2 lays it
out); cross-attention projects queries with ``q_proj`` and the encoder memory with
``kv_proj`` (C -> 2C). Heads are concatenated and mixed by ``c_proj``. Optional rotary
positions (RoPE, Su et al. 2021) rotate q and k; an optional KV cache serves decoding.
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_last_dim
from ..core.module import Module
from ..ops.attention import attention_backward, attention_forward
from ..ops.positions import rope_backward, rope_forward
from .kv_cache import LayerCache
from .linear import Linear


class MultiHeadAttention(Module):
    def __init__(self, d_model: int, n_heads: int, *, rng: np.random.Generator, bias: bool = True,
                 dropout: float = 0.0, cross: bool = False, rope: bool = False, std: float = 0.02,
                 out_std: float | None = None, dtype=np.float32):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.cross, self.rope, self.dropout = cross, rope, dropout
        if cross:
            self.q_proj = Linear(d_model, d_model, bias=bias, rng=rng, std=std, dtype=dtype)
            self.kv_proj = Linear(d_model, 2 * d_model, bias=bias, rng=rng, std=std, dtype=dtype)
        else:
            self.c_attn = Linear(d_model, 3 * d_model, bias=bias, rng=rng, std=std, dtype=dtype)
        self.c_proj = Linear(d_model, d_model, bias=bias, rng=rng, std=std if out_std is None else out_std,
                             dtype=dtype)
        self.rng = np.random.default_rng(rng.integers(2**63)) if dropout else None
        self.last_weights = None       # (B, H, T, S) when forward(return_weights=True)
        self.dbias = None              # gradient of an additive bias, after backward
        self._cache = None

    def _heads(self, t: np.ndarray, n: int) -> np.ndarray:
        """(B, T, n*C) -> n arrays stacked (n, B, H, T, D)."""
        B, T, _ = t.shape
        return t.reshape(B, T, n, self.n_heads, self.head_dim).transpose(2, 0, 3, 1, 4)

    def forward(self, x: np.ndarray, memory: np.ndarray | None = None, *, mask=None, causal: bool = False,
                bias: np.ndarray | None = None, positions: np.ndarray | None = None,
                cache: LayerCache | None = None, return_weights: bool = False) -> np.ndarray:
        """x (B, T, C) [, memory (B, S, C)] -> (B, T, C)."""
        check_last_dim("x", x, self.d_model)
        B, T, C = x.shape
        if self.cross:
            if memory is None and (cache is None or cache.cross_k is None):
                raise ValueError("cross-attention needs the encoder memory (B, S, C)")
            q = self._heads(self.q_proj(x), 1)[0]                           # (B, H, T, D)
            if cache is not None and cache.cross_k is not None:
                k, v = cache.cross_k, cache.cross_v
            else:
                check_last_dim("memory", memory, self.d_model)
                k, v = self._heads(self.kv_proj(memory), 2)                 # (B, H, S, D) each
                if cache is not None:
                    cache.cross_k, cache.cross_v = k, v
        else:
            q, k, v = self._heads(self.c_attn(x), 3)                        # (B, H, T, D) each
        rope_caches = None
        if self.rope:
            if positions is None:
                raise ValueError("rotary attention needs positions (T,)")
            q, rq = rope_forward(q, positions)
            k, rk = rope_forward(k, positions)
            rope_caches = (rq, rk)
        if cache is not None and not self.cross:
            k, v = cache.append(k, v)                                       # (B, H, S, D)
        out, acache = attention_forward(q, k, v, mask, causal=causal, bias=bias, dropout_p=self.dropout,
                                        rng=self.rng, training=self.training)
        self.last_weights = acache["p"] if return_weights else None
        y = out.transpose(0, 2, 1, 3).reshape(B, T, C)                      # heads concatenated
        self._cache = (acache, rope_caches, cache is not None)
        return self.c_proj(y)

    def backward(self, dy: np.ndarray):
        """dy (B, T, C) -> dx (B, T, C), or (dx, dmemory) for cross-attention."""
        acache, rope_caches, cached = self._cache
        if cached:
            raise RuntimeError("backward after a KV-cached forward: the cache is for inference only")
        B, T, C = dy.shape
        dout = self.c_proj.backward(dy).reshape(B, T, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)
        dq, dk, dv, self.dbias = attention_backward(dout, acache)          # (B, H, T|S, D)
        if rope_caches is not None:
            dq, dk = rope_backward(dq, rope_caches[0]), rope_backward(dk, rope_caches[1])
        merge = lambda *ts: np.stack(ts).transpose(1, 3, 0, 2, 4).reshape(B, ts[0].shape[2], -1)
        if self.cross:
            dx = self.q_proj.backward(merge(dq))
            return dx, self.kv_proj.backward(merge(dk, dv))
        return self.c_attn.backward(merge(dq, dk, dv))                      # (B, T, 3C) -> (B, T, C)
