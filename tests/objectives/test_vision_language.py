"""The vision-language batch: MLM and masked regions only on matched pairs, masked
regions zeroed with their category and original features as targets, padding never a
target, and bad pairs refused."""
import numpy as np
import pytest

from minipt.data import toy_scenes as ts
from minipt.objectives.common import IGNORE
from minipt.objectives.vision_language import make_batch, vocabulary


def test_batch_shapes_and_targets():
    pairs = ts.matching_pairs(64, seed=0)
    b = make_batch(pairs, np.random.default_rng(0), mask_prob=0.3, region_mask_prob=0.3)
    B, T = b.ids.shape
    N = b.features.shape[1]
    assert (B, N) == b.region_mask.shape == b.region_labels.shape and b.boxes.shape == (B, N, 4)
    matched = b.itm_labels == 1
    assert (b.mlm_labels[~matched] == IGNORE).all() and (b.region_labels[~matched] == IGNORE).all()
    assert (b.mlm_labels[matched] != IGNORE).any() and (b.region_labels[matched] != IGNORE).any()
    assert (b.mlm_labels[b.text_mask == 0] == IGNORE).all()
    assert (b.region_labels[b.region_mask == 0] == IGNORE).all()
    vocab = vocabulary()
    for i, (scene, words, label) in enumerate(pairs):
        n = scene.n_regions
        assert b.region_mask[i].sum() == n and b.text_mask[i].sum() == len(words) + 2
        chosen = b.region_labels[i, :n] != IGNORE
        np.testing.assert_array_equal(b.region_labels[i, :n][chosen], scene.categories[chosen])
        assert (b.features[i, :n][chosen] == 0).all()
        np.testing.assert_array_equal(b.features[i, :n][~chosen], scene.features[~chosen])
        np.testing.assert_array_equal(b.feature_targets[i, :n], scene.features)
        targets = b.mlm_labels[i, 1:len(words) + 1]
        picked = targets != IGNORE
        assert [vocab[t] for t in targets[picked]] == [w for w, p in zip(words, picked) if p]
        if label == 0:
            assert [vocab[t] for t in b.ids[i, 1:len(words) + 1]] == words


def test_bad_pairs_are_refused():
    scene = ts.make_scene(np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least one"):
        make_batch([], np.random.default_rng(0))
    with pytest.raises(ValueError, match="outside the vision-language vocabulary"):
        make_batch([(scene, ["a", "purple", "ball", "."], 1)], np.random.default_rng(0))
    with pytest.raises(ValueError, match="0 or 1"):
        make_batch([(scene, ["a", "red", "ball", "."], 2)], np.random.default_rng(0))
