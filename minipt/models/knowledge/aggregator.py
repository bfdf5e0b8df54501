"""ERNIE's aggregator: one layer of the knowledgeable encoder (K-Encoder) that fuses
entity embeddings into token states (Zhang, Han, Liu, Jiang, Sun & Liu 2019, "ERNIE:
Enhanced Language Representation with Informative Entities", section 3.3).

Tokens w (B, T, C) and the mentioned entities e (B, M, K) each go through their own
multi-head self-attention (with residual and LayerNorm, as BERT's attention sub-layer):

    w~ = LN(w + MH-ATT(w)),       e~ = LN(e + MH-ATT(e))

then the information fusion layer mixes them where a token is aligned with an entity
(the first token of the entity's mention):

    h_j = GELU(W~_t w~_j + W~_e e~_k + b~)       (token j aligned with entity k)
    h_j = GELU(W~_t w~_j + b~)                    (tokens with no entity)
    w_j^o = LN(w~_j + W_t h_j + b_t),   e_k^o = LN(e~_k + W_e h_j + b_e)

(The paper writes w^o = GELU(W_t h + b_t); its released code adds the result to the
attention output and normalises, as written here.) An entity slot that is padding
attends to itself only, so a sentence with no entity is well defined: its tokens take
the second line of h, and the padded slots' outputs are never read.

| parameter | shape | what |
|---|---|---|
| token_attn.*, ln_token_attn.* | as MultiHeadAttention (C), LayerNorm (C) | MH-ATT over tokens |
| entity_attn.*, ln_entity_attn.* | as MultiHeadAttention (K), LayerNorm (K) | MH-ATT over entities |
| fuse_token.weight, .bias | (F, C), (F,) | W~_t, b~ |
| fuse_entity.weight | (F, K) | W~_e |
| out_token.weight, .bias | (C, F), (C,) | W_t, b_t |
| out_entity.weight, .bias | (K, F), (K,) | W_e, b_e |
| ln_token.*, ln_entity.* | (C,), (K,) | output LayerNorms |
"""
from __future__ import annotations

import numpy as np

from ...core.module import Module
from ...nn.activations import GELU
from ...nn.attention import MultiHeadAttention
from ...nn.linear import Linear
from ...nn.norms import LayerNorm


def entity_alignment(positions: np.ndarray, entity_mask: np.ndarray, T: int) -> np.ndarray:
    """positions (B, M) token index of each entity's mention, entity_mask (B, M) 1 real
    -> align (B, T): the entity slot aligned with each token, or -1."""
    positions, real = np.asarray(positions), np.asarray(entity_mask) > 0
    if positions.shape != real.shape or positions.ndim != 2:
        raise ValueError(f"entity positions {positions.shape} and mask {real.shape} must both be (B, M)")
    if real.any() and (positions[real].min() < 0 or positions[real].max() >= T):
        raise ValueError(f"entity mention positions must lie in [0, {T}), got {positions[real].tolist()}")
    align = np.full((positions.shape[0], T), -1, np.int64)                 # (B, T)
    b, m = np.nonzero(real)
    if len(np.unique(b * T + positions[b, m])) != len(b):
        raise ValueError("two entities are aligned with the same token")
    align[b, positions[b, m]] = m
    return align


