"""Heads that sit on a Transformer encoder's hidden states (Devlin et al. 2019, BERT).

- ``Pooler``: the sentence vector of BERT, a tanh dense layer on the first ([CLS])
  position, pooled = tanh(h[:, 0] W_p^T + b_p). Next sentence prediction and the
  sentence-level fine-tuning heads classify it (BERT, section 3 and figure 4).
- ``MLMHead``: the masked-LM output layer of BERT's released code: a transform
  t = LayerNorm(GELU(h W_t^T + b_t)), then scores z = t W_e^T + b over the vocabulary,
  with W_e the token embedding (V, E) (the output layer is tied to the input embedding,
  Press & Wolf 2017) and b (V,) a bias of the head's own. With a factorised embedding
  (ALBERT, E < C) the transform maps C -> E before the tied decoder.

Each is a Module: ``forward`` keeps its cache, ``backward(dy)`` adds into ``grads`` and
returns the gradient of the hidden states. A tied decoder adds into the embedding's own
gradient array (``Module.tie``), so both uses of W_e end up in one gradient.
"""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.checks import check_float, check_last_dim, check_ndim
from ..core.module import Module
from ..ops.activations import tanh_backward, tanh_forward
from .activations import Activation
from .linear import Linear
from .norms import LayerNorm


class Pooler(Module):
    """h (B, T, C) -> tanh(dense(h[:, 0])) (B, C): the [CLS] position's pooled vector."""

    def __init__(self, d_model: int, *, rng: np.random.Generator, std: float = 0.02, dtype=np.float32):
        super().__init__()
        self.dense = Linear(d_model, d_model, rng=rng, std=std, dtype=dtype)      # W_p (C, C), b_p (C,)
        self._cache = None

    def forward(self, h: np.ndarray) -> np.ndarray:
        check_float("h", h)
        check_ndim("h", h, 3)
        check_last_dim("h", h, self.dense.params["weight"].shape[1])
        y, act = tanh_forward(self.dense(h[:, 0]))                                # (B, C)
        self._cache = (h.shape, act)
        return y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        """dy (B, C) -> dh (B, T, C), zero except at position 0."""
        shape, act = self._cache
        dh = np.zeros(shape, dtype=dy.dtype)                                      # (B, T, C)
        dh[:, 0] = self.dense.backward(tanh_backward(dy, act))                    # (B, C)
        return dh


class MLMHead(Module):
    """h (B, T, C) -> logits (B, T, V) = LN(act(dense(h))) W_e^T + bias.

    ``tied_to``: the token Embedding whose table (V, E) is the decoder (BERT); without it
    the head owns an untied decoder (used by tests and by models that untie it).
    ``embedding_size`` E (ALBERT) defaults to ``d_model``.
    """

    def __init__(self, d_model: int, vocab_size: int, *, rng: np.random.Generator, tied_to: Module | None = None,
                 embedding_size: int | None = None, activation: str = "gelu", eps: float = 1e-12,
                 std: float = 0.02, dtype=np.float32):
        super().__init__()
        E = d_model if embedding_size is None else embedding_size
        self.dense = Linear(d_model, E, rng=rng, std=std, dtype=dtype)            # W_t (E, C), b_t (E,)
        self.act = Activation(activation)
        self.ln = LayerNorm(E, eps, dtype=dtype)                                  # (E,) gain and bias
        self.decoder = Linear(E, vocab_size, bias=False, rng=rng, std=std, dtype=dtype)   # W_e (V, E)
        if tied_to is not None:
            if tied_to.params["weight"].shape != (vocab_size, E):
                raise ValueError(f"tied_to: expected an embedding table of shape ({vocab_size}, {E}), "
                                 f"got {tied_to.params['weight'].shape}")
            self.decoder.tie("weight", tied_to, "weight")                       # one array, one gradient
        self.add_param("bias", init.zeros(vocab_size, dtype))                     # b (V,)
        self.d_model = d_model

    def forward(self, h: np.ndarray) -> np.ndarray:
        check_float("h", h)
        check_ndim("h", h, 3)
        check_last_dim("h", h, self.d_model)
        B, T, C = h.shape
        t = self.ln(self.act(self.dense(h.reshape(B * T, C))))                   # (B*T, E)
        z = self.decoder(t)                                                       # (B*T, V), a new array
        z += self.params["bias"]
        return z.reshape(B, T, -1)                                                # (B, T, V)

    def backward(self, dz: np.ndarray) -> np.ndarray:
        """dz (B, T, V) -> dh (B, T, C); the decoder's gradient goes to the tied table."""
        B, T, V = dz.shape
        dz = dz.reshape(B * T, V)                                                 # (B*T, V)
        self.grads["bias"] += dz.sum(axis=0)                                      # z = ... + b
        dt = self.decoder.backward(dz)                                            # (B*T, E)
        dh = self.dense.backward(self.act.backward(self.ln.backward(dt)))         # (B*T, C)
        return dh.reshape(B, T, -1)
