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
``python benchmarks/bench_word2vec.py [--words 1000000] [--epochs 1] [--rounds 3] [--arch cbow]``;
``run(quick=True)`` (run_all.py) uses 100,000 words and 2,000 for the twin.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.data.hmm_language import HMMLanguage  # noqa: E402
from minipt.data.toy_vectors import analogy_accuracy, category_gap  # noqa: E402


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


def quality(vectors, vocab, side: str) -> dict:
    acc, asked = analogy_accuracy(vectors, vocab)
    return {f"{side}_analogies": acc, "analogies_asked": asked, f"{side}_gap": category_gap(vectors, vocab)}


def quality_text(r: dict, side: str) -> str:
    return f"analogies {r[side + '_analogies']:.2f} of {r['analogies_asked']}, category gap {r[side + '_gap']:.2f}"


def run(quick: bool = True, words: int | None = None, twin_words: int | None = None, epochs: int = 1,
        rounds: int = 3, arch: str = "skipgram") -> list[dict]:
    """Rows: the Numba kernel against its NumPy twin (on ``twin_words``), then minipt
    against gensim on 1 and 2 workers (b None, minipt alone, when gensim is missing).
    Times are ms per training run; extras give words/s and the vectors' quality."""
    words = words or (100_000 if quick else 1_000_000)
    twin_words = twin_words or (2_000 if quick else 20_000)
    docs, vocab = toy_documents(words)
    n = sum(len(d) for d in docs) * epochs
    print(f"word2vec {arch} + negative sampling, {settings(arch)}, {n // epochs:,} words x "
          f"{epochs} epoch(s), vocabulary {len(vocab)}, {os.cpu_count()} CPUs")

    small, _ = toy_documents(twin_words, seed=1)
    fast, _ = minipt_trainer(small, vocab, arch, 1, True)
    twin, _ = minipt_trainer(small, vocab, arch, 1, False)
    c = harness.alternate(fast, twin, rounds=rounds, calls=1, warmup=1)
    n_small = sum(len(d) for d in small)
    rows = [harness.row("word2vec", f"{arch} {n_small:,} words, 1 ep", "kernel", "twin", c,
                        words=n_small, words_per_s=n_small / c.a_median, twin_words_per_s=n_small / c.b_median)]

    mine, mine_out = minipt_trainer(docs, vocab, arch, epochs, True)
    case = f"{arch} {n // epochs:,} words, {epochs} ep"
    try:
        import gensim
    except ImportError:
        c = harness.alternate(mine, None, rounds=rounds, calls=1, warmup=1)
        return rows + [harness.row("word2vec", case, "minipt", None, c, words_per_s=n / c.a_median,
                                   skipped="gensim not installed")]
    for workers in (1, 2):
        theirs, their_out = gensim_trainer(docs, vocab, arch, epochs, workers)
        c = harness.alternate(mine, theirs, rounds=rounds, calls=1, warmup=1)
        rows.append(harness.row("word2vec", f"{case}, {workers} wkr", "minipt",
                                "gensim", c, words_per_s=n / c.a_median,
                                gensim_words_per_s=n / c.b_median, gensim_version=gensim.__version__,
                                workers=workers, **{**quality(mine_out["vectors"], vocab, "minipt"),
                                                    **quality(their_out["vectors"], vocab, "gensim")}))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=1_000_000)
    ap.add_argument("--twin-words", type=int, default=20_000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--arch", choices=("skipgram", "cbow"), default="skipgram")
    args = ap.parse_args(argv)
    kern, *rest = run(False, args.words, args.twin_words, args.epochs, args.rounds, args.arch)
    print(f"Numba kernel vs NumPy twin ({kern['words']:,} words): {kern['words_per_s']:,.0f} vs "
          f"{kern['twin_words_per_s']:,.0f} words/s; the kernel is {summary(kern)} faster")
    for r in rest:
        if r["b"] is None:
            print(f"minipt: {r['words_per_s']:,.0f} words/s; gensim is not installed (pip install '.[bench]'): "
                  f"skipped")
            continue
        w = r["workers"]
        print(f"minipt (1 thread) {r['words_per_s']:,.0f} words/s vs gensim {r['gensim_version']} ({w} "
              f"worker{'s' if w > 1 else ''}) {r['gensim_words_per_s']:,.0f} words/s: minipt is {summary(r)} "
              f"as fast")
        print(f"  quality: minipt {quality_text(r, 'minipt')}; gensim {quality_text(r, 'gensim')}")
    return 0


def summary(r: dict) -> str:
    return f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}..{r['ratio_max']:.2f})"


if __name__ == "__main__":
    raise SystemExit(main())
