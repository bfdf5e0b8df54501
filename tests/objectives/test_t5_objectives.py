"""T5's study objectives: each input/target has the stated corruption rate and span length
on average, and the target is what T5 says it is."""
import numpy as np
import pytest

from minipt.objectives.t5_objectives import (
    bert_style,
    deshuffling,
    iid_sentinel_masking,
    prefix_lm_pair,
)
from minipt.objectives.t5_span import sentinel_corruption, span_corruption

T, MASK, V = 1000, 1, 200
SENT = list(range(1000, 1600))                      # sentinel ids, outside the text's ids


def _ids(seed=0, n=T):
    return np.random.default_rng(seed).integers(10, V, size=n)


def _runs(mask):
    """Lengths of the runs of True in a boolean array."""
    edges = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


def test_bert_style_masks_the_rate_and_targets_the_whole_input():
    ids = _ids()
    x, y = bert_style(ids, np.random.default_rng(1), mask_id=MASK, vocab_size=V, rate=0.25, special_ids=(0, MASK))
    np.testing.assert_array_equal(y, ids)                                   # the whole input reconstructed
    assert abs(np.mean(x == MASK) - 0.25 * 0.8) < 0.04                      # 80 % of the chosen become [MASK]
    assert abs(np.mean(x != ids) - 0.25 * 0.9) < 0.04                       # 10 % random (rarely the same id)


def test_deshuffling_permutes_and_targets_the_order():
    ids = _ids(n=50)
    x, y = deshuffling(ids, np.random.default_rng(0))
    np.testing.assert_array_equal(y, ids)
    np.testing.assert_array_equal(np.sort(x), np.sort(ids))
    assert np.mean(x != ids) > 0.8
    rng = np.random.default_rng(1)
    first = [deshuffling(ids, rng)[0][0] for _ in range(300)]                  # a uniform permutation:
    assert len(set(first)) > 30                                               # any token may come first


def test_prefix_lm_pair_splits_uniformly():
    ids = _ids(n=20)
    rng = np.random.default_rng(0)
    ks = []
    for _ in range(400):
        x, y = prefix_lm_pair(ids, rng)
        np.testing.assert_array_equal(np.concatenate([x, y]), ids)
        ks.append(len(x))
    assert min(ks) == 1 and max(ks) == 19 and abs(np.mean(ks) - 10) < 0.6


@pytest.mark.parametrize("rate", [0.10, 0.15, 0.25, 0.50])
def test_iid_sentinels_rate_and_run_length(rate):
    ids = _ids()
    x, y = iid_sentinel_masking(ids, np.random.default_rng(2), SENT, rate=rate)
    dropped = np.isin(y, SENT, invert=True)                                 # the target's text tokens
    assert abs(dropped.sum() / T - rate) < 0.035
    assert len(x) + dropped.sum() - np.isin(x, SENT).sum() == T             # every token kept or in the target
    n_spans = np.isin(x, SENT).sum()
    assert abs(dropped.sum() / n_spans - 1 / (1 - rate)) < 0.15             # i.i.d.: runs ~ geometric


@pytest.mark.parametrize("span", [2, 3, 5, 10])
def test_span_corruption_rate_and_mean_span(span):
    rng = np.random.default_rng(3)
    lengths, noise = [], 0
    for _ in range(20):
        x, y = span_corruption(_ids(n=200), rng, SENT, noise_density=0.15, mean_span=span)
        text = np.isin(y, SENT, invert=True)
        lengths += _runs(text).tolist()
        noise += text.sum()
    assert noise == 20 * 30                                                 # 15 % of 200, exactly
    assert abs(np.mean(lengths) - span) < 0.25 * span


def test_sentinel_corruption_layout():
    x, y = sentinel_corruption(np.array([5, 6, 7, 8, 9]), np.array([0, 1, 1, 0, 1], bool), SENT)
    assert x.tolist() == [5, SENT[0], 8, SENT[1]]
    assert y.tolist() == [SENT[0], 6, 7, SENT[1], 9, SENT[2]]


def test_bad_input_is_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        prefix_lm_pair([4], rng)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        iid_sentinel_masking([4], rng, SENT)
    with pytest.raises(ValueError, match="rate"):
        iid_sentinel_masking(_ids(n=5), rng, SENT, rate=1.5)
    with pytest.raises(ValueError, match="noise mask shape"):
        sentinel_corruption(np.array([1, 2]), np.array([True]), SENT)
    with pytest.raises(ValueError, match="sentinel ids"):
        iid_sentinel_masking(_ids(), rng, SENT[:3], rate=0.5)
