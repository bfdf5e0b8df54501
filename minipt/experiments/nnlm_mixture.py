"""Bengio et al. 2003 ("A Neural Probabilistic Language Model"): the NNLM against a
smoothed trigram, and the mixture of the two that the paper reports as its best.

On the toy language at word level (the streams of ``minipt train ngram``), the NNLM
(n = 5, m 32, h 64, direct connections; ``models/classic/nnlm.py``) trains with minipt's
loop; the Kneser-Ney trigram is counted on the same words. The mixture
P = lambda P_NNLM + (1 - lambda) P_trigram takes lambda from a grid on the first half of
the validation words; every arm is scored on the second half (nats per word), beside
the unigram floor.
"""
from __future__ import annotations

import numpy as np

from ..data.batching import TokenStream
from ..models.classic.ngram import NGramLM, NGramVocab
from ..models.classic.nnlm import NNLM
from ..ops.softmax import log_softmax_forward
from ..recipes.classic import NL, word_splits
from ..train import TrainConfig, train
from .smoothing import halves

BUDGETS = {"tiny": dict(n_words=5_000, steps=20), "quick": dict(n_words=50_000, steps=200),
           "full": dict(n_words=200_000, steps=600)}
LAMBDAS = np.linspace(0, 1, 21)


def nnlm_probs(model: NNLM, val_ids: np.ndarray, first: int) -> np.ndarray:
    """P(word | the previous words) of each validation word under the NNLM, (N,)."""
    idx, tgt = np.concatenate([[first], val_ids[:-1]])[None, :], val_ids[None, :]   # (1, N)
    model.eval()
    _, logits = model(idx, tgt)                                                      # (1, N, V)
    logp = log_softmax_forward(logits.astype(np.float64))[0]
    return np.exp(np.take_along_axis(logp, tgt[..., None], -1))[0, :, 0]


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {arm: {"held-out": nats/word}}, "floors": {"unigram"}, "lambda", ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    train_w, val_w, _, _ = word_splits(b["n_words"], None, seed)
    vocab = NGramVocab([train_w])
    train_ids, val_ids = vocab.encode(train_w), vocab.encode(val_w)
    nl = vocab.index[NL]
    nnlm = NNLM(len(vocab), order=5, dim=32, hidden=64, direct=True, pad_id=nl,
                rng=np.random.default_rng(seed))
    train(nnlm, TokenStream(train_ids, val_ids, 16, 32).get_batch,
          TrainConfig(steps=b["steps"], lr=1e-2, min_lr=1e-3, warmup=max(b["steps"] // 30, 1), weight_decay=0.0,
                      eval_every=0, progress=progress, seed=seed))
    p_net = nnlm_probs(nnlm, val_ids, nl)
    trigram = NGramLM(len(vocab), order=3, smoothing="kn").fit(train_ids)
    idx = np.concatenate([[nl], val_ids[:-1]])[None, :]
    p_tri = trigram.token_probs(idx, val_ids[None, :])
    half = len(p_net) // 2
    nats = lambda p: float(-np.log(p).mean())
    lam = float(LAMBDAS[np.argmin([nats(l * p_net[:half] + (1 - l) * p_tri[:half]) for l in LAMBDAS])])
    unigram = NGramLM(len(vocab), order=1, smoothing="addk", k=1.0).fit(train_ids)
    scored = {"NNLM": -np.log(p_net[half:]), "Kneser-Ney trigram": -np.log(p_tri[half:]),
              "mixture": -np.log(lam * p_net[half:] + (1 - lam) * p_tri[half:])}     # (N,) nats per word
    held = {arm: float(x.mean()) for arm, x in scored.items()}
    held["unigram"] = float(halves(unigram, val_ids, nl)[1].mean())
    rows = [{"model": arm, "held-out nats/word": v} for arm, v in held.items()]
    return {"rows": rows, "lambda": lam, "held_out_words": len(p_net) - half,
            "arms": {arm: {"held-out": v} for arm, v in held.items() if arm != "unigram"},
            "items": {arm: {"held-out": x} for arm, x in scored.items()},
            "floors": {"unigram": held["unigram"]}}
