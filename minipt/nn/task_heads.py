"""BERT's fine-tuning heads (Devlin et al. 2019, section 4 and figure 4): one small
layer on the encoder's hidden states h (B, T, C) per kind of task.

- ``SequenceClassifier`` (single sentence: SST-2, CoLA; sentence pair: MNLI, QQP): the
  pooled [CLS] vector (``heads.Pooler``, tanh(h_0 W_p^T + b_p)), dropout, then
  logits = pooled W^T + b (B, K).
- ``TokenClassifier`` (tagging: CoNLL NER): every position's h_t, dropout, then
  logits_t = h_t W^T + b (B, T, K).
- ``SpanClassifier`` (extractive QA: SQuAD): a start vector S and an end vector E;
  start_t = S . h_t + b_S and end_t = E . h_t + b_E (B, T) each. Positions outside the
  context (the question, [CLS], [SEP], padding) get the score ``OUTSIDE`` (-1e9), so the
  softmax over positions is a softmax over the context and they receive no gradient.

Parameters (C d_model, K classes):

| head | name | shape |
|---|---|---|
| SequenceClassifier | pooler.dense.weight, .bias | (C, C), (C,) |
| | classifier.weight, .bias | (K, C), (K,) |
| TokenClassifier | classifier.weight, .bias | (K, C), (K,) |
| SpanClassifier | qa_outputs.weight, .bias | (2, C), (2,): row 0 is S, row 1 is E |

``backward`` takes the gradient of the logits and returns the gradient of h (B, T, C).
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_float, check_last_dim, check_ndim
from ..core.module import Module
from .dropout import Dropout
from .heads import Pooler
from .linear import Linear

OUTSIDE = -1e9          # the score of a position that cannot start or end an answer


def _dropout(p: float, rng: np.random.Generator) -> Dropout:
    return Dropout(p, rng=np.random.default_rng(rng.integers(2**63)) if p else None)


def _check_hidden(h: np.ndarray, d_model: int) -> None:
    check_float("h", h)
    check_ndim("h", h, 3)
    check_last_dim("h", h, d_model)


class SequenceClassifier(Module):
    """h (B, T, C) -> logits (B, K) from the pooled [CLS] position."""

    def __init__(self, d_model: int, n_classes: int, *, rng: np.random.Generator, dropout: float = 0.1,
                 dtype=np.float32):
        super().__init__()
        self.pooler = Pooler(d_model, rng=rng, dtype=dtype)                       # W_p (C, C)
        self.drop = _dropout(dropout, rng)
        self.classifier = Linear(d_model, n_classes, rng=rng, std=0.02, dtype=dtype)   # W (K, C)
        self.d_model = d_model

    def forward(self, h: np.ndarray) -> np.ndarray:
        _check_hidden(h, self.d_model)
        return self.classifier(self.drop(self.pooler(h)))                        # (B, K)

    def backward(self, dlogits: np.ndarray) -> np.ndarray:
        """dlogits (B, K) -> dh (B, T, C), zero except at [CLS]."""
        return self.pooler.backward(self.drop.backward(self.classifier.backward(dlogits)))


class TokenClassifier(Module):
    """h (B, T, C) -> logits (B, T, K), one classification per position."""

    def __init__(self, d_model: int, n_classes: int, *, rng: np.random.Generator, dropout: float = 0.1,
                 dtype=np.float32):
        super().__init__()
        self.drop = _dropout(dropout, rng)
        self.classifier = Linear(d_model, n_classes, rng=rng, std=0.02, dtype=dtype)   # W (K, C)
        self.d_model = d_model

    def forward(self, h: np.ndarray) -> np.ndarray:
        _check_hidden(h, self.d_model)
        return self.classifier(self.drop(h))                                      # (B, T, K)

    def backward(self, dlogits: np.ndarray) -> np.ndarray:
        return self.drop.backward(self.classifier.backward(dlogits))              # (B, T, C)


class SpanClassifier(Module):
    """h (B, T, C), context (B, T) bool -> start, end logits (B, T) each; outside the
    context both are ``OUTSIDE``."""

    def __init__(self, d_model: int, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.qa_outputs = Linear(d_model, 2, rng=rng, std=0.02, dtype=dtype)     # [S; E] (2, C)
        self.d_model = d_model
        self._context = None

    def forward(self, h: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _check_hidden(h, self.d_model)
        if np.shape(context) != h.shape[:2]:
            raise ValueError(f"context: expected a (B, T) = {h.shape[:2]} mask, got shape {np.shape(context)}")
        context = np.asarray(context, dtype=bool)                                 # (B, T)
        z = self.qa_outputs(h)                                                    # (B, T, 2)
        z = np.where(context[..., None], z, np.asarray(OUTSIDE, dtype=z.dtype))  # (B, T, 2)
        self._context = context
        return z[..., 0], z[..., 1]                                               # (B, T), (B, T)

    def backward(self, dstart: np.ndarray, dend: np.ndarray) -> np.ndarray:
        """dstart, dend (B, T) -> dh (B, T, C); positions outside the context pass nothing."""
        dz = np.stack([dstart, dend], axis=-1) * self._context[..., None]         # (B, T, 2)
        return self.qa_outputs.backward(dz)                                       # (B, T, C)
