"""Sentence-pair objectives: BERT's next sentence prediction (Devlin et al. 2019) and
ALBERT's sentence order prediction (Lan et al. 2020).

Both build ``[CLS] A [SEP] B [SEP]`` with segment ids 0 for [CLS] A [SEP] and 1 for
B [SEP]. NSP: B follows A (label 1, IsNext) half the time, otherwise B is a segment of
another document (label 0). SOP: A and B are always consecutive; half the time they
are swapped (label 0), which leaves topic as no shortcut.
"""
from __future__ import annotations

import numpy as np


def _pair(a, b, cls_id: int, sep_id: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.concatenate([[cls_id], a, [sep_id], b, [sep_id]]).astype(np.int64)
    segments = np.concatenate([np.zeros(len(a) + 2), np.ones(len(b) + 1)]).astype(np.int64)
    return ids, segments


def _check(docs, need: int) -> None:
    usable = [d for d in docs if len(d) >= need]
    if not usable:
        raise ValueError(f"no document has the {need} consecutive sentences this objective needs")


def next_sentence_prediction(docs: list[list], rng: np.random.Generator, cls_id: int, sep_id: int):
    """docs: lists of sentences (token-id lists). Returns ids, segment ids, label."""
    _check(docs, 2)
    if len(docs) < 2:
        raise ValueError("NSP needs at least two documents to draw a random next sentence")
    pick = [i for i, d in enumerate(docs) if len(d) >= 2]
    d = pick[int(rng.integers(len(pick)))]
    j = int(rng.integers(len(docs[d]) - 1))
    a = docs[d][j]
    if rng.random() < 0.5:
        b, label = docs[d][j + 1], 1
    else:
        other = [i for i in range(len(docs)) if i != d][int(rng.integers(len(docs) - 1))]
        b, label = docs[other][int(rng.integers(len(docs[other])))], 0
    return (*_pair(a, b, cls_id, sep_id), label)


def sentence_order_prediction(docs: list[list], rng: np.random.Generator, cls_id: int, sep_id: int):
    """Returns ids, segment ids, label (1 = in order, 0 = swapped)."""
    _check(docs, 2)
    pick = [i for i, d in enumerate(docs) if len(d) >= 2]
    d = pick[int(rng.integers(len(pick)))]
    j = int(rng.integers(len(docs[d]) - 1))
    a, b = docs[d][j], docs[d][j + 1]
    if rng.random() < 0.5:
        return (*_pair(a, b, cls_id, sep_id), 1)
    return (*_pair(b, a, cls_id, sep_id), 0)
