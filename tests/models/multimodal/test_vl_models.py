"""Single- and two-stream models: regions are a set (permuting them permutes their
states and leaves the words' states alone), padding regions change nothing, the MRFR
loss is the formula, co-attention carries the image into the text stream, and bad
scenes are refused by name."""
import numpy as np
import pytest

from minipt.models.multimodal.single_stream import SingleStream, tiny_batch, tiny_model
from minipt.models.multimodal.two_stream import TwoStream
from minipt.objectives.common import IGNORE

MODELS = {"single": (SingleStream, dict(n_layer=2)),
          "two": (TwoStream, dict(n_text_layer=1, n_region_layer=1, n_cross_layer=2))}


@pytest.mark.parametrize("kind", MODELS)
def test_regions_are_a_set_and_padding_is_ignored(kind):
    cls, settings = MODELS[kind]
    model = tiny_model(cls, **settings)
    b = tiny_batch()
    t, r = model.encode(b.ids, b.text_mask, b.features, b.boxes, b.region_mask)
    n = int(b.region_mask[0].sum())
    perm = np.concatenate([np.random.default_rng(0).permutation(n), np.arange(n, b.features.shape[1])])
    t2, r2 = model.encode(b.ids, b.text_mask, b.features[:, perm], b.boxes[:, perm], b.region_mask[:, perm])
    np.testing.assert_allclose(t2[0], t[0], atol=1e-10)
    np.testing.assert_allclose(r2[0], r[0, perm], atol=1e-10)
    padded = np.flatnonzero(b.region_mask[1] == 0)
    assert padded.size, "the tiny batch should pad its smaller scene"
    f3 = b.features.copy()
    f3[1, padded] = 5.0
    t3, r3 = model.encode(b.ids, b.text_mask, f3, b.boxes, b.region_mask)
    np.testing.assert_allclose(t3[1], t[1], atol=1e-10)
    real = b.region_mask[1] > 0
    np.testing.assert_allclose(r3[1, real], r[1, real], atol=1e-10)


@pytest.mark.parametrize("kind", MODELS)
def test_the_image_reaches_the_words(kind):
    cls, settings = MODELS[kind]
    model = tiny_model(cls, **settings)
    b = tiny_batch()
    t, _ = model.encode(b.ids, b.text_mask, b.features, b.boxes, b.region_mask)
    t2, _ = model.encode(b.ids, b.text_mask, b.features + 1.0, b.boxes, b.region_mask)
    assert np.abs(t2 - t).max() > 1e-4


def test_mrfr_is_the_mean_squared_error_over_masked_regions():
    model = tiny_model(SingleStream, n_layer=1)
    b = tiny_batch()
    loss_all, _ = model(*b[:5], None, b.region_labels, b.feature_targets, None)
    loss_mrc, _ = model(*b[:5], None, b.region_labels, None, None)
    h_t, h_r = model.encode(*b[:5])
    P = dict(model.named_parameters())
    pred = h_r @ P["heads.mrfr.weight"].T + P["heads.mrfr.bias"]
    masked = b.region_labels != IGNORE
    want = ((pred - b.feature_targets)[masked] ** 2).mean()
    assert float(loss_all) - float(loss_mrc) == pytest.approx(want, rel=1e-9)


def test_bad_scenes_and_answers_are_refused():
    model = tiny_model(SingleStream, n_layer=1)
    b = tiny_batch()
    with pytest.raises(ValueError, match="1 to 8 regions, got 0"):
        model(b.ids, b.text_mask, b.features[:, :0], b.boxes[:, :0], b.region_mask[:, :0])
    with pytest.raises(ValueError, match="1 to 8 regions, got 9"):
        model(b.ids, b.text_mask, np.zeros((2, 9, b.features.shape[2])), np.full((2, 9, 4), 0.5),
              np.ones((2, 9), np.int64))
    with pytest.raises(ValueError, match="inside the image"):
        model(b.ids, b.text_mask, b.features, b.boxes + 1.0, b.region_mask)
    with pytest.raises(ValueError, match="exceeds max_text"):
        model(np.zeros((2, 17), np.int64), np.ones((2, 17), np.int64), b.features, b.boxes, b.region_mask)
    with pytest.raises(ValueError, match="answers: expected"):
        model(*b[:5], answers=np.array([0, 99]))
