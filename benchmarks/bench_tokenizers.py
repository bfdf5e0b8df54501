"""BPE training speed: incremental pair counts against a full recount per merge.

Generates a deterministic text (words drawn from a Zipfian vocabulary of random
letter strings, fixed seed), pre-splits it as ``BPETokenizer.fit`` does (whitespace
words + ``</w>``), then learns the same number of merges with

* ``learn_merges``       -- pair counts updated only where a merge touched them, heap;
* ``learn_merges_naive`` -- every pair recounted over every word before each merge,

checks that both produce the same merges, and times them in alternating rounds
(benchmarks/harness.py): merges/s of each (median round) and the median per-round
speed-up with min..max. Usage: ``python benchmarks/bench_tokenizers.py [--kb 300] [--merges 300]``.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.tokenizers.bpe import END_OF_WORD, learn_merges, learn_merges_naive  # noqa: E402

LETTERS = list("abcdefghijklmnopqrstuvwxyz")
# rough English letter frequencies, so that frequent pairs exist as in real text
LETTER_P = np.array([8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.2, 0.8, 4.0, 2.4,
                     6.7, 7.5, 1.9, 0.1, 6.0, 6.3, 9.1, 2.8, 1.0, 2.4, 0.2, 2.0, 0.1])


def zipf_text(n_bytes: int, n_types: int = 20_000, exponent: float = 1.1, seed: int = 0) -> str:
    """About ``n_bytes`` of text: words from a Zipfian vocabulary, 12 words per line."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 11, size=n_types)
    p_letter = LETTER_P / LETTER_P.sum()
    types = ["".join(rng.choice(LETTERS, size=n, p=p_letter)) for n in lengths]
    p = 1.0 / np.arange(1, n_types + 1) ** exponent
    n_words = n_bytes // 7
    draws = rng.choice(n_types, size=n_words, p=p / p.sum())
    words = [types[i] for i in draws]
    lines = [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines)[:n_bytes]


def word_counts_of(text: str) -> dict[tuple[str, ...], int]:
    return {tuple(w) + (END_OF_WORD,): c for w, c in Counter(text.split()).items()}


def run(quick: bool = True, kb: int | None = None, merges: int | None = None, rounds: int = 3,
        seed: int = 0) -> list[dict]:
    kb = kb or (100 if quick else 300)
    merges = merges or (150 if quick else 300)
    text = zipf_text(kb * 1000, seed=seed)
    wc = word_counts_of(text)
    n_symbols = sum(len(w) for w in wc)
    print(f"text: {len(text) / 1000:.0f} KB, {sum(wc.values())} words, {len(wc)} distinct "
          f"({n_symbols} symbols), {merges} merges, {rounds} alternating rounds")
    m_inc, m_naive = learn_merges(wc, merges), learn_merges_naive(wc, merges)
    if m_inc != m_naive:
        first = next(i for i, (a, b) in enumerate(zip(m_inc, m_naive)) if a != b)
        raise SystemExit(f"merges differ at step {first}: {m_inc[first]} vs {m_naive[first]}")
    n = len(m_inc)
    print(f"same {n} merges (first: {' '.join(a + '+' + b for a, b in m_inc[:5])} ...)")
    cmp = harness.alternate(lambda: learn_merges(wc, merges), lambda: learn_merges_naive(wc, merges),
                            rounds=rounds, calls=1, warmup=0)
    return [harness.row("tokenizers", f"BPE {n} merges, {kb} KB", "increm.", "naive", cmp,
                        merges_per_s=n / cmp.a_median, naive_merges_per_s=n / cmp.b_median)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", type=int, default=300, help="size of the generated text in KB")
    ap.add_argument("--merges", type=int, default=300, help="merges to learn")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    (r,) = run(False, args.kb, args.merges, args.rounds, args.seed)
    print(f"{'trainer':<34} {'seconds':>9} {'merges/s':>10}")
    print(f"{'incremental (learn_merges)':<34} {r['a_ms'] / 1e3:9.3f} {r['merges_per_s']:10.0f}")
    print(f"{'full recount (learn_merges_naive)':<34} {r['b_ms'] / 1e3:9.3f} {r['naive_merges_per_s']:10.1f}")
    print(f"speed-up: {r['ratio']:.1f}x (per-round {r['ratio_min']:.1f}..{r['ratio_max']:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
