"""Multi-head attention (Vaswani et al. 2017, "Attention Is All You Need", Sec. 3.2.2).

    head_h = Attention(X W_q^h, M W_k^h, M W_v^h),  MHA(X, M) = Concat(head_1..head_H) W_o

with M = X for self-attention. Self-attention projects x once into q, k, v with a fused
``c_attn`` (C -> 3C; q, k, v in that order, head h in columns h*D:(h+1)*D of each third,
as Hugging Face GPT-2 lays out ``attn.c_attn``). Cross-attention (the decoder of an
encoder-decoder) projects queries with ``q_proj`` and the encoder memory with ``kv_proj``
(C -> 2C, k then v). ``c_proj`` (W_o) mixes the concatenated heads.

Options: rotary positions (RoPE, Su et al. 2021) rotate q and k by their positions; an
additive bias (H, T, S) (T5's relative positions) enters the scores and its gradient is
kept on ``dbias``; attention dropout on the weights (nowhere else: residual dropout is
the block's); ``scale`` for the scores (default 1/sqrt(D); T5 uses 1, its init absorbs
it); a ``LayerCache`` slot for incremental decoding (inference only).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core.checks import check_float, check_last_dim, check_ndim, check_positive_int
from ..core.module import Module
from ..ops.attention import attention_backward, attention_forward
from ..ops.positions import rope_backward, rope_forward
from .kv_cache import LayerCache
from .linear import Linear


class AttentionGrads(NamedTuple):
    """What ``MultiHeadAttention.backward`` returns, the same fields every time."""
    dx: np.ndarray                  # (B, T, C) queries' input
    dmemory: np.ndarray | None      # (B, S, C) cross-attention's memory, else None
    dbias: np.ndarray | None        # the additive bias's shape, or None without one


class MultiHeadAttention(Module):
    def __init__(self, d_model: int, n_heads: int, *, rng: np.random.Generator, bias: bool = True,
                 dropout: float = 0.0, cross: bool = False, rope: bool = False, std: float = 0.02,
                 out_std: float | None = None, scale: float | None = None, dtype=np.float32):
        super().__init__()
        check_positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"attention dropout must be in [0, 1), got {dropout}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        if rope and self.head_dim % 2:
            raise ValueError(f"rotary positions need an even head size, got d_model {d_model} / "
                             f"n_heads {n_heads} = {self.head_dim}")
        if rope and cross:
            raise ValueError("rotary positions apply to self-attention only (cross=True was given with rope=True)")
        self.cross, self.rope, self.dropout, self.scale = cross, rope, dropout, scale
        if cross:
            self.q_proj = Linear(d_model, d_model, bias=bias, rng=rng, std=std, dtype=dtype)
            self.kv_proj = Linear(d_model, 2 * d_model, bias=bias, rng=rng, std=std, dtype=dtype)
        else:
            self.c_attn = Linear(d_model, 3 * d_model, bias=bias, rng=rng, std=std, dtype=dtype)
        self.c_proj = Linear(d_model, d_model, bias=bias, rng=rng, std=std if out_std is None else out_std,
                             dtype=dtype)
        self.rng = np.random.default_rng(rng.integers(2**63)) if dropout else None
        self.last_weights: np.ndarray | None = None   # (B, H, T, S) after forward(return_weights=True)
        self.record = False                           # True: keep last_weights on every forward (to draw
                                                      # the attention inside a whole model)
        self.dbias: np.ndarray | None = None          # gradient of the additive bias, after backward
        self._cache = None

    # -- head layout ----------------------------------------------------------------
    def _split(self, t: np.ndarray, n: int) -> np.ndarray:
        """(B, T, n*C) -> (n, B, H, T, D), a strided view (no copy)."""
        B, T, _ = t.shape
        return t.reshape(B, T, n, self.n_heads, self.head_dim).transpose(2, 0, 3, 1, 4)

    def _check_input(self, x: np.ndarray, memory: np.ndarray | None) -> None:
        check_float("x", x)
        check_ndim("x", x, 3)
        check_last_dim("x", x, self.d_model)
        if memory is not None:
            check_float("memory", memory)
            check_ndim("memory", memory, 3)
            check_last_dim("memory", memory, self.d_model)
            if memory.shape[0] != x.shape[0]:
                raise ValueError(f"memory: expected batch {x.shape[0]} (as x), got shape {memory.shape}")

    # -- forward / backward ---------------------------------------------------------
    def forward(self, x: np.ndarray, memory: np.ndarray | None = None, *, mask: np.ndarray | None = None,
                causal: bool = False, bias: np.ndarray | None = None, positions: np.ndarray | None = None,
                cache: LayerCache | None = None, return_weights: bool = False) -> np.ndarray:
        """x (B, T, C) [, memory (B, S, C) for cross-attention] -> y (B, T, C).

        mask: boolean may-attend (T, S), (B, T, S) or (B, 1, T, S); causal: left-to-right
        (offset by the cached length); bias: additive (H, T, S) or (B, H, T, S); positions (T,)
        ints for RoPE; cache: this layer's KV-cache slot (then no backward).
        """
        if not self.cross and memory is not None:
            raise ValueError("self-attention got a memory argument; build with cross=True for cross-attention")
        self._check_input(x, memory)
        B, T, C = x.shape
        # the projections see 2-D (B*T, C) rows: one GEMM instead of B batched ones
        if self.cross:
            q = self._split(self.q_proj(x.reshape(B * T, C)).reshape(B, T, C), 1)[0]   # (B, H, T, D)
            if cache is not None and cache.cross_k is not None:           # memory's k, v: computed once
                k, v = cache.cross_k, cache.cross_v                         # (B, H, S, D) each
            elif memory is None:
                raise ValueError("cross-attention needs the encoder memory (B, S, C)")
            else:
                S = memory.shape[1]
                kv = self.kv_proj(memory.reshape(B * S, C)).reshape(B, S, 2 * C)      # (B, S, 2C)
                k, v = self._split(kv, 2)                                   # (B, H, S, D) each
                if cache is not None:
                    cache.cross_k, cache.cross_v = k, v
        else:
            qkv = self.c_attn(x.reshape(B * T, C)).reshape(B, T, 3 * C)    # (B, T, 3C)
            q, k, v = self._split(qkv, 3)                                   # (B, H, T, D) each
        rope_caches = None
        if self.rope:
            if positions is None:
                raise ValueError("rotary attention needs positions (T,) of the queries")
            positions = np.asarray(positions)
            if positions.shape != (T,):
                raise ValueError(f"positions: expected shape ({T},), got {positions.shape}")
            q, rq = rope_forward(q, positions)                              # (B, H, T, D)
            k, rk = rope_forward(k, positions)
            rope_caches = (rq, rk)
        if cache is not None and not self.cross:
            k, v = cache.append(k, v)                                       # (B, H, S, D), S = past + T
        out, acache = attention_forward(q, k, v, mask, causal=causal, bias=bias, dropout_p=self.dropout,
                                        rng=self.rng, training=self.training,
                                        scale=self.scale)                      # (B, H, T, D)
        self.last_weights = acache["p"] if return_weights or self.record else None   # (B, H, T, S)
        self._cache = None if cache is not None else (acache, rope_caches, k.shape[2])
        y = out.transpose(0, 2, 1, 3).reshape(B * T, C)                       # heads concatenated
        return self.c_proj(y).reshape(B, T, C)                              # (B, T, C)

    def backward(self, dy: np.ndarray) -> "AttentionGrads":
        """dy (B, T, C) -> AttentionGrads(dx (B, T, C), dmemory (B, S, C) or None for
        self-attention, dbias (the bias's shape) or None without a bias)."""
        if self._cache is None:
            raise RuntimeError("MultiHeadAttention.backward needs a forward without a KV cache first "
                               "(the cache is for inference only)")
        acache, rope_caches, S = self._cache
        B, T, C = dy.shape
        H, D = self.n_heads, self.head_dim
        dout = self.c_proj.backward(dy.reshape(B * T, C)).reshape(B, T, H, D)        # (B, T, H, D)
        # the gradients go straight into the projections' row layout (the inverse of _split)
        if self.cross:
            dq_rows = np.empty((B, T, 1, H, D), dtype=dy.dtype)                       # -> q_proj
            dkv = np.empty((B, S, 2, H, D), dtype=dy.dtype)                           # -> kv_proj: k | v
            slots = (self._split(dq_rows.reshape(B, T, C), 1)[0], *self._split(dkv.reshape(B, S, 2 * C), 2))
        else:
            dqkv = np.empty((B, T, 3, H, D), dtype=dy.dtype)                          # -> c_attn: q | k | v
            slots = tuple(self._split(dqkv.reshape(B, T, 3 * C), 3))                  # (B, H, T, D) views
        if rope_caches is None:
            dbias = attention_backward(dout.transpose(0, 2, 1, 3), acache, out=slots)[3]
        else:
            dq, dk, dv, dbias = attention_backward(dout.transpose(0, 2, 1, 3), acache)   # (B, H, T|S, D)
            slots[0][...] = rope_backward(dq, rope_caches[0])
            slots[1][...] = rope_backward(dk, rope_caches[1])
            slots[2][...] = dv
        if self.cross:
            dx = self.q_proj.backward(dq_rows.reshape(B * T, C)).reshape(B, T, C)    # (B, T, C)
            dmem = self.kv_proj.backward(dkv.reshape(B * S, 2 * C)).reshape(B, S, C)  # (B, S, C)
            return AttentionGrads(dx, dmem, dbias)
        dx = self.c_attn.backward(dqkv.reshape(B * T, 3 * C)).reshape(B, T, C)      # (B*T, 3C) -> (B, T, C)
        return AttentionGrads(dx, None, dbias)
