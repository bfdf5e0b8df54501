"""Kneser-Ney against add-k smoothing (Kneser & Ney 1995, "Improved backing-off for
m-gram language modeling"; Chen & Goodman 1999, "An empirical study of smoothing
techniques for language modeling").

On the toy language at word level (``recipes.classic.word_splits``: the same training and
validation streams as ``minipt train ngram``), three counted models:

- the unigram with add-one: no context at all, the floor every n-gram must clear;
- the add-k trigram, with k chosen from a grid on the first half of the validation words
  (so add-k gets its best setting, which Chen & Goodman also give it);
- the interpolated Kneser-Ney trigram with its default discount n1 / (n1 + 2 n2).

All are scored on the second half of the validation words, in nats per word, next to the
oracle (the language's exact probability of the same words).
"""
from __future__ import annotations

import numpy as np

from ..models.classic.ngram import NGramLM, NGramVocab
from ..recipes.classic import NL, word_splits

BUDGETS = {"tiny": dict(n_words=5_000), "quick": dict(n_words=50_000), "full": dict(n_words=200_000)}
K_GRID = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001)


def halves(model: NGramLM, val_ids: np.ndarray, first: int) -> tuple[np.ndarray, np.ndarray]:
    """-log P of each validation word (history from the stream), split into two halves."""
    idx = np.concatenate([[first], val_ids[:-1]])[None, :]                  # (1, N)
    nats = -np.log(model.token_probs(idx, val_ids[None, :]))              # (N,)
    half = len(nats) // 2
    return nats[:half], nats[half:]


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {arm: {"held-out": nats/word}}, "floors": {"unigram"}, "k", ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    train_w, val_w, _, _ = word_splits(BUDGETS[budget]["n_words"], None, seed)
    vocab = NGramVocab([train_w])
    train_ids, val_ids = vocab.encode(train_w), vocab.encode(val_w)
    nl = vocab.index[NL]
    fit = lambda **kw: NGramLM(len(vocab), **kw).fit(train_ids)
    tune = {k: halves(fit(order=3, smoothing="addk", k=k), val_ids, nl) for k in K_GRID}
    k = min(K_GRID, key=lambda k: tune[k][0].mean())
    scored = {"unigram": halves(fit(order=1, smoothing="addk", k=1.0), val_ids, nl)[1],
              "add-k trigram": tune[k][1],
              "Kneser-Ney trigram": halves(fit(order=3, smoothing="kn"), val_ids, nl)[1]}
    held = {arm: float(x.mean()) for arm, x in scored.items()}
    se = {arm: float(x.std(ddof=1) / np.sqrt(len(x))) for arm, x in scored.items()}
    rows = [{"model": arm, "held-out nats/word": v, "standard error": se[arm]} for arm, v in held.items()]
    return {"rows": rows, "k": k, "held_out_words": len(scored["unigram"]),
            "arms": {arm: {"held-out": v} for arm, v in held.items() if arm != "unigram"},
            "items": {arm: {"held-out": x} for arm, x in scored.items() if arm != "unigram"},
            "floors": {"unigram": held["unigram"]}}
