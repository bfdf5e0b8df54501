"""word2vec's four variants (Mikolov et al. 2013a, "Efficient Estimation of Word
Representations in Vector Space"; 2013b, "Distributed Representations of Words and
Phrases and their Compositionality"): skip-gram or CBOW, each with negative sampling (NS)
or hierarchical softmax (HS).

On the toy language's training words (the stream of ``minipt train word2vec``), every
variant trains with the same dimension, window, epochs and seed, and is scored on the
language's 32 analogies by construction (``tasks/word_vectors.py``) and on its category
gap. The floor of the analogy score is chance: one right answer among the vocabulary
less the three question words.
"""
from __future__ import annotations

import numpy as np

from ..data.toy_vectors import analogies, analogy_accuracy
from ..models.classic.word2vec import Word2Vec
from ..recipes.classic import NL, documents, word_splits
from ..tasks.word_vectors import evaluate

BUDGETS = {"tiny": dict(n_words=5_000, epochs=1), "quick": dict(n_words=300_000, epochs=5),   # 20 s: as full
           "full": dict(n_words=300_000, epochs=5)}
VARIANTS = {"skip-gram + NS": ("skipgram", "neg"), "skip-gram + HS": ("skipgram", "hs"),
            "CBOW + NS": ("cbow", "neg"), "CBOW + HS": ("cbow", "hs")}


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {variant: {"analogy", "category gap"}}, "floors": {"chance"}}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    train_w, _, _, _ = word_splits(b["n_words"], None, seed)
    vocab = sorted(set(train_w))
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.array([index[w] for w in train_w], dtype=np.int64)
    docs, counts = documents(ids, index.get(NL, -1)), np.bincount(ids, minlength=len(vocab))
    arms, items, rows = {}, {}, []
    asked = [q for q in analogies() if all(w in index for w in q)]
    for name, (arch, output) in VARIANTS.items():
        model = Word2Vec(len(vocab), 32, arch=arch, output=output, window=4, counts=counts,
                         rng=np.random.default_rng(seed))
        model.fit(docs, epochs=b["epochs"], rng=np.random.default_rng(seed + 1), progress=progress)
        s = evaluate(model.vectors(), vocab)
        arms[name] = {"analogy": float(s["analogy"]), "category gap": float(s["category_gap"])}
        items[name] = {"analogy": np.array([analogy_accuracy(model.vectors(), vocab, [q])[0] for q in asked])}
        rows.append({"variant": name, "analogy": arms[name]["analogy"], "of": s["asked"],
                     "category gap": arms[name]["category gap"]})
    return {"rows": rows, "arms": arms, "items": items, "floors": {"chance": 1.0 / (len(vocab) - 3)}}
