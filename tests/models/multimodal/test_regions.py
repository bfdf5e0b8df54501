"""Region inputs: UNITER's LN(W_f f + W_p p) against a formula written here, float64
gradients of the features and parameters, and a box array of the wrong shape refused."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.models.multimodal.regions import RegionEmbedding


def test_value_and_gradients():
    rng = np.random.default_rng(0)
    m = RegionEmbedding(7, 6, rng=rng, segment=True, dtype=np.float64)
    for _, p in m.named_parameters():
        p[...] += rng.normal(0, 0.3, p.shape)
    f = rng.normal(size=(2, 3, 7))
    boxes = np.tile([0.1, 0.2, 0.4, 0.6], (2, 3, 1)) + rng.uniform(0, 0.1, (2, 3, 4))
    P = dict(m.named_parameters())
    p = np.concatenate([boxes, ((boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1]))[..., None]], -1)
    z = f @ P["feature.weight"].T + P["feature.bias"] + p @ P["location.weight"].T + P["location.bias"]
    want = (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, keepdims=True) + 1e-12) * P["ln.weight"] \
        + P["ln.bias"] + P["type_embedding"]
    np.testing.assert_allclose(m(f, boxes), want, rtol=1e-10, atol=1e-12)
    res = check_module(m, f, boxes)
    assert res.passed, str(res)
    assert {a.name for a in res.arrays} >= {"input0", "input1", "feature.weight", "location.weight",
                                            "type_embedding"}


def test_boxes_must_match_the_features():
    m = RegionEmbedding(7, 6, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="boxes: expected"):
        m(np.zeros((2, 3, 7), np.float32), np.zeros((2, 2, 4), np.float32))
