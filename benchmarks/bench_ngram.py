"""Trigram Kneser-Ney: fit + perplexity, minipt's vectorised counts against a plain-Python
dictionary reference and NLTK's ``KneserNeyInterpolated`` (when NLTK is installed).

Corpus: about a million words of the toy language (``--words``), split into sentences at
the full stop, each padded as NLTK's ``padded_everygram_pipeline`` does (n-1 ``<s>`` and
n-1 ``</s>``). minipt runs with ``nltk=True`` (NLTK's conventions, discount 0.1); the
perplexity of a sample of held-out sentences (``--sample``; NLTK's scorer walks every
context of the next order for each score, so a sample) must equal NLTK's to 1e-9, and the
dictionary reference's too. Sides alternate in rounds (A B A B ...); ratios are per-round
t_other / t_minipt, median and min..max. Usage:
``python benchmarks/bench_ngram.py [--words 1000000] [--sample 200] [--rounds 3]``;
``run(quick=True)`` (run_all.py) uses 50,000 words and 50 sentences.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.data.hmm_language import HMMLanguage  # noqa: E402
from minipt.models.classic.ngram import NGramLM, NGramVocab  # noqa: E402
from minipt.models.protocol import IGNORE  # noqa: E402

ORDER, DISCOUNT = 3, 0.1


def toy_sentences(n_words: int, seed: int) -> list[list[str]]:
    words = HMMLanguage.build().sample_words(n_words, np.random.default_rng(seed))
    out, cur = [], []
    for w in words:
        if w == "\n":
            continue
        cur.append(w)
        if w == ".":
            out.append(cur)
            cur = []
    return out


def pad(sentence: list[str]) -> list[str]:
    return ["<s>"] * (ORDER - 1) + sentence + ["</s>"] * (ORDER - 1)


# -- side A: minipt ---------------------------------------------------------------------
def minipt_fit_ppl(train: list[list[str]], test: list[list[str]]) -> float:
    vocab = NGramVocab(train)
    model = NGramLM(len(vocab), order=ORDER, smoothing="kn", discount=DISCOUNT, nltk=True)
    ids = vocab.encode([w for s in train for w in pad(s)])                  # one lookup pass
    model.fit(np.split(ids, np.cumsum([len(s) + 2 * (ORDER - 1) for s in train])[:-1]))
    stream = vocab.encode([w for s in test for w in pad(s)])
    idx, targets = stream[:-1], stream[1:].copy()
    targets[targets == vocab.index["<s>"]] = IGNORE          # predict the words and both </s>
    n = int((targets != IGNORE).sum())
    return math.exp(-model.log_prob(idx[None], targets[None]) / n)


# -- side B: plain-Python dictionaries, the same formulas -------------------------------------
def dict_fit_ppl(train: list[list[str]], test: list[list[str]]) -> float:
    counts = {m: Counter() for m in range(1, ORDER + 1)}
    for s in train:
        p = pad(s)
        for m in range(1, ORDER + 1):
            for i in range(len(p) - m + 1):
                counts[m][tuple(p[i:i + m])] += 1
    total, types = defaultdict(Counter), defaultdict(Counter)       # raw c(h), N1+(h .)
    cont, cont_total = defaultdict(Counter), defaultdict(Counter)   # N1+(. g), sum_w N1+(. h w)
    for m in range(1, ORDER + 1):
        for g, c in counts[m].items():
            total[m][g[:-1]] += c
            types[m][g[:-1]] += 1
            if m > 1:
                cont[m - 1][g[1:]] += 1
                cont_total[m - 1][g[1:-1]] += 1

    def score(w, h):
        if not h:
            return cont[1][(w,)] / cont_total[1][()]
        m = len(h) + 1
        if not total[m][h]:
            return score(w, h[1:])
        if m == ORDER:
            alpha = max(counts[m][h + (w,)] - DISCOUNT, 0) / total[m][h]
            gamma = DISCOUNT * types[m][h] / total[m][h]
        else:
            alpha = max(cont[m][h + (w,)] - DISCOUNT, 0) / cont_total[m][h]
            gamma = DISCOUNT * types[m][h] / cont_total[m][h]
        return alpha + gamma * score(w, h[1:])

    logs = [math.log(score(p[i], tuple(p[i - ORDER + 1:i])))
            for s in test for p in [pad(s)] for i in range(ORDER - 1, len(p))]
    return math.exp(-sum(logs) / len(logs))


# -- side C: NLTK --------------------------------------------------------------------------
def nltk_fit_ppl(train: list[list[str]], test: list[list[str]]) -> float:
    from nltk.lm import KneserNeyInterpolated
    from nltk.lm.preprocessing import padded_everygram_pipeline
    from nltk.util import ngrams
    grams, words = padded_everygram_pipeline(ORDER, train)
    lm = KneserNeyInterpolated(ORDER, discount=DISCOUNT)
    lm.fit(grams, words)
    return lm.perplexity([g for s in test for g in ngrams(pad(s), ORDER)])


class PerplexityMismatch(RuntimeError):
    """A side's perplexity is not minipt's: its timing would compare different work."""


def run(quick: bool = True, words: int | None = None, sample: int | None = None, rounds: int = 3) -> list[dict]:
    """One row per reference (dict, NLTK): fit + perplexity, minipt against it in
    alternating rounds; NLTK's row has b None when NLTK is not installed. The perplexities
    are checked first: any side more than 1e-9 (relative) from minipt's stops the run."""
    words = words or (50_000 if quick else 1_000_000)
    sample = sample or (50 if quick else 200)
    train = toy_sentences(words, seed=0)
    test = toy_sentences(20 * sample, seed=1)[:sample]
    n_words = sum(len(s) for s in train)
    print(f"trigram KN (NLTK conventions, D = {DISCOUNT}): {len(train):,} sentences, {n_words:,} words; "
          f"perplexity of {len(test)} held-out sentences")
    ppl = {"minipt": minipt_fit_ppl(train, test), "dict": dict_fit_ppl(train, test)}
    try:
        import nltk
    except ImportError:
        nltk = None
        print("NLTK is not installed (pip install '.[bench]'): its side is skipped")
    if nltk is not None:
        t0 = time.perf_counter()
        ppl["nltk"] = nltk_fit_ppl(train, test)
        print(f"NLTK {nltk.__version__}: one fit + perplexity took {time.perf_counter() - t0:.1f} s")
    for name, p in ppl.items():
        rel = abs(p - ppl["minipt"]) / ppl["minipt"]
        print(f"  perplexity {name:<7} {p:.12f}   relative difference from minipt {rel:.1e}")
        if rel > 1e-9:
            raise PerplexityMismatch(f"MISMATCH: {name} differs from minipt by more than 1e-9 ({rel:.1e})")
    case = f"trigram KN fit+ppl {n_words:,} words"
    rows, a_times = [], []
    for name, fn in (("dict", dict_fit_ppl), ("nltk", nltk_fit_ppl)):
        if name not in ppl:                        # minipt's times from the dict rounds, no reference
            rows.append(harness.row("ngram", case, "minipt", None, harness.Comparison(a_times, []),
                                    skipped=f"{name} not installed"))
            continue
        c = harness.alternate(lambda: minipt_fit_ppl(train, test), lambda fn=fn: fn(train, test), rounds=rounds,
                              calls=1, warmup=0 if name == "nltk" else 1)
        a_times = c.a
        rows.append(harness.row("ngram", case, "minipt", name, c, perplexity=ppl["minipt"],
                                ppl_rel_diff=abs(ppl[name] - ppl["minipt"]) / ppl["minipt"]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=1_000_000)
    ap.add_argument("--sample", type=int, default=200, help="held-out sentences scored")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    try:
        rows = run(False, args.words, args.sample, args.rounds)
    except PerplexityMismatch as e:
        print(f"  {e}")
        return 1
    for r in rows:
        if r["b"] is not None:
            print(f"fit + perplexity: minipt {r['a_ms'] / 1e3:.2f} s, {r['b']} {r['b_ms'] / 1e3:.2f} s; minipt is "
                  f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}..{r['ratio_max']:.2f}) faster ({args.rounds} "
                  f"alternating rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
