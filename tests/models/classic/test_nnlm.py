"""Bengio's NNLM: whole-model gradcheck (with and without direct connections), protocol, learning, bad input."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.models.classic.nnlm import NNLM, tiny
from minipt.models.protocol import check_protocol


@pytest.mark.parametrize("direct", [True, False])
def test_whole_model_gradcheck_float64(direct):
    model, (idx, targets) = tiny()
    if not direct:
        model = NNLM(9, order=3, dim=4, hidden=5, direct=False, rng=np.random.default_rng(1), dtype=np.float64)
    result = check_module(model, idx, targets, select=lambda out: out[0])
    assert result.passed, str(result)
    assert {"C", "H", "d", "U", "b"} | ({"W"} if direct else set()) == {a.name for a in result.arrays}


def test_protocol_and_log_prob():
    model, (idx, targets) = tiny()
    check_protocol(model)
    loss, logits = model(idx, targets)
    assert logits.shape == (2, 5, 9)
    assert model.log_prob(idx, targets) == pytest.approx(-float(loss) * 9)
    assert model.spec() == {"model": "nnlm", "vocab_size": 9, "order": 3, "dim": 4, "hidden": 5,
                            "direct": True, "pad_id": 0}


def test_context_is_the_previous_n_minus_1_words():
    model = NNLM(10, order=4, dim=2, hidden=3, pad_id=0, rng=np.random.default_rng(0))
    ctx = model.contexts(np.array([[5, 6, 7, 8]]))
    assert ctx[0].tolist() == [[0, 0, 5], [0, 5, 6], [5, 6, 7], [6, 7, 8]]


def test_learns_a_deterministic_sequence():
    from minipt.optim import AdamW
    seq = np.tile([1, 2, 3, 1, 4, 5], 8)[None, :]
    model = NNLM(6, order=3, dim=8, hidden=16, rng=np.random.default_rng(0))
    opt = AdamW(model, lr=3e-2, weight_decay=0.0)
    for _ in range(150):
        model.zero_grad()
        loss, _ = model(seq[:, :-1], seq[:, 1:])
        model.backward()
        opt.step()
    assert float(loss) < 0.05


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="order must be an integer >= 2, got 1"):
        NNLM(5, order=1, rng=rng)
    with pytest.raises(ValueError, match="pad_id"):
        NNLM(5, pad_id=7, rng=rng)
    model = NNLM(5, order=3, rng=rng)
    with pytest.raises(IndexError, match="token id 9 is outside"):
        model(np.array([[1, 9]]), np.array([[1, 1]]))
    model(np.array([[1, 2]]))
    with pytest.raises(RuntimeError, match="targets"):
        model.backward()
