"""Sennrich BPE: the hand-worked example, incremental == naive, counts == recount."""
import numpy as np
import pytest

from minipt.tokenizers import BPETokenizer, learn_merges, learn_merges_naive
from minipt.tokenizers.bpe import END_OF_WORD, apply_merges, count_pairs, merge_pair

# Sennrich et al. 2016, Algorithm 1: {low: 5, lower: 2, newest: 6, widest: 3}
SENNRICH = {tuple("low") + ("</w>",): 5, tuple("lower") + ("</w>",): 2,
            tuple("newest") + ("</w>",): 6, tuple("widest") + ("</w>",): 3}
# Worked by hand (count; ties -> code-point order of (left, right); '<' < letters):
#  1 e s 9 (ties s t, t </w>)   2 es t 9 (tie t </w>)   3 est </w> 9
#  4 l o 7 (tie o w)            5 lo w 7
#  6 e w 6 (ties n e, w est</w>)                        7 ew est</w> 6 ("ew" < "n")
#  8 n ewest</w> 6              9 low </w> 5
# 10 d est</w> 3 (ties i d, w i)
SENNRICH_MERGES = [("e", "s"), ("es", "t"), ("est", "</w>"), ("l", "o"), ("lo", "w"),
                   ("e", "w"), ("ew", "est</w>"), ("n", "ewest</w>"), ("low", "</w>"),
                   ("d", "est</w>")]


def zipf_word_counts(seed, n_types=60, n_tokens=3000, alphabet="abcde"):
    rng = np.random.default_rng(seed)
    types = {"".join(rng.choice(list(alphabet), size=rng.integers(1, 8))) for _ in range(n_types)}
    types = sorted(types)
    p = 1.0 / np.arange(1, len(types) + 1)
    draws = rng.choice(len(types), size=n_tokens, p=p / p.sum())
    counts = np.bincount(draws, minlength=len(types))
    return {tuple(w) + (END_OF_WORD,): int(c) for w, c in zip(types, counts) if c > 0}


def test_sennrich_example_in_hand_worked_order():
    assert learn_merges(SENNRICH, 10) == SENNRICH_MERGES
    assert learn_merges_naive(SENNRICH, 10) == SENNRICH_MERGES


def test_tokenizer_on_sennrich_corpus():
    text = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)
    tok = BPETokenizer().fit(text, num_merges=10)
    assert tok.merges == SENNRICH_MERGES
    pieces = [tok.id_to_token(i) for i in tok.encode("lowest newer")]
    assert pieces == ["low", "est</w>", "n", "ew", "e", "r", "</w>"]
    assert tok.decode(tok.encode("lowest   newer\n")) == "lowest newer"


@pytest.mark.parametrize("seed", range(5))
def test_incremental_equals_naive(seed):
    wc = zipf_word_counts(seed)
    for mpc in (1, 2):
        assert learn_merges(wc, 80, min_pair_count=mpc) == learn_merges_naive(wc, 80, min_pair_count=mpc)


def test_incremental_counts_equal_full_recount_after_every_merge():
    wc = zipf_word_counts(7, alphabet="abc")        # few letters: many repeated pairs like a a a
    seen = []

    def check(stats, merge):
        full = count_pairs(stats.words, stats.freqs)
        assert stats.pair_counts == full
        where = {}
        for w, word in enumerate(stats.words):
            for p in zip(word, word[1:]):
                where.setdefault(p, set()).add(w)
        assert stats.where == where
        sym = {}
        for word, f in zip(stats.words, stats.freqs):
            for s in word:
                sym[s] = sym.get(s, 0) + f
        assert stats.symbol_counts == sym
        seen.append(merge)

    merges = learn_merges(wc, 60, min_pair_count=1, on_merge=check)
    assert len(seen) == len(merges) > 30


def test_encoding_reproduces_training_segmentation():
    wc = zipf_word_counts(3)
    final = {}

    def keep(stats, merge):
        final["words"] = [[stats.symbols[s] for s in w] for w in stats.words]
        final["order"] = sorted(wc)

    merges = learn_merges(wc, 50, on_merge=keep)
    ranks = {m: r for r, m in enumerate(merges)}
    for word, trained in zip(final["order"], final["words"]):
        assert apply_merges(list(word), ranks) == trained


def test_merge_pair_left_to_right_non_overlapping():
    assert merge_pair(list("aaa"), "a", "a", "X") == ["X", "a"]
    assert merge_pair(list("aaaa"), "a", "a", "X") == ["X", "X"]
    assert merge_pair(list("abab"), "a", "b", "X") == ["X", "X"]


def test_no_second_route_to_a_token_and_reserved_strings():
    # "ab"+"c" makes "abc" first; "a"+"bc" would make the same string again -> not merged
    wc = {("ab", "c"): 5, ("a", "bc"): 3}
    assert learn_merges(wc, 5) == [("ab", "c")] == learn_merges_naive(wc, 5)
    assert learn_merges({("<s", ">"): 9, ("x", "y"): 2}, 5, reserved=["<s>"]) == [("x", "y")]


def test_min_pair_count_stops_training():
    assert learn_merges(SENNRICH, 100, min_pair_count=7) == SENNRICH_MERGES[:5]
    rare = {**SENNRICH, ("x", "y", "</w>"): 1}
    assert ("x", "y") in learn_merges(rare, 100, min_pair_count=1)
    assert ("x", "y") not in learn_merges(rare, 100)


def test_unknown_characters():
    tok = BPETokenizer().fit("low lower lowest", 5)
    assert tok.merges == [("l", "o"), ("lo", "w"), ("low", "e")]   # other pairs occur once
    assert [tok.id_to_token(i) for i in tok.encode("lqw lowe")] == \
           ["l", "<unk>", "w", "</w>", "lowe", "</w>"]
    strict = BPETokenizer(unk_token=None).fit("low lower lowest", 5)
    with pytest.raises(ValueError, match=r"character 'q' \(U\+0071\) at position 5"):
        strict.encode("low lqw")


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_merges must be an integer >= 0, got -1"):
        BPETokenizer().fit("a b", -1)
    with pytest.raises(ValueError, match="min_pair_count must be an integer >= 1, got 0"):
        learn_merges(SENNRICH, 3, min_pair_count=0)
    with pytest.raises(ValueError, match="no words"):
        learn_merges({}, 3)
    with pytest.raises(ValueError, match="no word"):
        BPETokenizer().fit(" \n ", 3)
    with pytest.raises(ValueError, match="positive int counts"):
        learn_merges({("a", "b"): 0}, 3)