class Aggregator(Module):
    def __init__(self, d_model: int, d_entity: int, n_heads: int, n_entity_heads: int, d_fusion: int, *,
                 rng: np.random.Generator, eps: float = 1e-12, dtype=np.float32):
        super().__init__()
        self.token_attn = MultiHeadAttention(d_model, n_heads, rng=rng, dtype=dtype)
        self.ln_token_attn = LayerNorm(d_model, eps, dtype=dtype)
        self.entity_attn = MultiHeadAttention(d_entity, n_entity_heads, rng=rng, dtype=dtype)
        self.ln_entity_attn = LayerNorm(d_entity, eps, dtype=dtype)
        self.fuse_token = Linear(d_model, d_fusion, rng=rng, dtype=dtype)
        self.fuse_entity = Linear(d_entity, d_fusion, bias=False, rng=rng, dtype=dtype)
        self.act = GELU()
        self.out_token = Linear(d_fusion, d_model, rng=rng, dtype=dtype)
        self.out_entity = Linear(d_fusion, d_entity, rng=rng, dtype=dtype)
        self.ln_token = LayerNorm(d_model, eps, dtype=dtype)
        self.ln_entity = LayerNorm(d_entity, eps, dtype=dtype)
        self._cache = None

    def forward(self, w: np.ndarray, e: np.ndarray, positions: np.ndarray, entity_mask: np.ndarray,
                token_mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """w (B, T, C), e (B, M, K), positions (B, M), entity_mask (B, M), token_mask (B, T)
        1 real 0 padding -> (w^o (B, T, C), e^o (B, M, K))."""
        B, T, C = w.shape
        M, K = e.shape[1], e.shape[2]
        if e.shape[0] != B:
            raise ValueError(f"tokens have batch {B} but entities {e.shape[0]}")
        align = entity_alignment(positions, entity_mask, T)                # (B, T)
        keys = None if token_mask is None else (np.asarray(token_mask) > 0)[:, None, :]          # (B, 1, T)
        real = np.asarray(entity_mask) > 0                                 # (B, M)
        ent_keys = real[:, None, :] | np.eye(M, dtype=bool)[None]          # (B, M, M) padding sees itself
        w_att = self.ln_token_attn(w + self.token_attn(w, mask=keys))      # (B, T, C)
        e_att = self.ln_entity_attn(e + self.entity_attn(e, mask=ent_keys))   # (B, M, K)
        has = align >= 0                                                   # (B, T)
        bi, ti = np.nonzero(has)
        e_al = np.zeros((B, T, K), w.dtype)                                # (B, T, K) aligned entity or 0
        e_al[bi, ti] = e_att[bi, align[bi, ti]]
        pre = self.fuse_token(w_att.reshape(B * T, C)) + self.fuse_entity(e_al.reshape(B * T, K))   # (B*T, F)
        h = self.act(pre)                                                  # (B*T, F)
        w_out = self.ln_token(w_att + self.out_token(h).reshape(B, T, C))  # (B, T, C)
        bm, mm = np.nonzero(real)
        h_ent = np.zeros((B, M, h.shape[1]), w.dtype)                      # (B, M, F) h at each mention
        h_ent[bm, mm] = h.reshape(B, T, -1)[bm, np.asarray(positions)[bm, mm]]
        e_out = self.ln_entity(e_att + self.out_entity(h_ent.reshape(B * M, -1)).reshape(B, M, K))   # (B, M, K)
        self._cache = (B, T, M, bi, ti, align, bm, mm, np.asarray(positions))
        return w_out, e_out

    def backward(self, dw_out: np.ndarray, de_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dw^o (B, T, C), de^o (B, M, K)) -> (dw (B, T, C), de (B, M, K))."""
        B, T, M, bi, ti, align, bm, mm, positions = self._cache
        C, K = dw_out.shape[2], de_out.shape[2]
        dw_att = self.ln_token.backward(dw_out)                            # (B, T, C)
        de_att = self.ln_entity.backward(de_out)                           # (B, M, K)
        dh_ent = self.out_entity.backward(de_att.reshape(B * M, K)).reshape(B, M, -1)   # (B, M, F)
        dh = self.out_token.backward(dw_att.reshape(B * T, C)).reshape(B, T, -1)        # (B, T, F)
        np.add.at(dh, (bm, positions[bm, mm]), dh_ent[bm, mm])
        dpre = self.act.backward(dh.reshape(B * T, -1))                    # (B*T, F)
        dw_att = dw_att + self.fuse_token.backward(dpre).reshape(B, T, C)
        de_al = self.fuse_entity.backward(dpre).reshape(B, T, K)           # (B, T, K)
        np.add.at(de_att, (bi, align[bi, ti]), de_al[bi, ti])
        dz = self.ln_token_attn.backward(dw_att)                           # (B, T, C)
        dw = dz + self.token_attn.backward(dz).dx
        dz = self.ln_entity_attn.backward(de_att)                          # (B, M, K)
        de = dz + self.entity_attn.backward(dz).dx
        return dw, de
