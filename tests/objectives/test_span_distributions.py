"""The noises measured over thousands of samples against what their papers mean:

- T5 span corruption (Raffel et al. 2020, Sec. 3.1.4): round(0.15 L) noise tokens in
  round(noise / 3) spans, placed at random: the share of inputs whose last token is noise
  is what uniform placement gives (stars and bars: k spans among the N = L - noise kept
  tokens take k distinct gaps of the N + 1, so the gap after the last kept token is taken
  with chance k / (N + 1)), not 1 as in T5's reference interleaving, and the spans are
  spread over the input;
- BART text infilling (Lewis et al. 2020, Sec. 2.2): 30 % of the tokens removed, span
  lengths Poisson(3) (length 0: an inserted [MASK]), one [MASK] per span, spread evenly;
- MASS (Song et al. 2019, Sec. 2.1): one contiguous fragment of k = m/2 tokens, its start
  uniform over 0 .. m - k;
- GLM (Du et al. 2022, Sec. 2.1): spans of Poisson(3) lengths (zero-truncated, as GLM
  samples the weights of 1, 2, ...) until 15 % of the tokens are covered, spread evenly.

Tolerances are 5 binomial standard deviations around the independent formula."""
import math

import numpy as np

from minipt.objectives.bart_noise import infill, text_infilling
from minipt.objectives.permutation import glm_blank_infilling
from minipt.objectives.spans import pack_pieces, place_spans, random_partition
from minipt.objectives.t5_span import random_spans_noise_mask, span_corruption
from minipt.objectives.unified import mass

MASK = 1


def within(count, n, p):
    return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1e-9


def runs(mask):
    """(start, length) of each run of True in a boolean vector."""
    edges = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return list(zip(starts.tolist(), (ends - starts).tolist()))


def poisson_pmf(j, lam=3.0):
    return math.exp(-lam) * lam ** j / math.factorial(j)


