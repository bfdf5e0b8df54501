"""Metrics shared by every task: one home for each (exact match, word accuracy, ROC AUC,
binary entropy)."""
from __future__ import annotations

import numpy as np


def accuracy(predictions: list[str], answers: list[str]) -> float:
    """Exact-match accuracy."""
    if len(predictions) != len(answers) or not answers:
        raise ValueError(f"expected two equal, non-empty lists, got {len(predictions)} and {len(answers)}")
    return float(np.mean([p == a for p, a in zip(predictions, answers)]))


def word_accuracy(prediction: list[str], reference: list[str]) -> float:
    """Share of the reference's positions where the prediction has the same word (a
    missing or extra word counts as wrong)."""
    if not reference:
        raise ValueError("word_accuracy: the reference is empty")
    hits = sum(p == r for p, r in zip(prediction, reference))
    return hits / max(len(prediction), len(reference))


def roc_auc(scores, labels) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (1 = positive): the
    probability that a random positive scores above a random negative, ties counting one
    half (Hanley & McNeil 1982). Rank form (Mann-Whitney U): with r_i the mean rank of
    positive i among all scores, AUC = (sum r_i - P (P + 1) / 2) / (P N)."""
    s, y = np.asarray(scores, dtype=np.float64).ravel(), np.asarray(labels).ravel()
    if s.shape != y.shape:
        raise ValueError(f"roc_auc: {s.size} scores for {y.size} labels")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"roc_auc: labels must be 0 or 1, got {np.unique(y).tolist()}")
    P, N = int(y.sum()), int((1 - y).sum())
    if not P or not N:
        raise ValueError(f"roc_auc needs both classes, got {P} positives and {N} negatives")
    order = np.argsort(s, kind="stable")
    _, first, counts = np.unique(s[order], return_index=True, return_counts=True)   # runs of ties, sorted
    ranks = np.empty(s.size)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)                      # 1-based mean rank per run
    return float((ranks[y == 1].sum() - P * (P + 1) / 2.0) / (P * N))


def binary_entropy(p: float) -> float:
    """H(p) = -p log p - (1 - p) log(1 - p) in nats: the cross-entropy of always
    predicting the base rate p, the floor a binary classifier's loss must beat."""
    if not 0 <= p <= 1:
        raise ValueError(f"binary_entropy: p must be in [0, 1], got {p}")
    return float(-sum(q * np.log(q) for q in (p, 1 - p) if q > 0))
