"""LSTM LM and ELMo: the protocol, whole-model float64 gradchecks (padding, dropout,
shared softmax), states carried chunk to chunk, ELMo's two directions and its features."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.models import registry
from minipt.models.protocol import IGNORE, check_protocol
from minipt.models.recurrent.lstm_lm import LSTMLanguageModel


@pytest.mark.parametrize("name", ["lstm", "elmo"])
def test_protocol_and_whole_model_gradcheck(name):
    entry = registry.get(name)
    model, batch = entry.tiny()
    check_protocol(model)
    assert model.block_size is None
    loss, logits = model(*batch)
    count = int(np.sum(batch[1] != IGNORE))
    assert model.log_prob(*batch) == pytest.approx(-float(loss) * count)
    rebuilt = registry.build(model.spec(), dtype=np.float64)
    assert type(rebuilt) is type(model) and rebuilt.num_parameters() == model.num_parameters()
    for case in entry.all_gradchecks():
        res = case.run()
        assert res.passed, str(res)


def test_elmo_gradcheck_with_dropout():
    model, batch = registry.get("elmo").tiny()
    model.drop_in.p = model.drop_out.p = 0.3
    model.drop_in.rng, model.drop_out.rng = np.random.default_rng(1), np.random.default_rng(2)
    res = check_module(model, *batch, select=lambda out: out[0], max_checks=12)
    assert res.passed, str(res)


def test_elmo_directions_and_bad_targets():
    model, (idx, targets) = registry.get("elmo").tiny()
    loss, logits = model(idx, targets)
    lf, lb = model.direction_loss
    assert float(loss) == pytest.approx(0.5 * (lf + lb))
    assert logits.shape == model.backward_logits.shape == (2, 5, 5)
    bad = targets.copy()
    bad[0, 0] = (bad[0, 0] + 1) % 5
    with pytest.raises(ValueError, match="shifted left by one"):
        model(idx, bad)
    hole = targets.copy()
    hole[0, 1] = IGNORE
    with pytest.raises(ValueError, match="only pad the end"):
        model(idx, hole)
    with pytest.raises(ValueError, match="empty batch"):
        model(idx[:0], targets[:0])


def test_elmo_each_direction_sees_only_its_side():
    """Change w_2: the forward LM's predictions of w_1, w_2 and the backward LM's of w_2,
    w_3, w_4 stay; the forward prediction of w_3 and the backward one of w_1 move."""
    model, (idx, targets) = registry.get("elmo").tiny()
    model.eval()
    _, f0 = model(idx, targets)
    b0 = model.backward_logits.copy()
    idx2, t2 = idx.copy(), targets.copy()
    idx2[0, 2] = t2[0, 1] = (idx[0, 2] + 1) % 5
    _, f1 = model(idx2, t2)
    b1 = model.backward_logits
    np.testing.assert_allclose(f1[0, :2], f0[0, :2], rtol=1e-12)      # predictions of w_1, w_2
    np.testing.assert_allclose(b1[0, 2:], b0[0, 2:], rtol=1e-12)      # predictions of w_2, w_3, w_4
    assert np.abs(f1[0, 2] - f0[0, 2]).max() > 1e-6 and np.abs(b1[0, 1] - b0[0, 1]).max() > 1e-6


def test_elmo_sentence_layers_unseen_words():
    model, _ = registry.get("elmo").tiny()
    layers, lengths = model.sentence_layers([["the", "bat"], ["the", "zebra", "river", "ba?"]])
    assert len(layers) == 3 and all(h.shape == (2, 4, 6) for h in layers)
    assert np.all(layers[2][0, 2:] == 0) and np.all(np.isfinite(layers[2]))
    alone, _ = model.sentence_layers([["the", "bat"]])
    np.testing.assert_allclose(alone[2][0], layers[2][0, :2], rtol=1e-12)
    with pytest.raises(ValueError, match="non-empty"):
        model.sentence_layers([[]])


def test_lstm_lm_cache_carries_state():
    r = np.random.default_rng(0)
    model = LSTMLanguageModel(9, 4, 6, 2, rng=r, dtype=np.float64).eval()
    idx = r.integers(0, 9, (2, 7))
    _, whole = model(idx)
    cache = model.new_cache()
    _, a = model(idx[:, :3], cache=cache)
    _, b = model(idx[:, 3:], cache=cache)
    assert cache.length == 7
    np.testing.assert_allclose(np.concatenate([a, b], 1), whole, rtol=1e-12)
    with pytest.raises(ValueError, match="cache: holds states for batch 2"):
        model(idx[:1], cache=cache)
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model(np.array([[9]]))


@pytest.mark.parametrize("name", ["lstm", "elmo"])
def test_float32_training_step_stays_float32(name):
    model, batch = registry.get(name).tiny()
    model.to(np.float32)
    loss, logits = model(*batch)
    model.backward()
    assert loss.dtype == logits.dtype == np.float32
    assert all(g.dtype == np.float32 and np.isfinite(g).all() for _, g in model.named_grads())
