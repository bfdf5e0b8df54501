"""Sentence-pair objectives: BERT's next sentence prediction (Devlin et al. 2019) and
ALBERT's sentence order prediction (Lan et al. 2020).

Both build ``[CLS] A [SEP] B [SEP]`` with segment ids 0 for [CLS] A [SEP] and 1 for
B [SEP]. NSP: B follows A (label 1, IsNext) half the time, otherwise B is a segment of
another document (label 0). SOP: A and B are always consecutive; half the time they
are swapped (label 0), which leaves topic as no shortcut.

Truncation (``max_length``, BERT's ``truncate_seq_pair`` made deterministic): while the
pair with its three special tokens is longer than ``max_length``, drop the last token of
the longer segment (of A when they are equally long). Both segments keep at least one
token, so ``max_length`` must be at least 5.
"""
from __future__ import annotations

import numpy as np


def _pair(a, b, cls_id: int, sep_id: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.concatenate([[cls_id], a, [sep_id], b, [sep_id]]).astype(np.int64)
    segments = np.concatenate([np.zeros(len(a) + 2), np.ones(len(b) + 1)]).astype(np.int64)
    return ids, segments


def truncate_pair(a, b, max_length: int) -> tuple[list, list]:
    """Longest-first truncation of two segments so that ``[CLS] a [SEP] b [SEP]`` fits in
    ``max_length`` tokens: the last token of the longer segment goes first (A on ties)."""
    if not isinstance(max_length, int) or max_length < 5:
        raise ValueError(f"max_length: a pair [CLS] A [SEP] B [SEP] needs at least 5 tokens, got {max_length!r}")
    a, b = list(a), list(b)
    while len(a) + len(b) + 3 > max_length:
        if len(a) >= len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def _make(a, b, cls_id: int, sep_id: int, max_length: int | None) -> tuple[np.ndarray, np.ndarray]:
    if max_length is not None:
        a, b = truncate_pair(a, b, max_length)
    return _pair(a, b, cls_id, sep_id)


def _check(docs, need: int) -> None:
    usable = [d for d in docs if len(d) >= need]
    if not usable:
        raise ValueError(f"no document has the {need} consecutive sentences this objective needs")


def next_sentence_prediction(docs: list[list], rng: np.random.Generator, cls_id: int, sep_id: int,
                             max_length: int | None = None):
    """docs: lists of sentences (token-id lists). Returns ids, segment ids, label;
    ``max_length``: truncate longest-first (``truncate_pair``)."""
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
    return (*_make(a, b, cls_id, sep_id, max_length), label)


def sentence_order_prediction(docs: list[list], rng: np.random.Generator, cls_id: int, sep_id: int,
                              max_length: int | None = None):
    """Returns ids, segment ids, label (1 = in order, 0 = swapped); ``max_length`` as NSP."""
    _check(docs, 2)
    pick = [i for i, d in enumerate(docs) if len(d) >= 2]
    d = pick[int(rng.integers(len(pick)))]
    j = int(rng.integers(len(docs[d]) - 1))
    a, b = docs[d][j], docs[d][j + 1]
    if rng.random() < 0.5:
        return (*_make(a, b, cls_id, sep_id, max_length), 1)
    return (*_make(b, a, cls_id, sep_id, max_length), 0)
