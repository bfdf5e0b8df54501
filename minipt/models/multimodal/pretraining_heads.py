"""The heads of vision-language pre-training and fine-tuning, shared by the single- and
two-stream models (objectives: ``objectives/vision_language.py``; UNITER, Chen et al.
2020, section 3.2):

- MLM: BERT's head on the caption's states, its decoder tied to the token embedding;
- MRC: masked region classification, a linear layer on a masked region's state -> the
  object category (cross-entropy);
- MRFR: masked region feature regression, a linear layer -> the original feature vector
  (mean squared error over the masked regions' features);
- ITM: image-text matching, a linear layer on the pooled [CLS] state -> matched or not;
- VQA (fine-tuning): a linear layer on the pooled [CLS] state -> one of the answers.

The loss is the sum of the parts that have targets in the batch.

| parameter | shape | what |
|---|---|---|
| mlm.* | as MLMHead (decoder tied) | MLM |
| mrc.weight, .bias | (n_categories, C), (n_categories,) | MRC |
| mrfr.weight, .bias | (F, C), (F,) | MRFR |
| pooler.dense.* | (C, C), (C,) | [CLS] pooler |
| itm.weight, .bias | (2, C), (2,) | ITM |
| vqa.weight, .bias | (n_answers, C), (n_answers,) | VQA |
"""
from __future__ import annotations

import numpy as np

from ...core.module import Module
from ...nn.heads import MLMHead, Pooler
from ...nn.linear import Linear
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..protocol import IGNORE


class VisionLanguageHeads(Module):
    def __init__(self, d_model: int, vocab_size: int, n_features: int, n_categories: int, n_answers: int, *,
                 rng: np.random.Generator, tied_to: Module, eps: float = 1e-12, dtype=np.float32):
        super().__init__()
        self.mlm = MLMHead(d_model, vocab_size, rng=rng, tied_to=tied_to, eps=eps, dtype=dtype)
        self.mrc = Linear(d_model, n_categories, rng=rng, dtype=dtype)
        self.mrfr = Linear(d_model, n_features, rng=rng, dtype=dtype)
        self.pooler = Pooler(d_model, rng=rng, dtype=dtype)
        self.itm = Linear(d_model, 2, rng=rng, dtype=dtype)
        self.vqa = Linear(d_model, n_answers, rng=rng, dtype=dtype)
        self.n_answers = n_answers
        self._cache = None

    def forward(self, h_text: np.ndarray, h_regions: np.ndarray, mlm_labels=None, region_labels=None,
                feature_targets=None, itm_labels=None, answers=None):
        """h_text (B, T, C), h_regions (B, N, C), targets as in ``VLBatch`` [+ answers (B,)]
        -> loss (), MLM logits (B, T, V). ``self.scores`` keeps the ITM and VQA logits."""
        logits = self.mlm(h_text)                                          # (B, T, V)
        pooled = self.pooler(h_text)                                       # (B, C)
        self.scores = {"itm": self.itm(pooled)}                            # (B, 2)
        parts, caches = [], {}

        def counted(t):
            return t is not None and (np.asarray(t) != IGNORE).any()

        if counted(mlm_labels):
            loss, caches["mlm"] = cross_entropy_forward(logits, np.asarray(mlm_labels))
            parts.append(loss)
        masked = np.zeros(h_regions.shape[:2], bool) if region_labels is None else np.asarray(region_labels) != IGNORE
        if masked.any():
            loss, caches["mrc"] = cross_entropy_forward(self.mrc(h_regions), np.asarray(region_labels))
            parts.append(loss)
            if feature_targets is not None:
                pred = self.mrfr(h_regions)                                # (B, N, F)
                diff = (pred - feature_targets) * masked[..., None]        # (B, N, F), zero where unmasked
                n = masked.sum() * pred.shape[-1]
                parts.append(np.asarray((diff * diff).sum() / n, dtype=pred.dtype))
                caches["mrfr"] = (diff, n, masked)
        if counted(itm_labels):
            loss, caches["itm"] = cross_entropy_forward(self.scores["itm"], np.asarray(itm_labels))
            parts.append(loss)
        if answers is not None:
            answers = np.asarray(answers)
            if answers.shape != (len(pooled),) or answers.min() < 0 or answers.max() >= self.n_answers:
                raise ValueError(f"answers: expected ({len(pooled)},) ids in [0, {self.n_answers}), got shape "
                                 f"{answers.shape} values {np.unique(answers).tolist()[:5]}")
            self.scores["vqa"] = self.vqa(pooled)                          # (B, n_answers)
            loss, caches["vqa"] = cross_entropy_forward(self.scores["vqa"], answers)
            parts.append(loss)
        self._cache = (caches, h_text.shape, h_regions.shape, h_text.dtype)
        return (sum(parts[1:], parts[0]) if parts else None), logits

    def backward(self, dloss: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """-> (dh_text (B, T, C), dh_regions (B, N, C), d feature_targets (B, N, F) or None)."""
        caches, t_shape, r_shape, dtype = self._cache
        dt, dr, dtargets = np.zeros(t_shape, dtype), np.zeros(r_shape, dtype), None
        if "mlm" in caches:
            dt += self.mlm.backward(cross_entropy_backward(dloss, caches["mlm"]))
        if "mrfr" in caches:
            diff, n, masked = caches["mrfr"]
            dpred = (2.0 * float(dloss) / n) * diff                        # (B, N, F)
            dr += self.mrfr.backward(dpred)
            dtargets = -dpred
        if "mrc" in caches:
            dr += self.mrc.backward(cross_entropy_backward(dloss, caches["mrc"]))
        dpooled = np.zeros((t_shape[0], t_shape[2]), dtype)                # (B, C)
        for name, head in (("itm", self.itm), ("vqa", self.vqa)):
            if name in caches:
                dpooled += head.backward(cross_entropy_backward(dloss, caches[name]))
        if "itm" in caches or "vqa" in caches:
            dt += self.pooler.backward(dpooled)
        return dt, dr, dtargets
