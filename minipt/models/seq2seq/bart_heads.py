"""BART's fine-tuning heads (Lewis et al. 2020, "BART: Denoising Sequence-to-Sequence
Pre-training for Natural Language Generation, Translation, and Comprehension", section 3):
the same ids go into the encoder and the decoder, and a head reads the decoder's top
states (``Bart.hidden``):

- ``BartClassifier`` (sec. 3.1): the state at the final EOS -> dense, tanh, out_proj.
  Parameters: ``dense.weight`` (C, C), ``dense.bias`` (C,), ``out_proj.weight`` (K, C),
  ``out_proj.bias`` (K,), beside the model's own under ``bart.``;
- ``BartTagger`` (sec. 3.2): a linear layer on the state at every position.
  Parameters: ``classifier.weight`` (K, C), ``classifier.bias`` (K,).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...core.checks import check_ndim
from ...core.module import Module
from ...nn.linear import Linear
from ...ops.activations import tanh_backward, tanh_forward
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward

if TYPE_CHECKING:          # for the annotations only: bart.py imports this file for its gradchecks
    from .bart import Bart


def eos_positions(ids: np.ndarray, eos_id: int) -> np.ndarray:
    """The position of each row's last ``eos_id`` (B,); a row without one is an error."""
    hit = ids == eos_id                                                                  # (B, T)
    missing = np.flatnonzero(~hit.any(axis=1))
    if missing.size:
        raise ValueError(f"row {missing[0]} has no EOS (id {eos_id}); BART classifies from the final EOS")
    return ids.shape[1] - 1 - np.argmax(hit[:, ::-1], axis=1)


class BartClassifier(Module):
    """Sequence classification (BART Sec. 3.1): the same ids into encoder and decoder,
    the decoder's top state at the last EOS -> dense, tanh, out_proj -> (B, K) scores."""
    has_backward = True

    def __init__(self, bart: Bart, n_classes: int, *, rng: np.random.Generator):
        super().__init__()
        C, dtype = bart.config.d_model, bart.dtype
        self.bart = bart
        self.dense = Linear(C, C, rng=rng, dtype=dtype)                                  # (C, C)
        self.out_proj = Linear(C, n_classes, rng=rng, dtype=dtype)                       # (K, C)
        self._cache = None

    def forward(self, ids: np.ndarray, labels: np.ndarray | None = None):
        """ids (B, T) [, labels (B,)] -> loss (or None), logits (B, K)."""
        check_ndim("ids", ids, 2)
        h = self.bart.hidden(ids, self.bart.decoder_input(ids))                          # (B, T, C)
        where = eos_positions(ids, self.bart.config.eos_id)                              # (B,)
        z, act = tanh_forward(self.dense(h[np.arange(len(ids)), where]))                 # (B, C)
        logits = self.out_proj(z)                                                        # (B, K)
        loss = ce = None
        if labels is not None:
            loss, ce = cross_entropy_forward(logits, np.asarray(labels))
        self._cache = (h.shape, where, act, ce)
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        shape, where, act, ce = self._cache
        dz = self.dense.backward(tanh_backward(self.out_proj.backward(cross_entropy_backward(dloss, ce)), act))
        dh = np.zeros(shape, dtype=dz.dtype)                                             # (B, T, C)
        dh[np.arange(shape[0]), where] = dz
        self.bart.backward_hidden(dh)


class BartTagger(Module):
    """Token tagging (BART Sec. 3.2): the same ids into encoder and decoder, a linear layer
    on the decoder's top state at each position -> (B, T, K) scores."""
    has_backward = True

    def __init__(self, bart: Bart, n_tags: int, *, rng: np.random.Generator):
        super().__init__()
        self.bart = bart
        self.classifier = Linear(bart.config.d_model, n_tags, rng=rng, dtype=bart.dtype)   # (K, C)
        self._cache = None

    def forward(self, ids: np.ndarray, tags: np.ndarray | None = None):
        """ids (B, T) [, tags (B, T), IGNORE where not scored] -> loss (or None), logits (B, T, K)."""
        check_ndim("ids", ids, 2)
        logits = self.classifier(self.bart.hidden(ids, self.bart.decoder_input(ids)))   # (B, T, K)
        loss = ce = None
        if tags is not None:
            loss, ce = cross_entropy_forward(logits, np.asarray(tags))
        self._cache = ce
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        self.bart.backward_hidden(self.classifier.backward(cross_entropy_backward(dloss, self._cache)))
