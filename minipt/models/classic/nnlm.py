"""Bengio's neural probabilistic language model (Bengio, Ducharme, Vincent & Jauvin 2003,
"A Neural Probabilistic Language Model", JMLR 3).

Each of the n-1 previous words is looked up in one shared table C (the first word
embeddings trained with a language model), the n-1 vectors are concatenated into x, and

    y = b + W x + U tanh(d + H x),        P(w_t | w_{t-n+1..t-1}) = softmax(y)_{w_t}

(eq. 1 of the paper). W x are the optional *direct* connections from the input to the
output (the paper's W = 0 when they are off). Everything is a foundation op: embedding
(gather / scatter-add), linear, tanh, cross-entropy fused with softmax; the backward
mirrors the forward line by line.

On a stream the model predicts every position: a window's first n-2 positions see
``pad_id`` for the words before the window (learnt as a token like any other). It reads
its last n-1 tokens of any stream, so ``block_size`` is None.

| parameter | shape | what |
|---|---|---|
| ``C`` | (V, m) | word feature vectors, shared by the n-1 positions |
| ``H`` | (h, (n-1) m) | hidden layer weights |
| ``d`` | (h,) | hidden biases |
| ``U`` | (V, h) | hidden-to-output weights |
| ``b`` | (V,) | output biases |
| ``W`` | (V, (n-1) m) | direct input-to-output connections (only with ``direct=True``) |
"""
from __future__ import annotations

import numpy as np

from ...core import init
from ...core.checks import check_ids, check_positive_int
from ...core.module import Module
from ...ops.activations import tanh_backward, tanh_forward
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.embedding import embedding_backward, embedding_forward
from ...ops.linear import linear_backward, linear_forward
from ..protocol import IGNORE, log_prob_from_loss
from ..registry import ModelEntry, Preset, register


class NNLM(Module):
    has_backward = True
    block_size = None

    def __init__(self, vocab_size: int, order: int = 4, dim: int = 32, hidden: int = 64, direct: bool = True,
                 pad_id: int = 0, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.V, self.n = check_positive_int("vocab_size", vocab_size), check_positive_int("order", order, 2)
        self.m, self.h = check_positive_int("dim", dim), check_positive_int("hidden", hidden)
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id: expected an id in [0, {vocab_size}), got {pad_id}")
        self.direct, self.pad_id = bool(direct), int(pad_id)
        fan = (self.n - 1) * self.m
        self.add_param("C", init.normal(rng, (self.V, self.m), 0.1, dtype))           # (V, m)
        self.add_param("H", init.uniform_fan_in(rng, (self.h, fan), dtype))          # (h, (n-1)m)
        self.add_param("d", init.zeros(self.h, dtype))                               # (h,)
        self.add_param("U", init.uniform_fan_in(rng, (self.V, self.h), dtype))       # (V, h)
        self.add_param("b", init.zeros(self.V, dtype))                               # (V,)
        if self.direct:
            self.add_param("W", init.zeros((self.V, fan), dtype))                    # (V, (n-1)m)
        self._cache = None

    def spec(self) -> dict:
        return {"model": "nnlm", "vocab_size": self.V, "order": self.n, "dim": self.m, "hidden": self.h,
                "direct": self.direct, "pad_id": self.pad_id}

    def contexts(self, idx: np.ndarray) -> np.ndarray:
        """idx (B, T) -> (B, T, n-1): the n-1 tokens ending at each position, pad_id before the start."""
        B = idx.shape[0]
        padded = np.concatenate([np.full((B, self.n - 2), self.pad_id, np.int64), idx.astype(np.int64)], 1)
        return np.lib.stride_tricks.sliding_window_view(padded, self.n - 1, axis=1)  # (B, T, n-1)

    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None):
        check_ids("idx", idx, self.V)
        if idx.ndim != 2:
            raise ValueError(f"idx: expected (B, T), got shape {idx.shape}")
        B, T = idx.shape
        p = self.params
        e, c_emb = embedding_forward(self.contexts(idx), p["C"])          # (B, T, n-1, m)
        x = e.reshape(B, T, -1)                                            # (B, T, (n-1)m)
        a, c_h = linear_forward(x, p["H"], p["d"])                         # d + Hx (B, T, h)
        z, c_tanh = tanh_forward(a)                                        # (B, T, h)
        logits, c_u = linear_forward(z, p["U"], p["b"])                    # b + U tanh(.) (B, T, V)
        c_w = None
        if self.direct:
            yw, c_w = linear_forward(x, p["W"], None)                      # W x (B, T, V)
            logits = logits + yw
        loss, c_ce = (None, None) if targets is None else cross_entropy_forward(logits, targets, IGNORE)
        self._cache = (c_emb, c_h, c_tanh, c_u, c_w, c_ce, e.shape)
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        c_emb, c_h, c_tanh, c_u, c_w, c_ce, e_shape = self._cache
        if c_ce is None:
            raise RuntimeError("backward needs a forward with targets (there is no loss to differentiate)")
        g = self.grads
        dlogits = cross_entropy_backward(dloss, c_ce)                      # (B, T, V)
        dx = 0.0
        if self.direct:
            dx, dW, _ = linear_backward(dlogits, c_w)                      # (B, T, (n-1)m)
            g["W"] += dW
        dz, dU, db = linear_backward(dlogits, c_u)                         # (B, T, h)
        g["U"] += dU
        g["b"] += db
        da = tanh_backward(dz, c_tanh)                                     # (B, T, h)
        dxh, dH, dd = linear_backward(da, c_h)                             # (B, T, (n-1)m)
        g["H"] += dH
        g["d"] += dd
        g["C"] += embedding_backward((dx + dxh).reshape(e_shape), c_emb)   # (V, m)

    def new_cache(self):
        return None

    def log_prob(self, idx: np.ndarray, targets: np.ndarray) -> float:
        return log_prob_from_loss(self, idx, targets)


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> NNLM:
    return NNLM(rng=rng, dtype=dtype, **settings)


def tiny() -> tuple[NNLM, tuple]:
    rng = np.random.default_rng(0)
    model = NNLM(9, order=3, dim=4, hidden=5, direct=True, rng=rng, dtype=np.float64)
    for name in ("W", "d", "b"):                     # non-zero, so every path carries gradient
        model.params[name][...] = rng.normal(0, 0.3, model.params[name].shape)
    idx = rng.integers(0, 9, size=(2, 5))
    targets = np.roll(idx, -1, axis=1)
    targets[1, 0] = IGNORE
    return model, (idx, targets)


register(ModelEntry(
    name="nnlm", title="Bengio NNLM", paper="Bengio, Ducharme, Vincent & Jauvin 2003, A Neural Probabilistic "
    "Language Model", objective="next word from n-1 words", build=build, tiny=tiny, lesson="05_nnlm",
    presets={"toy": Preset(model=dict(order=5, dim=32, hidden=64, direct=True),
                           train=dict(steps=1000, lr=1e-2, min_lr=1e-3, warmup=20, weight_decay=0.0,
                                      eval_every=250, eval_batches=20, grad_clip=1.0),
                           batch_size=32, data=dict(n_words=200_000, block_size=16),
                           expected="1.806 nats/word (perplexity 6.08); oracle 1.792 (6.00); 1000 steps")},
    recipe="minipt.recipes.classic.lm_recipe"))
