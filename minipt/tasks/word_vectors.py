"""Evaluating static word vectors against the toy language's truth.

What the language knows (``minipt.data.toy_grammar``): semantic categories, 32 analogies
by construction, and two words with two senses each, every token's sense recorded. The
scores (analogy accuracy and the within-minus-between category gap come from
``minipt.data.toy_vectors``):

- ``nearest``: the k nearest words by cosine;
- ``category_purity``: for each categorised word, the share of its k nearest
  categorised words that share its category (cluster purity of the neighbourhoods);
- ``analogy_accuracy`` against the 32 built-in analogies, next to ``ppmi_svd``, the
  count-vector baseline (positive PMI reduced by SVD; Levy & Goldberg 2014);
- ``sense_accuracy``: each token of "bank" / "bat" labelled with the sense whose category
  centroid its vector is nearest; one static vector gives every token the same answer,
  so it scores at most the majority sense's share: the polysemy failure;
- ``StaticVectors.vector``: an unseen word has no vector at all: the OOV failure.
Both failures are what contextual (ELMo) and subword models answer.
"""
from __future__ import annotations

import numpy as np

from ..data.toy_grammar import CATEGORIES, SENSES, STATES
from ..data.toy_vectors import analogy_accuracy, category_gap


class StaticVectors:
    """One vector per vocabulary word, looked up by word."""

    def __init__(self, vectors: np.ndarray, vocab: list[str]):
        vectors = np.asarray(vectors, dtype=np.float64)
        if vectors.ndim != 2 or len(vectors) != len(vocab):
            raise ValueError(f"vectors: expected ({len(vocab)}, dim) for {len(vocab)} words, got {vectors.shape}")
        self.vectors, self.vocab = vectors, list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def vector(self, word: str) -> np.ndarray:
        if word not in self.index:
            raise KeyError(f"no vector for {word!r}: it was not in the training vocabulary of {len(self.vocab)} "
                           "words, and a static embedding table cannot build one for an unseen word")
        return self.vectors[self.index[word]]

    def nearest(self, word: str, k: int = 5) -> list[tuple[str, float]]:
        self.vector(word)
        sims = self.unit @ self.unit[self.index[word]]                      # (V,)
        sims[self.index[word]] = -np.inf
        top = np.argsort(-sims)[:k]
        return [(self.vocab[t], float(sims[t])) for t in top]


def category_purity(sv: StaticVectors, k: int = 3, categories: dict[str, list[str]] = CATEGORIES) -> float:
    words = [(w, c) for c, ws in sorted(categories.items()) for w in ws if w in sv.index]
    E = sv.unit[[sv.index[w] for w, _ in words]]                            # (n, dim)
    labels = np.array([c for _, c in words])
    sims = E @ E.T
    np.fill_diagonal(sims, -np.inf)
    top = np.argsort(-sims, axis=1)[:, :k]                                  # (n, k)
    return float((labels[top] == labels[:, None]).mean())


def sense_categories() -> dict[str, str]:
    """sense label -> the category whose words share the sense's state ("bank/river" -> "places")."""
    out = {}
    for word, senses in SENSES.items():
        for state, sense in senses.items():
            out[sense] = next(c for c, ws in CATEGORIES.items() if set(ws) & set(STATES[state]))
    return out


def sense_accuracy(sv: StaticVectors, word: str, token_senses: list[str]) -> tuple[float, float]:
    """(accuracy of labelling each token's sense by the nearest sense-category centroid,
    share of the majority sense): a static vector gives every token one label."""
    cats = {s: c for s, c in sense_categories().items() if s.startswith(word + "/")}
    if not token_senses:
        raise ValueError(f"no tokens of {word!r} to label")
    centroids = {s: sv.unit[[sv.index[w] for w in CATEGORIES[c] if w in sv.index]].mean(0) for s, c in cats.items()}
    v = sv.unit[sv.index[word]] if word in sv.index else sv.vector(word)
    guess = max(centroids, key=lambda s: float(v @ centroids[s]))
    senses = np.array(token_senses)
    shares = [float(np.mean(senses == s)) for s in cats]
    return float(np.mean(senses == guess)), max(shares)


def ppmi_svd(sequences, vocab_size: int, window: int = 2, dim: int = 20) -> np.ndarray:
    """Count vectors: positive PMI of co-occurrences within ``window`` (both sides),
    reduced to ``dim`` by SVD, U sqrt(S) (Levy & Goldberg 2014)."""
    counts = np.zeros((vocab_size, vocab_size))
    for s in sequences:
        s = np.asarray(s, np.int64)
        for d in range(1, window + 1):
            np.add.at(counts, (s[:-d], s[d:]), 1)
            np.add.at(counts, (s[d:], s[:-d]), 1)
    p = counts / counts.sum()
    marginal = p.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ppmi = np.nan_to_num(np.maximum(np.log(p / (marginal @ marginal.T)), 0), nan=0.0)
    u, s, _ = np.linalg.svd(ppmi)
    return u[:, :dim] * np.sqrt(s[:dim])


def evaluate(vectors: np.ndarray, vocab: list[str]) -> dict:
    """Analogy accuracy (and how many asked), category gap and purity of static vectors."""
    sv = StaticVectors(vectors, vocab)
    acc, asked = analogy_accuracy(sv.vectors, sv.vocab)
    return {"analogy": acc, "asked": asked, "category_gap": category_gap(sv.vectors, sv.vocab),
            "purity": category_purity(sv)}
