"""word2vec training speed in words/s: minipt's Numba kernel against its NumPy twin, and
against gensim's ``Word2Vec`` (when installed) on 1 and 2 worker threads, same settings.

Corpus: the toy language (``--words``, split into its documents). Settings for every side:
``--arch`` (skip-gram by default) with negative sampling (5), window 5, dimension 32,
subsampling 1e-3, learning rate 0.025 decaying linearly (0.05 for CBOW), ``--epochs``.
gensim's vocabulary is built before timing and minipt's counts are given, so both time the
training passes only (subsampling, windows, negative draws and the updates). words/s =
corpus words x epochs / seconds. Sides alternate in rounds (A B A B ...); ratios are
per-round t_other / t_minipt. Quality is reported beside speed: analogy accuracy (32
questions) and category gap of the vectors each side trained. The twin (a Python loop per
example) is timed on ``--twin-words`` only. Usage:
``python benchmarks/bench_word2vec.py [--words 1000000] [--epochs 1] [--rounds 3] [--arch cbow]``.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from harness import alternate

from minipt.data.hmm_language import HMMLanguage
from minipt.data.toy_vectors import analogy_accuracy, category_gap


def toy_documents(n_words: int, seed: int = 0) -> tuple[list[list[str]], list[str]]:
    words = HMMLanguage.build().sample_words(n_words, np.random.default_rng(seed))
    docs, cur = [], []
    for w in words:
        if w == "\n":
            docs.append(cur)
            cur = []
        else:
            cur.append(w)
    return docs, sorted({w for d in docs for w in d})


def settings(arch: str) -> dict:
    return dict(dim=32, window=5, negative=5, sample=1e-3, alpha=0.05 if arch == "cbow" else 0.025)


def minipt_trainer(docs, vocab, arch: str, epochs: int, numba_on: bool):
    from minipt import kernels
    from minipt.models.classic.word2vec import Word2Vec
    ix = {w: i for i, w in enumerate(vocab)}
    seqs = [np.array([ix[w] for w in d], np.int64) for d in docs]
    counts = np.bincount(np.concatenate(seqs), minlength=len(vocab))
    out = {}

    def run():
        was = kernels.ENABLED
        kernels.ENABLED = numba_on
        try:
            model = Word2Vec(len(vocab), arch=arch, output="neg", counts=counts, rng=np.random.default_rng(0),
                             **settings(arch))
            model.fit(seqs, epochs=epochs, rng=np.random.default_rng(1))
        finally:
            kernels.ENABLED = was
        out["vectors"] = model.vectors()
    return run, out


def gensim_trainer(docs, vocab, arch: str, epochs: int, workers: int):
    from gensim.models import Word2Vec as GensimW2V
    s = settings(arch)
    out = {}

    def run():
        model = GensimW2V(vector_size=s["dim"], window=s["window"], negative=s["negative"], sample=s["sample"],
                          alpha=s["alpha"], min_alpha=s["alpha"] * 1e-4, sg=int(arch == "skipgram"), hs=0,
                          min_count=1, workers=workers, seed=0)
        model.build_vocab(docs)
        model.train(docs, total_examples=len(docs), epochs=epochs)
        out["vectors"] = np.stack([model.wv[w] for w in vocab])
    return run, out


def quality(vectors, vocab) -> str:
    acc, asked = analogy_accuracy(vectors, vocab)
    return f"analogies {acc:.2f} of {asked}, category gap {category_gap(vectors, vocab):.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=1_000_000)
    ap.add_argument("--twin-words", type=int, default=20_000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--arch", choices=("skipgram", "cbow"), default="skipgram")
    args = ap.parse_args(argv)
    docs, vocab = toy_documents(args.words)
    n = sum(len(d) for d in docs) * args.epochs
    print(f"word2vec {args.arch} + negative sampling, {settings(args.arch)}, {n // args.epochs:,} words x "
          f"{args.epochs} epoch(s), vocabulary {len(vocab)}, {os.cpu_count()} CPUs")

    small, _ = toy_documents(args.twin_words, seed=1)
    fast, _ = minipt_trainer(small, vocab, args.arch, 1, True)
    twin, _ = minipt_trainer(small, vocab, args.arch, 1, False)
    c = alternate(fast, twin, rounds=args.rounds, calls=1, warmup=1)
    n_small = sum(len(d) for d in small)
    print(f"Numba kernel vs NumPy twin ({n_small:,} words): {n_small / c.a_median:,.0f} vs "
          f"{n_small / c.b_median:,.0f} words/s; the kernel is {c.summary()} faster")

    mine, mine_out = minipt_trainer(docs, vocab, args.arch, args.epochs, True)
    try:
        import gensim
    except ImportError:
        t = alternate(mine, mine, rounds=1, calls=1, warmup=1).a_median
        print(f"minipt: {n / t:,.0f} words/s; gensim is not installed (pip install '.[bench]'): skipped")
        return 0
    for workers in (1, 2):
        theirs, their_out = gensim_trainer(docs, vocab, args.arch, args.epochs, workers)
        c = alternate(mine, theirs, rounds=args.rounds, calls=1, warmup=1)
        print(f"minipt (1 thread) {n / c.a_median:,.0f} words/s vs gensim {gensim.__version__} ({workers} "
              f"worker{'s' if workers > 1 else ''}) {n / c.b_median:,.0f} words/s: minipt is {c.summary()} "
              f"as fast")
        print(f"  quality: minipt {quality(mine_out['vectors'], vocab)}; gensim {quality(their_out['vectors'], vocab)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
