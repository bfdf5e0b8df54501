"""XLNet: permutation language modelling with two-stream self-attention (Yang, Dai, Yang,
Carbonell, Salakhutdinov & Le 2019, "XLNet: Generalized Autoregressive Pretraining for
Language Understanding").

- **Factorisation orders** (Sec. 2.2): for a sampled permutation z of 0..T-1,
  log p(x) = sum_t log p(x_{z_t} | x_{z_<t}). Tokens keep their positions; only the
  attention masks follow z: with rank[i] the place of position i in z, the content stream
  of i sees j when rank[j] <= rank[i], the query stream when rank[j] < rank[i]
  (``objectives.permutation.order_masks``).
- **Two streams** (Sec. 2.3): the content stream h starts from the token embeddings and
  sees its own token; the query stream g starts from one learned vector w (``mask_emb``)
  at every position and sees the content of earlier tokens in z and, through the
  relative encodings, its own position, never its own token. Both streams share every
  weight; keys and values always come from the content stream. The output layer reads g.
- **Partial prediction** (Sec. 2.3): only the last 1/K of z is predicted; the batch's
  ``targets`` say which positions (``objectives.permutation.permutation_lm``), the rest
  are IGNORE.
- **Relative positions** (Sec. 2.5, from Transformer-XL): ``ops.relative_attention``:
  sinusoids of i - j projected by W_r, the learned biases r_w_bias (content) and r_r_bias
  (position), the relative shift; XLNet's relative segment term (r_s_bias, seg_embed)
  when ``token_type_ids`` are given.
- Post-LN blocks: h <- LN(h + Attn(h)), h <- LN(h + W_2 GELU(W_1 h)); output layer tied
  to the token embedding, with a bias (transformers' ``lm_loss``).

Not covered: segment recurrence and memory (Transformer-XL's cache of the previous
segment; every sequence here is read on its own, ``mem_len`` None), ``bi_data``,
``clamp_len``, "uni" attention, dropout. Segments: ``token_type_ids`` None (one segment,
no segment term) or any ids (B, T), compared pairwise: same id -> seg_embed[0], different
-> seg_embed[1], as XLNet. A predicted token first in its order sees nothing; minipt gives
that empty row a zero attention output (transformers' -1e30 masking would spread it
uniformly over every token, its own included), so such a token is predicted from w alone.
With ``order`` None the order is left to right: the query stream at t predicts x_t from
x_<t, a causal LM over the same positions (what ``log_prob`` scores).

Parameters (V vocab, C d_model, H heads, D = C / H, F d_inner, layer i):

| name | shape | transformers (``transformer.`` +) |
|---|---|---|
| word_embedding.weight | (V, C) | word_embedding.weight; also lm_loss.weight (tied) |
| mask_emb | (1, 1, C) | mask_emb: the query stream's w |
| layer.i.rel_attn.q, k, v, o, r | (C, H, D) | the same (x W as einsum "ibh,hnd") |
| layer.i.rel_attn.r_w_bias, r_r_bias, r_s_bias | (H, D) | the same |
| layer.i.rel_attn.seg_embed | (2, H, D) | the same |
| layer.i.rel_attn.layer_norm.weight, .bias | (C,) | the same |
| layer.i.ff.layer_1.weight, .bias | (F, C), (F,) | the same |
| layer.i.ff.layer_2.weight, .bias | (C, F), (C,) | the same |
| layer.i.ff.layer_norm.weight, .bias | (C,) | the same |
| lm_loss.bias | (V,) | lm_loss.bias (no prefix) |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...core import init
from ...core.checks import check_ids, check_ndim
from ...core.module import Module
from ...nn.embedding import Embedding
from ...nn.linear import Linear
from ...nn.norms import LayerNorm
from ...objectives.permutation import order_masks
from ...ops import activations
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.linear import linear_backward, linear_forward
from ...ops.norms import layer_norm_backward, layer_norm_forward
from ...ops.relative_attention import (
    relative_attention_backward,
    relative_attention_forward,
    relative_sinusoid,
)
from ..protocol import IGNORE, log_prob_from_loss
from ..registry import GradcheckCase, ModelEntry, register

ACTIVATIONS = {"gelu": (activations.gelu_forward, activations.gelu_backward),        # exact, transformers' "gelu"
               "gelu_tanh": (activations.gelu_tanh_forward, activations.gelu_tanh_backward)}   # "gelu_new"


@dataclass
class XLNetConfig:
    vocab_size: int = 65
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    d_inner: int | None = None           # default 4 * d_model
    activation: str = "gelu"             # "gelu" (exact, as XLNet) | "gelu_tanh"
    tie_embeddings: bool = True
    eps: float = 1e-12                   # transformers' XLNet layer_norm_eps

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layer", "n_head", "d_model"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.d_model % self.n_head or self.d_model % 2:
            raise ValueError(f"d_model {self.d_model} must be even and divisible by n_head {self.n_head}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if self.d_inner is None:
            self.d_inner = 4 * self.d_model


class Params(Module):
    """A holder of named parameters (the ops below are called on them directly, twice
    per layer: once for each stream)."""

    def __init__(self, rng: np.random.Generator, shapes: dict, std: float, dtype) -> None:
        super().__init__()
        for name, shape in shapes.items():
            self.add_param(name, init.normal(rng, shape, std, dtype))


def _project(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x (..., C) @ w (C, H, D) -> (..., H, D)."""
    C, H, D = w.shape
    return (x.reshape(-1, C) @ w.reshape(C, H * D)).reshape(*x.shape[:-1], H, D)


