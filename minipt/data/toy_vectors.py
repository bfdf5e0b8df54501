"""Scoring word vectors against what the toy language knows to be true.

- ``analogy_accuracy``: the word2vec analogy test (Mikolov et al. 2013): for a : b = c : d,
  is d the nearest word (cosine, a, b and c excluded) to b - a + c? Questions come from
  ``toy_grammar.analogies()`` (gender and royalty pairs).
- ``category_gap``: mean cosine similarity of word pairs within a semantic category
  minus the mean across categories (``toy_grammar.CATEGORIES``); > 0 when vectors group
  animals with animals and places with places.
- ``sense_gap``: for contextual vectors of the polysemous words, the same gap between
  tokens of one sense and tokens of the other: static vectors score exactly 0.
"""
from __future__ import annotations

import numpy as np

from .toy_grammar import CATEGORIES, analogies


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2:
        raise ValueError(f"vectors: expected (n, dim), got shape {vectors.shape}")
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _index(vocab: list[str], vectors: np.ndarray) -> dict[str, int]:
    if len(vocab) != len(vectors):
        raise ValueError(f"{len(vocab)} words but {len(vectors)} vectors")
    return {w: i for i, w in enumerate(vocab)}


def analogy_accuracy(vectors: np.ndarray, vocab: list[str], questions=None) -> tuple[float, int]:
    """(fraction answered right, number of questions asked); words missing from vocab skip a question."""
    E, ix = _unit(vectors), _index(vocab, vectors)
    asked = right = 0
    for a, b, c, d in questions if questions is not None else analogies():
        if not all(w in ix for w in (a, b, c, d)):
            continue
        scores = E @ (E[ix[b]] - E[ix[a]] + E[ix[c]])          # (n,)
        scores[[ix[a], ix[b], ix[c]]] = -np.inf
        asked += 1
        right += int(np.argmax(scores)) == ix[d]
    if not asked:
        raise ValueError("no analogy question has all four words in the vocabulary")
    return right / asked, asked


def _within_minus_between(E: np.ndarray, labels: np.ndarray) -> float:
    sims = E @ E.T                                             # (n, n)
    same = labels[:, None] == labels[None, :]
    off = ~np.eye(len(E), dtype=bool)
    if not (same & off).any() or not (~same).any():
        raise ValueError("need at least two items in some group and two different groups")
    return float(sims[same & off].mean() - sims[~same].mean())


def category_gap(vectors: np.ndarray, vocab: list[str], categories: dict[str, list[str]] = CATEGORIES) -> float:
    ix = _index(vocab, vectors)
    rows, labels = [], []
    for k, (_, words) in enumerate(sorted(categories.items())):
        for w in words:
            if w in ix:
                rows.append(ix[w])
                labels.append(k)
    return _within_minus_between(_unit(vectors)[rows], np.array(labels))


def sense_gap(token_vectors: np.ndarray, senses: list[str]) -> float:
    """token_vectors (n, dim) for n occurrences of one word; senses (n,) their sense names."""
    if len(senses) != len(token_vectors):
        raise ValueError(f"{len(senses)} sense labels but {len(token_vectors)} vectors")
    return _within_minus_between(_unit(token_vectors), np.array(senses))
