"""The three pre-training objectives of vision-language models, as one batch.

UNITER (Chen et al. 2020) and the single- and two-stream models before it (VisualBERT,
ViLBERT, LXMERT, VL-BERT, Unicoder-VL) pre-train on caption-image pairs with:

- masked language modelling conditioned on the image (MLM): BERT's 15 % and 80/10/10
  rule (``mlm.mask_tokens``) on the caption, with every region visible;
- masked region modelling (MRM): 15 % of regions have their features zeroed; the model
  classifies the masked region's object category (MRC) and regresses its original
  feature vector (MRFR, mean squared error);
- image-text matching (ITM): half the pairs are mismatched (another scene's caption), and
  the [CLS] state says which.

As in UNITER, MLM and MRM are computed on matched pairs only: a caption of another
scene says nothing about this scene's masked regions. Targets that do not count are
``IGNORE`` (-100), as everywhere in minipt.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..data import toy_scenes as ts
from ..tokenizers.special import BERT_SPECIALS, CLS, MASK, PAD, SEP
from .common import IGNORE, check_probability
from .mlm import mask_tokens


class VLBatch(NamedTuple):
    ids: np.ndarray                 # (B, T) [CLS] caption [SEP] [PAD]...
    text_mask: np.ndarray           # (B, T) 1 real token, 0 padding
    features: np.ndarray            # (B, N, F) region features, masked regions zeroed
    boxes: np.ndarray               # (B, N, 4)
    region_mask: np.ndarray         # (B, N) 1 real region, 0 padding
    mlm_labels: np.ndarray          # (B, T) original ids at masked tokens, else IGNORE
    region_labels: np.ndarray       # (B, N) category at masked regions, else IGNORE
    feature_targets: np.ndarray     # (B, N, F) the original features (read where region_labels != IGNORE)
    itm_labels: np.ndarray          # (B,) 1 matched, 0 mismatched


def vocabulary() -> list[str]:
    """BERT's specials, then every word a caption, question or answer can hold."""
    words = ["a", ".", "?", "how", "many", "objects", "what", "colour", "is", "the"]
    words += list(ts.COLOURS) + list(ts.CATEGORIES) + ["left", "right", "of", "above", "below"]
    words += [str(n) for n in range(1, ts.MAX_REGIONS + 1)]
    return list(BERT_SPECIALS) + words


def encode(words: list[str], vocab: dict[str, int]) -> list[int]:
    """Words -> ids; a word outside the vocabulary is a ValueError naming it."""
    unknown = [w for w in words if w not in vocab]
    if unknown:
        raise ValueError(f"words outside the vision-language vocabulary: {unknown[:5]}")
    return [vocab[w] for w in words]


def text_batch(sentences: list[list[str]], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """[CLS] words [SEP], padded with [PAD] -> ids (B, T), mask (B, T)."""
    rows = [[vocab[CLS]] + encode(s, vocab) + [vocab[SEP]] for s in sentences]
    T = max(len(r) for r in rows)
    ids = np.full((len(rows), T), vocab[PAD], np.int64)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = r
    return ids, (ids != vocab[PAD]).astype(np.int64)


def region_batch(scenes: list[ts.Scene], dtype=np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scenes -> features (B, N, F), boxes (B, N, 4) in ``dtype``, mask (B, N), N the
    largest scene; padding regions have zero features and a small dummy box."""
    for s in scenes:
        ts.check_regions(s.features, s.boxes)
    N = max(s.n_regions for s in scenes)
    F = scenes[0].features.shape[1]
    feats, boxes = np.zeros((len(scenes), N, F)), np.tile([0.0, 0.0, 0.01, 0.01], (len(scenes), N, 1))
    mask = np.zeros((len(scenes), N), np.int64)
    for b, s in enumerate(scenes):
        feats[b, :s.n_regions], boxes[b, :s.n_regions], mask[b, :s.n_regions] = s.features, s.boxes, 1
    return feats.astype(dtype), boxes.astype(dtype), mask


def make_batch(pairs: list[tuple[ts.Scene, list[str], int]], rng: np.random.Generator, *,
               mask_prob: float = 0.15, region_mask_prob: float = 0.15, dtype=np.float64) -> VLBatch:
    """(scene, caption words, matched 0/1) pairs -> a VLBatch with all three objectives
    (float arrays in ``dtype``: float32 to train, float64 to gradcheck)."""
    if not pairs:
        raise ValueError("make_batch needs at least one (scene, caption, label) pair")
    check_probability("mask_prob", mask_prob)
    check_probability("region_mask_prob", region_mask_prob)
    words = vocabulary()
    vocab = {w: i for i, w in enumerate(words)}
    ids, text_mask = text_batch([c for _, c, _ in pairs], vocab)
    feats, boxes, region_mask = region_batch([s for s, _, _ in pairs], dtype)
    itm = np.array([label for _, _, label in pairs], np.int64)
    if not np.isin(itm, (0, 1)).all():
        raise ValueError(f"matching labels must be 0 or 1, got {sorted(set(itm.tolist()))}")
    specials = [vocab[t] for t in BERT_SPECIALS if t != MASK]
    masked_ids, mlm = mask_tokens(ids, rng, mask_id=vocab[MASK], vocab_size=len(words), special_ids=specials,
                                  mask_prob=mask_prob, random_ids=np.arange(len(BERT_SPECIALS), len(words)))
    matched = itm[:, None] == 1                                            # (B, 1)
    inputs = np.where(matched, masked_ids, ids)                            # (B, T)
    mlm = np.where(matched, mlm, IGNORE)                                   # (B, T)
    chosen = (rng.random(region_mask.shape) < region_mask_prob) & (region_mask > 0) & matched   # (B, N)
    cats = np.full(region_mask.shape, IGNORE, np.int64)                    # (B, N)
    for b, (scene, _, _) in enumerate(pairs):
        cats[b, :scene.n_regions] = scene.categories
    region_labels = np.where(chosen, cats, IGNORE)                         # (B, N)
    masked_feats = np.where(chosen[..., None], 0.0, feats)                 # (B, N, F)
    return VLBatch(inputs, text_mask, masked_feats, boxes, region_mask, mlm, region_labels, feats, itm)
