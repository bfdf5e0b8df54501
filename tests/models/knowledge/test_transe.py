"""TransE: distances against a loop written here, gradients in float64 for both norms and
for a mix of active and inactive pairs, the corruption rule, training that ranks the
true tails of the toy graph first, and bad input."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.data.toy_kb import build_kb
from minipt.models.knowledge.transe import TransE, corrupt


def _model(norm, margin=1.0, seed=0):
    rng = np.random.default_rng(seed)
    m = TransE(9, 3, dim=4, margin=margin, norm=norm, rng=rng, dtype=np.float64)
    pos = np.stack([rng.integers(0, 9, 10), rng.integers(0, 3, 10), rng.integers(0, 9, 10)], 1)
    return m, pos, corrupt(pos, 9, rng)


@pytest.mark.parametrize("norm", [1, 2])
def test_distances_and_loss_match_a_loop(norm):
    m, pos, neg = _model(norm)
    E, R = m.params["entity"], m.params["relation"]

    def dist(h, r, t):
        v = [E[h, k] + R[r, k] - E[t, k] for k in range(4)]
        return sum(abs(x) for x in v) if norm == 1 else sum(x * x for x in v) ** 0.5

    want = [max(0.0, 1.0 + dist(*p) - dist(*n)) for p, n in zip(pos, neg)]
    loss, margins = m(pos, neg)
    assert np.isclose(float(loss), np.mean(want), rtol=1e-12)
    np.testing.assert_allclose(m.distance(pos), [dist(*p) for p in pos], rtol=1e-12)
    np.testing.assert_allclose(np.maximum(margins, 0), want, rtol=1e-12)


@pytest.mark.parametrize("norm,margin", [(1, 1.0), (2, 1.0), (2, 20.0)])
def test_gradients_in_float64(norm, margin):
    m, pos, neg = _model(norm, margin, seed=3)
    loss, margins = m(pos, neg)
    if margin == 1.0:
        assert 0 < (margins > 0).sum() < len(margins), "want both active and inactive pairs"
    res = check_module(m, pos, neg, select=lambda out: out[0])
    assert res.passed, str(res)


def test_corrupt_replaces_exactly_the_head_or_the_tail():
    rng = np.random.default_rng(0)
    kb = build_kb()
    neg = corrupt(kb.triples, kb.n_entities, rng)
    same = neg == kb.triples
    assert same[:, 1].all()
    assert (same[:, 0] | same[:, 2]).all()                # never both sides
    head, tail = ~same[:, 0], ~same[:, 2]
    assert 0.3 < head.sum() / (head | tail).sum() < 0.7   # heads and tails at even odds


def test_training_ranks_true_tails_first():
    kb = build_kb(seed=1)
    rng = np.random.default_rng(0)
    m = TransE(kb.n_entities, len(kb.relations), dim=16, margin=1.0, norm=1, rng=rng)
    before = m.rank_tails(kb.triples[kb.triples[:, 1] < 2]).mean()
    history = m.fit(kb.triples, epochs=150, lr=0.05, batch_size=16, rng=rng)
    ranks = m.rank_tails(kb.triples[kb.triples[:, 1] < 2])          # the functional relations
    assert history[-1] < 0.25 * history[0]
    assert ranks.mean() < before / 4
    assert (ranks <= 3).mean() > 0.9, ranks
    np.testing.assert_allclose(np.linalg.norm(m.params["entity"], axis=1), 1.0, rtol=1e-5)


def test_bad_input_is_refused_by_name():
    m, pos, neg = _model(1)
    with pytest.raises(IndexError, match="entity ids"):
        m(pos, np.array([[0, 0, 99]] * len(pos)))
    with pytest.raises(IndexError, match="relation ids"):
        m(np.array([[0, 7, 1]]), np.array([[0, 0, 1]]))
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        m(pos[:, :2], neg[:, :2])
    with pytest.raises(ValueError, match="pair up"):
        m(pos, neg[:3])
    with pytest.raises(ValueError, match="norm must be 1 or 2"):
        TransE(3, 1, norm=3, rng=np.random.default_rng(0))