# -- T5 ---------------------------------------------------------------------------------------------
def test_t5_spans_number_length_rate_and_place_at_the_recipes_piece_length():
    L, n = 64, 4000
    rng = np.random.default_rng(0)
    spans, noise, last, centres, first_half = [], 0, 0, [], 0
    for _ in range(n):
        mask = random_spans_noise_mask(L, rng)
        r = runs(mask)
        spans.append(len(r))
        noise += mask.sum()
        last += mask[-1]
        centres += [(s + (k - 1) / 2) / (L - 1) for s, k in r]
        first_half += mask[:L // 2].sum()
    lengths = noise / sum(spans)
    assert abs(np.mean(spans) - L * 0.15 / 3) < 0.25                     # 3 spans (3.2 by the rates)
    assert abs(noise / (n * L) - 0.15) < 0.01 and abs(lengths - 3) < 0.4   # 10 of 64 tokens, spans of 3.3
    k, kept = 3, L - 10
    assert within(last, n, k / (kept + 1))                                # 0.055: uniform, not 1.0
    assert abs(np.mean(centres) - 0.5) < 0.01 and within(first_half, noise, 0.5)


def test_t5_placement_is_uniform_against_rejection_sampling():
    """Every position's chance of being noise, against an independent sampler: starts
    drawn uniformly and redrawn until the spans are apart (uniform over placements)."""
    L, lengths, n = 16, np.array([3, 1, 2]), 8000
    rng = np.random.default_rng(1)
    ours, ref = np.zeros(L), np.zeros(L)
    for _ in range(n):
        for s, k in zip(place_spans(lengths, L, rng, min_gap=1), lengths):
            ours[s:s + k] += 1
    draws = rng.integers(0, L - lengths + 1, size=(40 * n, 3))          # (draws, spans) starts
    ends = draws + lengths
    apart = (draws[:, 1] >= ends[:, 0] + 1) & (draws[:, 2] >= ends[:, 1] + 1)   # in order, a token between
    accepted = draws[apart][:n]
    assert len(accepted) == n
    for s, k in zip(accepted.T, lengths):
        np.add.at(ref, (s[:, None] + np.arange(k)).ravel(), 1)
    p = (ours + ref) / (2 * n)
    assert np.all(np.abs(ours - ref) <= 5 * np.sqrt(2 * n * p * (1 - p)) + 1)


def test_random_partition_is_uniform_over_compositions():
    rng = np.random.default_rng(2)
    counts = {}
    for _ in range(6000):
        key = tuple(random_partition(5, 3, rng).tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6 and all(within(c, 6000, 1 / 6) for c in counts.values())   # C(4, 2) = 6


def test_t5_on_packed_toy_texts_several_spans_anywhere():
    """The issue's measurement: 4,000 pre-training inputs of the toy texts. Unpacked, each
    had one span, always on the last token; packed to 64 tokens, 3 spans placed anywhere."""
    texts = ["the cat sleeps .", "a big dog runs in the park .", "my old king reigns .",
             "the kind queen sees a red bird by the river ."]
    vocab = {w: i + 100 for i, w in enumerate(sorted({w for t in texts for w in t.split()}))}
    encode = lambda t: [vocab[w] for w in t.split()]
    rng = np.random.default_rng(3)
    sentinels = list(range(10, 30))
    n_spans, last = [], 0
    for _ in range(4000):
        x, y = span_corruption(pack_pieces(texts, 64, rng, encode), rng, sentinels)
        n_spans.append(int(np.isin(x, sentinels).sum()))
        last += x[-1] in sentinels
    assert np.all(np.array(n_spans) == 3) and within(last, 4000, 3 / 55)


def test_pack_pieces_joins_whole_texts_then_cuts():
    rng = np.random.default_rng(4)
    texts = ["a b", "c d e", "f"]
    enc = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}
    for _ in range(50):
        ids = pack_pieces(texts, 7, rng, lambda t: [enc[w] for w in t.split()]).tolist()
        assert len(ids) == 7
        i = 0
        while i < 7:                                  # each text whole, the last one maybe cut
            head = next(t for t in ([1, 2], [3, 4, 5], [6]) if ids[i:i + len(t)] == t[:7 - i])
            i += len(head)


# -- BART -------------------------------------------------------------------------------------------
def test_bart_infilling_rate_poisson_lengths_inserts_and_places():
    L, n = 1000, 120
    rng = np.random.default_rng(5)
    ids = np.arange(100, 100 + L)
    lengths, inserts, removed, last, first_half = [], 0, 0, 0, 0
    for _ in range(n):
        out = text_infilling(ids, rng, MASK, mask_ratio=0.3)
        gone = ~np.isin(ids, out)
        removed += gone.sum()
        r = runs(gone)
        lengths += [k for _, k in r]
        last += gone[-1]
        first_half += gone[:L // 2].sum()
        masks = int((out == MASK).sum())
        assert masks >= len(r)                                         # one [MASK] per removed span
        inserts += masks - len(r)                                      # the rest: length-0 spans
    assert removed == n * 300                                          # 30 %, exactly
    total = len(lengths) + inserts
    assert within(inserts, total, poisson_pmf(0))                      # e^-3 = 0.050 of the spans
    for j in range(1, 8):                                              # Poisson(3) lengths
        assert within(lengths.count(j), total, poisson_pmf(j)), j
    assert within(first_half, removed, 0.5)
    k, kept = len(lengths) / n, L - 300                                # spans apart: gap k / (kept + 1)
    assert within(last, n, k / (kept + 1))


def test_infill_layout_exactly():
    ids = np.arange(100, 110)
    M = MASK
    assert infill(ids, [2], [3], [], M).tolist() == [100, 101, M, 105, 106, 107, 108, 109]
    assert infill(ids, [0, 6], [2, 2], [], M).tolist() == [M, 102, 103, 104, 105, M, 108, 109]
    assert infill(ids, [7], [1], [4], M).tolist() == [100, 101, 102, 103, M, 104, 105, 106, M, 108, 109]
    assert infill(ids, [8], [2], [9], M).tolist() == [100, 101, 102, 103, 104, 105, 106, 107, M, M]
    assert infill(ids, [3, 6], [1, 1], [5, 5], M).tolist() == \
        [100, 101, 102, M, 104, M, M, 105, M, 107, 108, 109]


# -- MASS -------------------------------------------------------------------------------------------
def test_mass_one_fragment_of_half_with_a_uniform_start():
    m, n = 40, 21000
    rng = np.random.default_rng(6)
    ids = np.arange(100, 100 + m)
    starts = np.zeros(m, int)
    for _ in range(n):
        enc, dec, frag, start = mass(ids, rng, MASK)
        masked = np.flatnonzero(enc == MASK)
        assert len(masked) == 20 and np.all(np.diff(masked) == 1) and masked[0] == start
        assert frag.tolist() == ids[start:start + 20].tolist() and dec.tolist() == [MASK, *frag[:-1]]
        starts[start] += 1
    assert starts[21:].sum() == 0 and all(within(c, n, 1 / 21) for c in starts[:21])


# -- GLM --------------------------------------------------------------------------------------------
def test_glm_blanks_rate_lengths_and_places():
    T, n = 400, 300
    rng = np.random.default_rng(7)
    ids = np.arange(100, 100 + T)
    lengths, covered, first_half, overshoot = [], 0, 0, []
    for _ in range(n):
        ex = glm_blank_infilling(ids, rng, mask_id=MASK, start_id=2, end_id=3)
        gone = ~np.isin(ids, ex["ids"][:ex["n_a"]])
        r = runs(gone)
        assert (ex["ids"][:ex["n_a"]] == MASK).sum() == len(r)         # one [MASK] per blank
        lengths += [k for _, k in r]
        covered += gone.sum()
        overshoot.append(gone.sum() - 60)
        first_half += gone[:T // 2].sum()
    assert min(overshoot) >= 0 and np.mean(overshoot) < 3              # at least 15 %, just over
    assert abs(covered / (n * T) - 0.15) < 0.01
    z = 1 - poisson_pmf(0)
    for j in range(1, 8):                                              # zero-truncated Poisson(3)
        assert within(lengths.count(j), len(lengths), poisson_pmf(j) / z), j
    assert within(first_half, covered, 0.5)