def _unproject(dy: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Backward of ``_project``: dy (..., H, D) -> dx (..., C), dw (C, H, D)."""
    C, H, D = w.shape
    dy2 = dy.reshape(-1, H * D)                                        # (N, H*D)
    dx = (dy2 @ w.reshape(C, H * D).T).reshape(x.shape)                # (..., C)
    return dx, (x.reshape(-1, C).T @ dy2).reshape(C, H, D)


class XLNetLayer(Module):
    """One post-LN block applied to both streams: (h, g) -> (h', g'), keys and values from h."""

    def __init__(self, c: XLNetConfig, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        H, D = c.n_head, c.d_model // c.n_head
        shapes = {**{w: (c.d_model, H, D) for w in "qkvor"},
                  "r_r_bias": (H, D), "r_s_bias": (H, D), "r_w_bias": (H, D), "seg_embed": (2, H, D)}
        self.rel_attn = Params(rng, shapes, 0.02, dtype)
        self.rel_attn.layer_norm = LayerNorm(c.d_model, c.eps, dtype=dtype)
        self.ff = Module()
        self.ff.layer_norm = LayerNorm(c.d_model, c.eps, dtype=dtype)
        self.ff.layer_1 = Linear(c.d_model, c.d_inner, rng=rng, dtype=dtype)
        self.ff.layer_2 = Linear(c.d_inner, c.d_model, rng=rng, dtype=dtype)
        self.act = ACTIVATIONS[c.activation]
        self.eps = c.eps
        self._cache = None

    def _stream(self, x, kh, vh, kr, mask, seg):
        """One stream's half of the block: x (B,T,C) queries -> y (B,T,C), cache."""
        p, f = self.rel_attn.params, self.ff
        ln_a, ln_f = self.rel_attn.layer_norm.params, f.layer_norm.params
        B, T, C = x.shape
        segment = (p["r_s_bias"], p["seg_embed"]) if seg is not None else (None, None)
        av, ca = relative_attention_forward(_project(x, p["q"]), kh, vh, kr, p["r_w_bias"], p["r_r_bias"],
                                            mask, seg, *segment)       # (B, T, H, D)
        ao = av.reshape(B, T, -1) @ p["o"].reshape(C, -1).T            # (B, T, C): "ibnd,hnd->ibh"
        y, cn = layer_norm_forward(ao + x, ln_a["weight"], ln_a["bias"], self.eps)    # post-LN
        z1, c1 = linear_forward(y, f.layer_1.params["weight"], f.layer_1.params["bias"])   # (B, T, F)
        a, cg = self.act[0](z1)
        z2, c2 = linear_forward(a, f.layer_2.params["weight"], f.layer_2.params["bias"])   # (B, T, C)
        out, cf = layer_norm_forward(z2 + y, ln_f["weight"], ln_f["bias"], self.eps)
        return out, (x, ca, av, cn, c1, cg, c2, cf)

    def _stream_backward(self, dout, cache):
        """dout (B,T,C) -> dx (B,T,C) through the query path, dk, dv (B,T,H,D), dkr (R,H,D)."""
        x, ca, av, cn, c1, cg, c2, cf = cache
        p, gp, f = self.rel_attn.params, self.rel_attn.grads, self.ff
        B, T, C = x.shape
        dsum, dgf, dbf = layer_norm_backward(dout, cf)                 # d(z2 + y)
        f.layer_norm.grads["weight"] += dgf
        f.layer_norm.grads["bias"] += dbf
        da, dw2, db2 = linear_backward(dsum, c2)
        f.layer_2.grads["weight"] += dw2
        f.layer_2.grads["bias"] += db2
        dy, dw1, db1 = linear_backward(self.act[1](da, cg), c1)
        f.layer_1.grads["weight"] += dw1
        f.layer_1.grads["bias"] += db1
        dres, dga, dba = layer_norm_backward(dy + dsum, cn)            # d(ao + x)
        self.rel_attn.layer_norm.grads["weight"] += dga
        self.rel_attn.layer_norm.grads["bias"] += dba
        gp["o"] += (dres.reshape(-1, C).T @ av.reshape(-1, av.shape[2] * av.shape[3])).reshape(p["o"].shape)
        dav = (dres @ p["o"].reshape(C, -1)).reshape(av.shape)        # (B, T, H, D)
        dq, dk, dv, dkr, drw, drr, drs, dse = relative_attention_backward(dav, ca)
        gp["r_w_bias"] += drw
        gp["r_r_bias"] += drr
        if drs is not None:
            gp["r_s_bias"] += drs
            gp["seg_embed"] += dse
        dx, dwq = _unproject(dq, x, p["q"])
        gp["q"] += dwq
        return dx + dres, dk, dv, dkr

    def forward(self, h, g, r, mask_h, mask_g, seg=None):
        """h, g (B,T,C), r (R,C) encodings, mask_h, mask_g (B,T,T) may-attend, seg (B,T,T) or None -> h', g'."""
        p = self.rel_attn.params
        kh, vh, kr = _project(h, p["k"]), _project(h, p["v"]), _project(r, p["r"])   # (B,T,H,D), (R,H,D)
        h_out, ch = self._stream(h, kh, vh, kr, mask_h, seg)           # content stream: sees itself
        g_out, cg = self._stream(g, kh, vh, kr, mask_g, seg)           # query stream: never itself
        self._cache = (h, r, ch, cg)
        return h_out, g_out

    def backward(self, dh_out, dg_out):
        """dh', dg' (B,T,C) -> dh, dg (B,T,C), dr (R,C)."""
        h, r, ch, cg = self._cache
        p, gp = self.rel_attn.params, self.rel_attn.grads
        dh, dk, dv, dkr = self._stream_backward(dh_out, ch)
        dg, dk2, dv2, dkr2 = self._stream_backward(dg_out, cg)
        for name, d in (("k", dk + dk2), ("v", dv + dv2)):
            dxh, dw = _unproject(d, h, p[name])
            dh = dh + dxh
            gp[name] += dw
        dr, dwr = _unproject(dkr + dkr2, r, p["r"])
        gp["r"] += dwr
        return dh, dg, dr


def check_order(order, B: int, T: int) -> np.ndarray:
    """``order`` (T,) or (B, T), each row a permutation of 0..T-1 -> (B, T) int64."""
    order = np.asarray(order)
    if not np.issubdtype(order.dtype, np.integer):
        raise TypeError(f"order: expected integer positions, got dtype {order.dtype}")
    if order.shape not in ((T,), (B, T)):
        raise ValueError(f"order: expected shape (T,) = ({T},) or (B, T) = ({B}, {T}), got {order.shape}")
    order = np.broadcast_to(order, (B, T)).astype(np.int64)
    bad = np.nonzero((np.sort(order, axis=1) != np.arange(T)).any(axis=1))[0]
    if bad.size:
        raise ValueError(f"order: row {bad[0]} is not a permutation of 0..{T - 1}: got {order[bad[0]].tolist()}")
    return order


class XLNet(Module):
    has_backward = True
    block_size = None                     # relative positions: no fixed context length

    def __init__(self, config: XLNetConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "xlnet"):
        super().__init__()
        self.name, self.config = name, config
        c = config
        self.word_embedding = Embedding(c.vocab_size, c.d_model, rng=rng, std=0.02, dtype=dtype)
        self.add_param("mask_emb", init.normal(rng, (1, 1, c.d_model), 0.02, dtype))   # w of the query stream
        self.layer = [XLNetLayer(c, rng=rng, dtype=dtype) for _ in range(c.n_layer)]
        self.lm_loss = Module()
        self.lm_loss.add_param("bias", init.zeros(c.vocab_size, dtype))
        if c.tie_embeddings:
            self.lm_loss.tie("weight", self.word_embedding, "weight")
        else:
            self.lm_loss.add_param("weight", init.normal(rng, (c.vocab_size, c.d_model), 0.02, dtype))
        self._cache = None

    def new_cache(self) -> None:
        return None                       # no memory: decoding re-reads the window

    def spec(self) -> dict:
        return {"model": self.name, **asdict(self.config)}

    def masks(self, order, B: int, T: int):
        """content, query may-attend masks (B, T, T) for ``order`` (None: left to right)."""
        order = np.broadcast_to(np.arange(T), (B, T)) if order is None else check_order(order, B, T)
        return order_masks(order)

    def forward(self, idx, targets=None, order=None, token_type_ids=None):
        """idx (B, T) [, targets (B, T), order (T,) or (B, T), token_type_ids (B, T)] ->
        loss (or None), logits (B, T, V) of the query stream."""
        check_ndim("idx", idx, 2)
        check_ids("idx", idx, self.config.vocab_size)
        return self.forward_embeddings(self.word_embedding(idx), targets, order, token_type_ids)

    def forward_embeddings(self, x, targets=None, order=None, token_type_ids=None):
        """The same from token embeddings x (B, T, C) (for checks of the input gradient)."""
        B, T, C = x.shape
        mask_h, mask_g = self.masks(order, B, T)                       # (B, T, T) each
        seg = None
        if token_type_ids is not None:
            tt = np.asarray(token_type_ids)
            if tt.shape != (B, T) or not np.issubdtype(tt.dtype, np.integer):
                raise ValueError(f"token_type_ids: expected integer ids of shape ({B}, {T}), got {tt.dtype} {tt.shape}")
            seg = tt[:, :, None] != tt[:, None, :]                     # (B, T, T): different segments
        r = relative_sinusoid(T, T, C, x.dtype)                        # (2T, C): distances T .. -T+1
        h = x
        g = np.broadcast_to(self.params["mask_emb"], x.shape).copy()   # (B, T, C): w at every position
        for layer in self.layer:
            h, g = layer(h, g, r, mask_h, mask_g, seg)
        logits, lin = linear_forward(g, self.lm_loss.params["weight"], self.lm_loss.params["bias"])   # (B, T, V)
        loss = ce = None
        if targets is not None:
            if np.shape(targets) != (B, T):
                raise ValueError(f"targets: expected shape ({B}, {T}), got {np.shape(targets)}")
            loss, ce = cross_entropy_forward(logits, np.asarray(targets))
        self._cache = (lin, ce, x.shape)
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        self.word_embedding.backward(self.backward_embeddings(dloss))

    def backward_embeddings(self, dloss: float = 1.0) -> np.ndarray:
        """Back-propagate into every parameter but the embedding lookup; returns dx (B, T, C)."""
        lin, ce, shape = self._cache
        if ce is None:
            raise RuntimeError("backward needs a forward with targets")
        dg, dw, db = linear_backward(cross_entropy_backward(dloss, ce), lin)     # (B, T, C)
        self.lm_loss.grads["weight"] += dw                             # tied: into word_embedding's gradient
        self.lm_loss.grads["bias"] += db
        dh = np.zeros(shape, dtype=dg.dtype)                           # the content stream's top is not read
        for layer in reversed(self.layer):
            dh, dg, _ = layer.backward(dh, dg)                         # the sinusoids have no parameters
        self.grads["mask_emb"] += dg.sum(axis=(0, 1))[None, None]
        return dh

    def log_prob(self, idx: np.ndarray, targets: np.ndarray) -> float:
        """Total log-probability (nats) of ``targets`` in the left-to-right order, in eval mode."""
        return log_prob_from_loss(self, idx, targets)


# -- registry entry -----------------------------------------------------------------
TINY = dict(vocab_size=7, n_layer=2, n_head=2, d_model=8, d_inner=12)


def tiny_model(seed: int = 0, **kw) -> XLNet:
    """A float64 model with N(0, 0.5^2) noise on every weight: with smaller weights the
    gradient of W_r is so small that round-off in the difference quotient dominates it."""
    from ..decoder.gpt import perturbed
    model = XLNet(XLNetConfig(**{**TINY, **kw}), rng=np.random.default_rng(seed), dtype=np.float64)
    return perturbed(model, scale=0.5, seed=seed + 1)


def tiny():
    """A float64 model and (idx, targets): left to right, the first two positions not predicted."""
    idx = np.array([[1, 2, 3, 4, 5, 6], [6, 0, 1, 1, 2, 5]])
    targets = np.where(np.arange(6) >= 2, idx, IGNORE)
    return tiny_model(), (idx, targets)


class EmbeddingsProbe(Module):
    """Wraps a model so ``check_module`` sees token embeddings as its float input."""

    def __init__(self, model: XLNet):
        super().__init__()
        self.model = model

    def forward(self, x, targets, order, token_type_ids):
        return self.model.forward_embeddings(x, targets, order, token_type_ids)[0]

    def backward(self, dloss):
        return self.model.backward_embeddings(dloss)


def _check_permuted():
    from ...core.gradcheck import check_module
    model, (idx, _) = tiny_model(seed=1), tiny()[1]
    order = np.array([[3, 0, 5, 1, 4, 2], [5, 4, 3, 2, 1, 0]])
    targets = np.where(np.isin(np.arange(6), [4, 2]), idx, IGNORE)     # the last two of row 0's order
    targets[1] = np.where(np.arange(6) <= 2, idx[1], IGNORE)          # the last three of row 1's
    x = model.word_embedding.params["weight"][idx].copy()
    return check_module(EmbeddingsProbe(model), x, targets, order, np.array([[0, 0, 0, 1, 1, 1]] * 2),
                        max_checks=12)


def _check_relative_attention():
    """The op alone: both streams' masks' kind (one empty row), two segments, every input."""
    from ...core.gradcheck import check_op
    r = np.random.default_rng(0)
    shapes = dict(q=(2, 4, 2, 3), k=(2, 4, 2, 3), v=(2, 4, 2, 3), kr=(8, 2, 3), r_w_bias=(2, 3), r_r_bias=(2, 3),
                  r_s_bias=(2, 3), seg_embed=(2, 2, 3))
    inputs = {n: r.standard_normal(s) for n, s in shapes.items()}
    _, query = order_masks(np.array([[2, 0, 3, 1], [3, 2, 1, 0]]))
    seg = r.random((2, 4, 4)) < 0.5
    fwd = lambda q, k, v, kr, rw, rr, rs, se: relative_attention_forward(q, k, v, kr, rw, rr, query, seg, rs, se)
    return check_op(fwd, relative_attention_backward, inputs, params=tuple(shapes)[4:])


register(ModelEntry(
    name="xlnet", title="XLNet", paper="Yang et al. 2019, XLNet: Generalized Autoregressive Pretraining for "
    "Language Understanding", objective="permutation LM (two-stream attention, last 1/K of the order)",
    build=lambda *, rng, dtype=np.float32, **kw: XLNet(XLNetConfig(**kw), rng=rng, dtype=dtype),
    tiny=tiny, lesson="22_xlnet", presets="minipt.recipes.xlnet.PRESETS", recipe="minipt.recipes.xlnet.train_xlnet",
    gradchecks=(GradcheckCase("XLNet from embeddings", "sampled orders, two segments, input + params",
                              _check_permuted),
                GradcheckCase("relative attention (Transformer-XL shift)", "B2 T4 H2 D3, query mask, two segments",
                              _check_relative_attention))))
