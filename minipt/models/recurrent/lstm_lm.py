"""An LSTM language model (Zaremba, Sutskever & Vinyals 2014, "Recurrent Neural Network
Regularization"; the LSTM of Hochreiter & Schmidhuber 1997).

    e_t = E[x_t];  h_t^l = LSTM^l(h_{t-1}^l, h_t^{l-1});  p(x_{t+1} | x_<=t) = softmax(W h_t^L + b)

with dropout on the embedding and on the top layer's output (Zaremba et al. apply it to
the non-recurrent connections only). The model meets the protocol of
``minipt.models.protocol``: ``block_size`` is None (the state carries any amount of
context) and ``new_cache()`` is an ``LSTMState`` that ``forward(..., cache=state)``
reads and updates, so a long stream is read chunk by chunk (truncated BPTT; sampling one
token at a time).

Parameters (V vocabulary, C embedding width, H hidden width, layer l):

| name | shape |
|---|---|
| wte.weight | (V, C) |
| layers.l.weight_ih | (4H, C) for l = 0, else (4H, H) |
| layers.l.weight_hh | (4H, H) |
| layers.l.bias | (4H,) (forget slice starts at 1) |
| lm_head.weight | (V, H) |
| lm_head.bias | (V,) |
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core.checks import check_ids, check_ndim
from ...core.module import Module
from ...nn.dropout import Dropout
from ...nn.embedding import Embedding
from ...nn.linear import Linear
from ...nn.lstm import LSTM
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..protocol import IGNORE, log_prob_from_loss
from ..registry import ModelEntry, Preset, register


@dataclass
class LSTMState:
    """Per-layer (h (B, H), c (B, H)) after the tokens read so far; empty before the first."""
    states: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    length: int = 0


class LSTMLanguageModel(Module):
    has_backward = True
    block_size = None

    def __init__(self, vocab_size: int, d_model: int = 64, hidden: int = 128, n_layer: int = 1,
                 dropout: float = 0.0, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.settings = dict(vocab_size=vocab_size, d_model=d_model, hidden=hidden, n_layer=n_layer, dropout=dropout)
        self.wte = Embedding(vocab_size, d_model, rng=rng, std=0.1, dtype=dtype)
        self.layers = [LSTM(d_model if l == 0 else hidden, hidden, rng=rng, dtype=dtype) for l in range(n_layer)]
        self.drop_in = Dropout(dropout, rng=np.random.default_rng(rng.integers(2**63)))
        self.drop_out = Dropout(dropout, rng=np.random.default_rng(rng.integers(2**63)))
        self.lm_head = Linear(hidden, vocab_size, rng=rng, std=None, dtype=dtype)
        self._ce = None

    def new_cache(self) -> LSTMState:
        return LSTMState()

    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None, *, cache: LSTMState | None = None):
        """idx (B, T) [, targets (B, T)] -> loss (or None), logits (B, T, V)."""
        check_ndim("idx", idx, 2)
        check_ids("idx", idx, self.settings["vocab_size"])
        if idx.shape[0] == 0 or idx.shape[1] == 0:
            raise ValueError(f"idx: an empty batch (shape {idx.shape})")
        x = self.drop_in(self.wte(idx))                              # (B, T, C)
        if cache is not None and cache.states and cache.states[0][0].shape[0] != idx.shape[0]:
            raise ValueError(f"cache: holds states for batch {cache.states[0][0].shape[0]}, idx has batch {idx.shape[0]}")
        new_states = []
        for l, layer in enumerate(self.layers):
            h0, c0 = cache.states[l] if cache is not None and cache.states else (None, None)
            x = layer(x, h0, c0)                                     # (B, T, H)
            new_states.append(layer.final_state)
        if cache is not None:
            cache.states, cache.length = new_states, cache.length + idx.shape[1]
        logits = self.lm_head(self.drop_out(x))                      # (B, T, V)
        loss, self._ce = None, None
        if targets is not None:
            if targets.shape != idx.shape:
                raise ValueError(f"targets: expected shape {idx.shape}, got {targets.shape}")
            loss, self._ce = cross_entropy_forward(logits, targets, IGNORE)
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        if self._ce is None:
            raise RuntimeError("backward needs a forward with targets")
        dx = self.drop_out.backward(self.lm_head.backward(cross_entropy_backward(dloss, self._ce)))   # (B, T, H)
        for layer in reversed(self.layers):
            dx = layer.backward(dx)[0]                               # truncated BPTT: no gradient into the cache
        self.wte.backward(self.drop_in.backward(dx))

    def log_prob(self, idx: np.ndarray, targets: np.ndarray) -> float:
        return log_prob_from_loss(self, idx, targets)

    def spec(self) -> dict:
        return {"model": "lstm", **self.settings}


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> LSTMLanguageModel:
    return LSTMLanguageModel(**settings, rng=rng, dtype=dtype)


def tiny() -> tuple[LSTMLanguageModel, tuple]:
    r = np.random.default_rng(0)
    model = LSTMLanguageModel(7, d_model=4, hidden=5, n_layer=2, rng=r, dtype=np.float64)
    for _, p in model.named_parameters():     # O(1) weights: gradients far above round-off
        p[...] = 0.6 * r.standard_normal(p.shape)
    idx = r.integers(0, 7, (2, 5))
    targets = r.integers(0, 7, (2, 5))
    targets[1, 3:] = IGNORE
    return model, (idx, targets)


register(ModelEntry(
    name="lstm", title="LSTM LM", paper="Zaremba, Sutskever & Vinyals 2014, Recurrent Neural Network Regularization "
    "(LSTM: Hochreiter & Schmidhuber 1997)", objective="causal LM", build=build, tiny=tiny, lesson="07_lstm",
    presets={"toy": Preset(
        model=dict(d_model=32, hidden=128, n_layer=1, dropout=0.0), batch_size=32,
        train=dict(steps=1000, lr=1e-2, min_lr=1e-3, warmup=20, weight_decay=0.0, eval_every=100, eval_batches=20,
                   grad_clip=1.0),
        data=dict(n_tokens=400_000, block_size=64), expected="see README")},
    recipe="minipt.recipes.recurrent.recipe"))
