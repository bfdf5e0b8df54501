"""Image regions as Transformer inputs (UNITER, Chen et al. 2020, section 3.1; the same
idea in VisualBERT, VL-BERT and ViLBERT).

A detector reports each region as a feature vector f (F,) and a box; the box becomes a
location vector p = (x0, y0, x1, y1, area) (``data.toy_scenes.box_features``). Each goes
through its own fully connected layer into the model's width, the two are summed, and a
LayerNorm follows:

    v = LN(W_f f + b_f + W_p p + b_p)

A single-stream model then adds its "image" segment embedding (``type_embedding``, a
learned (C,) vector) so that the Transformer can tell regions from words.

| parameter | shape | what |
|---|---|---|
| feature.weight, .bias | (C, F), (C,) | W_f, b_f |
| location.weight, .bias | (C, 5), (C,) | W_p, b_p |
| ln.weight, .bias | (C,) | LayerNorm |
| type_embedding | (C,) | the image segment (single stream only) |
"""
from __future__ import annotations

import numpy as np

from ...core.module import Module
from ...data.toy_scenes import box_features
from ...nn.linear import Linear
from ...nn.norms import LayerNorm


class RegionEmbedding(Module):
    def __init__(self, n_features: int, d_model: int, *, rng: np.random.Generator, segment: bool = False,
                 eps: float = 1e-12, dtype=np.float32):
        super().__init__()
        self.feature = Linear(n_features, d_model, rng=rng, dtype=dtype)
        self.location = Linear(5, d_model, rng=rng, dtype=dtype)
        self.ln = LayerNorm(d_model, eps, dtype=dtype)
        self.segment = segment
        if segment:
            self.add_param("type_embedding", (0.02 * rng.standard_normal(d_model)).astype(dtype))   # (C,)
        self._cache = None

    def forward(self, features: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """features (B, N, F), boxes (B, N, 4) -> (B, N, C)."""
        B, N, F = features.shape
        if boxes.shape != (B, N, 4):
            raise ValueError(f"boxes: expected {(B, N, 4)} for features {features.shape}, got {boxes.shape}")
        flat = boxes.reshape(B * N, 4)                                      # (B*N, 4)
        p = box_features(flat).astype(features.dtype)                       # (B*N, 5)
        v = self.ln(self.feature(features.reshape(B * N, F)) + self.location(p))    # (B*N, C)
        self._cache = (B, N, F, flat)
        v = v.reshape(B, N, -1)
        return v + self.params["type_embedding"] if self.segment else v

    def backward(self, dv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """dv (B, N, C) -> (d features (B, N, F), d boxes (B, N, 4))."""
        B, N, F, flat = self._cache
        if self.segment:
            self.grads["type_embedding"] += dv.sum((0, 1))
        dz = self.ln.backward(dv.reshape(B * N, -1))                        # (B*N, C)
        dp = self.location.backward(dz)                                     # (B*N, 5)
        w, h = flat[:, 2] - flat[:, 0], flat[:, 3] - flat[:, 1]             # area = w h
        dboxes = dp[:, :4] + dp[:, 4:5] * np.stack([-h, -w, h, w], 1)       # (B*N, 4)
        return self.feature.backward(dz).reshape(B, N, F), dboxes.reshape(B, N, 4)
