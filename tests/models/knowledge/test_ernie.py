"""ERNIE: the dEA head against a formula written here, entity inputs that matter only
with knowledge on, bad input refused by name, and the knowledge experiment end to end."""
import numpy as np
import pytest

from minipt.data.toy_kb import build_kb, corpus
from minipt.models.knowledge.ernie import Ernie, ErnieConfig, tiny
from minipt.objectives.common import IGNORE
from minipt.objectives.entity_autoencoder import make_batch, vocabulary


def _setup(knowledge=True, seed=0):
    kb = build_kb(n_persons=6, n_cities=3, n_countries=2, seed=seed)
    rng = np.random.default_rng(seed)
    model = Ernie(ErnieConfig(vocab_size=len(vocabulary(kb)), n_entities=kb.n_entities, d_model=16, d_entity=8,
                              n_knowledge_layer=2, n_classes=2, knowledge=knowledge), rng=rng, dtype=np.float64)
    batch = make_batch(corpus(kb, 6, seed=seed), kb, rng, dea=True)
    return kb, model, batch


def test_dea_loss_matches_a_formula():
    kb, model, batch = _setup()
    loss, _ = model(*batch[:5], None, batch.entity_labels)
    w, _ = model.encode(*batch[:5])
    P = dict(model.named_parameters())
    scores = (w @ P["dea.weight"].T + P["dea.bias"]) @ model.entity_table.T          # (B, T, E)
    keep = batch.entity_labels != IGNORE
    s = scores[keep]
    logz = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
    want = np.mean(logz - s[np.arange(len(s)), batch.entity_labels[keep]])
    assert float(loss) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("knowledge", [True, False])
def test_entity_inputs_matter_only_with_knowledge(knowledge):
    kb, model, batch = _setup(knowledge)
    _, a = model(*batch[:6])
    model.set_entity_table(model.entity_table * -2.0 + 0.5)
    _, b = model(*batch[:6])
    assert np.abs(a - b).max() > 1e-6 if knowledge else np.allclose(a, b)


def test_the_registered_tiny_model_sends_gradient_through_the_entity_outputs():
    """The protocol test gradchecks ``tiny``; with one aggregator the entity outputs would
    reach no loss and that check would pass on zeros. Two aggregators make them count."""
    model, batch = tiny()
    model.zero_grad()
    model(*batch)
    model.backward()
    grads = dict(model.named_grads())
    assert np.abs(grads["knowledge.0.out_entity.weight"]).max() > 1e-6
    assert np.abs(grads["knowledge.1.fuse_entity.weight"]).max() > 1e-6


def test_bad_input_is_refused_by_name():
    kb, model, batch = _setup()
    with pytest.raises(IndexError, match="entity ids must lie"):
        model(batch.ids, batch.token_mask, batch.entities + 100, batch.positions, batch.entity_mask,
              batch.mlm_labels)
    with pytest.raises(ValueError, match="must all be"):
        model(batch.ids, batch.token_mask, batch.entities[:, :1], batch.positions, batch.entity_mask)
    with pytest.raises(ValueError, match="labels: expected"):
        model(*batch[:5], None, None, np.array([0, 1, 2, 0, 1, 0]))
    with pytest.raises(ValueError, match="no targets"):
        model(*batch[:5])
    with pytest.raises(ValueError, match="entity_table: expected"):
        model.set_entity_table(np.zeros((3, 8)))


def test_knowledge_experiment_runs_every_variant():
    from minipt.experiments.knowledge import VARIANTS, run
    out = run("tiny", progress=False)
    assert [r["model"] for r in out["rows"]] == list(VARIANTS)
    assert all(0.0 <= r["test accuracy"] <= 1.0 for r in out["rows"])
    assert 0.25 <= out["chance"] < 1.0 and out["transe hits@1"] > 0.5
    with pytest.raises(ValueError, match="budget must be"):
        run("huge")
