"""ROC AUC (rank form) against a brute-force count over every positive-negative pair, and
the base-rate binary entropy against its formula."""
import numpy as np
import pytest

from minipt.tasks.metrics import binary_entropy, roc_auc


def brute_auc(scores, labels) -> float:
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(6))
def test_rank_auc_equals_the_pairwise_count_with_and_without_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    labels = (rng.random(n) < rng.uniform(0.1, 0.9)).astype(int)
    labels[:2] = [0, 1]
    scores = rng.standard_normal(n) + labels * rng.uniform(0, 2)
    if seed % 2:                                            # many ties across and within the classes
        scores = np.round(scores)
    assert roc_auc(scores, labels) == pytest.approx(brute_auc(scores, labels), abs=1e-12)


def test_auc_fixed_points():
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert roc_auc([3.0] * 5, [0, 1, 0, 1, 1]) == 0.5                 # a constant score: chance
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75         # the textbook example


def test_auc_rejects_bad_input():
    with pytest.raises(ValueError, match="both classes"):
        roc_auc([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="0 or 1"):
        roc_auc([0.1, 0.2], [0, 2])
    with pytest.raises(ValueError, match="3 scores for 2 labels"):
        roc_auc([0.1, 0.2, 0.3], [0, 1])


def test_binary_entropy():
    assert binary_entropy(0.5) == pytest.approx(np.log(2))
    assert binary_entropy(0.0) == binary_entropy(1.0) == 0.0
    p = 0.117
    assert binary_entropy(p) == pytest.approx(-(p * np.log(p) + (1 - p) * np.log(1 - p)))
    with pytest.raises(ValueError):
        binary_entropy(1.5)
