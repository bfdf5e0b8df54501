"""ERNIE's aggregator: the fusion written out token by token here, float64 gradients of
both streams (inputs and parameters), sentences without entities, and bad alignments."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.core.module import Module
from minipt.models.knowledge.aggregator import Aggregator, entity_alignment


def _gelu(x):
    from math import erf, sqrt
    return np.vectorize(lambda v: 0.5 * v * (1 + erf(v / sqrt(2))))(x)


def _ln(x, g, b, eps=1e-12):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _setup(seed=0):
    rng = np.random.default_rng(seed)
    agg = Aggregator(8, 6, 2, 2, 10, rng=rng, dtype=np.float64)
    for name, p in agg.named_parameters():
        p[...] = rng.normal(0, 0.3, p.shape) + (1.0 if name.endswith("ln_token.weight") else 0.0)
    w, e = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 3, 6))
    positions = np.array([[0, 3, 0], [4, 0, 0]])
    emask = np.array([[1, 1, 0], [1, 0, 0]])
    tmask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    return agg, w, e, positions, emask, tmask


def test_fusion_matches_a_token_by_token_formula():
    agg, w, e, pos, emask, tmask = _setup()
    w_out, e_out = agg(w, e, pos, emask, tmask)
    keys = np.ones((2, 1, 5), bool)
    w_att = agg.ln_token_attn(w + agg.token_attn(w, mask=keys))
    ent_keys = (emask > 0)[:, None, :] | np.eye(3, dtype=bool)[None]
    e_att = agg.ln_entity_attn(e + agg.entity_attn(e, mask=ent_keys))
    P = {k: v for k, v in agg.named_parameters()}
    for b in range(2):
        for j in range(5):
            pre = P["fuse_token.weight"] @ w_att[b, j] + P["fuse_token.bias"]
            slots = [m for m in range(3) if emask[b, m] and pos[b, m] == j]
            if slots:
                pre = pre + P["fuse_entity.weight"] @ e_att[b, slots[0]]
            h = _gelu(pre)
            want = _ln(w_att[b, j] + P["out_token.weight"] @ h + P["out_token.bias"],
                       P["ln_token.weight"], P["ln_token.bias"])
            np.testing.assert_allclose(w_out[b, j], want, rtol=1e-10, atol=1e-12)
            for m in slots:
                want_e = _ln(e_att[b, m] + P["out_entity.weight"] @ h + P["out_entity.bias"],
                             P["ln_entity.weight"], P["ln_entity.bias"])
                np.testing.assert_allclose(e_out[b, m], want_e, rtol=1e-10, atol=1e-12)


class _Both(Module):
    """Both outputs as one flat vector, so one random upstream gradient covers both."""
    def __init__(self, agg, pos, emask, tmask):
        super().__init__()
        self.agg, self.extra = agg, (pos, emask, tmask)

    def forward(self, w, e):
        w_out, e_out = self.agg(w, e, *self.extra)
        self.shapes = (w_out.shape, e_out.shape)
        return np.concatenate([w_out.ravel(), e_out.ravel()])

    def backward(self, dy):
        n = int(np.prod(self.shapes[0]))
        return self.agg.backward(dy[:n].reshape(self.shapes[0]), dy[n:].reshape(self.shapes[1]))


@pytest.mark.parametrize("with_entities", [True, False])
def test_gradients_of_both_streams(with_entities):
    agg, w, e, pos, emask, tmask = _setup(1)
    if not with_entities:
        emask = np.zeros_like(emask)
    tmask = tmask.copy()
    tmask[1, 4] = 0 if not with_entities else 1
    res = check_module(_Both(agg, pos, emask, tmask), w, e, max_checks=20)
    assert res.passed, str(res)


def test_no_entity_sentence_is_defined_and_ignores_entities():
    agg, w, e, pos, emask, tmask = _setup(2)
    none = np.zeros_like(emask)
    w1, _ = agg(w, e, pos, none, tmask)
    w2, _ = agg(w, e * 5 + 1, pos, none, tmask)
    assert np.isfinite(w1).all()
    np.testing.assert_allclose(w1, w2)          # padded entity slots never reach the tokens


def test_bad_alignments_are_refused():
    with pytest.raises(ValueError, match=r"in \[0, 5\)"):
        entity_alignment(np.array([[5]]), np.array([[1]]), 5)
    with pytest.raises(ValueError, match="same token"):
        entity_alignment(np.array([[1, 1]]), np.array([[1, 1]]), 5)
    with pytest.raises(ValueError, match=r"\(B, M\)"):
        entity_alignment(np.array([1, 1]), np.array([[1, 1]]), 5)
    align = entity_alignment(np.array([[2, 0, 4]]), np.array([[1, 0, 1]]), 5)
    assert align.tolist() == [[-1, -1, 0, -1, 2]]
