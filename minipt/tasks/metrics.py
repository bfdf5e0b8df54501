"""Metrics shared by every task: one home for each (exact match, word accuracy)."""
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
