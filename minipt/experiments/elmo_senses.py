"""Does ELMo's upper layer tell a word's senses apart where a static vector cannot?
(Peters et al. 2018, "Deep contextualized word representations", Sec. 5.3: word-sense
disambiguation from the biLM's top layer.)

The toy language has two ambiguous words ("bank": river / money, "bat": animal / thing)
and records the sense of every token it generates. A biLM (``models/recurrent/elmo.py``:
char-CNN, two LSTMP layers) trains on its words; word2vec (skip-gram with negative
sampling) trains on the same number of words. One probe (``tasks/probe.py``: a softmax
regression over the four senses, same steps for all) reads each representation of the
sense-labelled tokens of held-out sentences. A static vector gives a word one row, so
its probe can at best pick each word's more frequent sense; the floor is chance (one of
the word's two senses).
"""
from __future__ import annotations

import numpy as np

from ..data import toy_tasks
from ..data.hmm_language import HMMLanguage
from ..data.toy_grammar import SENSES
from ..data.toy_words import toy_word_stream, word_tokenizer
from ..models.classic.word2vec import Word2Vec
from ..models.recurrent.elmo import ELMo
from ..tasks.probe import fit_probe
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(words=20_000, steps=10, sentences=(200, 10, 100)),
           "quick": dict(words=100_000, steps=300, sentences=(2000, 10, 2000)),
           "full": dict(words=100_000, steps=600, sentences=(2000, 10, 2000))}


def sense_tokens(elmo: ELMo, examples: list[dict]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The sense-labelled tokens of ``examples``: words (N,), senses (N,), ELMo's three
    layers (N, 2D) each (token layer, first and second biLSTM layer)."""
    words, senses, feats = [], [], [[], [], []]
    for start in range(0, len(examples), 200):
        chunk = examples[start:start + 200]
        layers, lengths = elmo.sentence_layers([e["words"] for e in chunk])       # 3 x (B, T, 2D)
        for b, e in enumerate(chunk):
            keep = [t for t, (w, s) in enumerate(zip(e["words"], e["states"])) if s in SENSES.get(w, {})]
            words += [e["words"][t] for t in keep]
            senses += [SENSES[e["words"][t]][e["states"][t]] for t in keep]
            for j in range(3):
                feats[j].append(layers[j][b, keep])
    return np.array(words), np.array(senses), [np.concatenate(f).astype(np.float64) for f in feats]


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {representation: {"sense accuracy"}}, "floors": {"chance", "majority sense"}}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    tok = word_tokenizer()
    vocab = [tok.decode([i]) for i in range(tok.vocab_size)]
    data, _ = toy_word_stream(b["words"], block_size=20, batch_size=32, seed=seed)
    elmo = ELMo(vocab, d_model=32, hidden=64, n_layer=2, dropout=0.1, rng=np.random.default_rng(seed))
    train(elmo, data.get_batch, TrainConfig(steps=b["steps"], lr=1e-2, min_lr=1e-3, warmup=min(20, b["steps"]),
                                            weight_decay=0.0, eval_every=0, seed=seed, progress=progress))
    elmo.eval()
    draw = lambda rng: dict(zip(("words", "states"), toy_tasks.sentence(rng)))  # noqa: E731
    task = toy_tasks.make_splits("senses", draw, lambda e: tuple(e["words"]) + tuple(e["states"]),
                                 b["sentences"], seed=seed + 1000)
    tr_w, tr_s, tr_f = sense_tokens(elmo, task.train)
    te_w, te_s, te_f = sense_tokens(elmo, task.test)
    labels = sorted(set(tr_s) | set(te_s))
    ytr, yte = (np.array([labels.index(s) for s in x]) for x in (tr_s, te_s))

    lang = HMMLanguage.build()
    index = {w: i for i, w in enumerate(lang.vocab)}
    ids = np.array([index[w] for w in lang.sample_words(b["words"], np.random.default_rng(seed))])
    w2v = Word2Vec(len(index), 32, arch="skipgram", output="neg", window=4,
                   counts=np.bincount(ids, minlength=len(index)), rng=np.random.default_rng(seed))
    w2v.fit([ids], epochs=3, rng=np.random.default_rng(seed + 1))
    static = lambda words: np.stack([w2v.vectors()[index[w]] for w in words]).astype(np.float64)  # noqa: E731

    def correct(train_x, test_x) -> np.ndarray:
        """The probe's right (1) and wrong (0) answers on the test tokens, (N,)."""
        _, probe = fit_probe(train_x, ytr, test_x, yte, seed=seed)
        return (probe(test_x)[1].argmax(-1) == yte).astype(np.float64)

    items = {"word2vec": correct([static(tr_w)], [static(te_w)])}
    items.update({f"ELMo layer {j}": correct([tr_f[j]], [te_f[j]]) for j in range(3)})
    items["ELMo scalar mix"] = correct(tr_f, te_f)
    arms = {k: float(v.mean()) for k, v in items.items()}
    major = {w: max(set(tr_s[tr_w == w]), key=lambda s: np.sum(tr_s[tr_w == w] == s)) for w in set(tr_w)}
    majority = float(np.mean([major.get(w) == s for w, s in zip(te_w, te_s)]))
    rows = [{"representation": k, "sense accuracy": v} for k, v in arms.items()]
    return {"rows": rows, "test_tokens": len(yte),
            "arms": {k: {"sense accuracy": float(v)} for k, v in arms.items()},
            "items": {k: {"sense accuracy": v} for k, v in items.items()},
            "floors": {"chance": 0.5, "majority sense": majority}}
