"""SGD with momentum / Nesterov / weight decay against steps written out by hand."""
import json

import numpy as np
import pytest

from minipt.core.module import Module
from minipt.nn.linear import Linear
from minipt.optim import SGD


class Vec(Module):
    """One parameter ``p`` whose gradient each test writes by hand."""
    def __init__(self, value, dtype=np.float64):
        super().__init__()
        self.add_param("p", np.array(value, dtype=dtype))


class Tied(Module):
    """Two bias-free layers sharing one weight (and one gradient array)."""
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.a = Linear(3, 3, bias=False, rng=rng)
        self.b = Linear(3, 3, bias=False, rng=rng)
        self.b.tie("weight", self.a, "weight")


def steps(opt, model, grads):
    for g in grads:
        model.grads["p"][...] = g
        opt.step()
    return model.params["p"].copy()


G = [np.array([1.0, -2.0]), np.array([0.5, 0.25]), np.array([-1.5, 1.0])]


def test_plain_sgd_is_p_minus_lr_g():
    m = Vec([1.0, 2.0])
    got = steps(SGD(m, lr=0.1), m, G[:1])
    assert np.array_equal(got, np.array([1.0 - 0.1 * 1.0, 2.0 - 0.1 * -2.0]))


def test_momentum_three_steps_by_hand():
    m = Vec([1.0, 2.0])
    got = steps(SGD(m, lr=0.1, momentum=0.9), m, G)
    p, v = np.array([1.0, 2.0]), np.zeros(2)
    for g in G:                       # v = mu v + g ; p = p - lr v
        v = 0.9 * v + g
        p = p - 0.1 * v
    # written out for the first coordinate: v = 1, 1.4, -0.24 ; p = 0.9, 0.76, 0.784
    assert got[0] == pytest.approx(0.784, abs=1e-15)
    np.testing.assert_allclose(got, p, rtol=0, atol=1e-15)


def test_nesterov_three_steps_by_hand():
    m = Vec([1.0, 2.0])
    got = steps(SGD(m, lr=0.1, momentum=0.5, nesterov=True), m, G)
    p, v = np.array([1.0, 2.0]), np.zeros(2)
    for g in G:                       # v = mu v + g ; p = p - lr (g + mu v)
        v = 0.5 * v + g
        p = p - 0.1 * (g + 0.5 * v)
    np.testing.assert_allclose(got, p, rtol=0, atol=1e-15)


def test_weight_decay_is_added_to_the_gradient():
    m = Vec([1.0, 2.0])
    got = steps(SGD(m, lr=0.1, momentum=0.9, weight_decay=0.01), m, G[:2])
    p, v = np.array([1.0, 2.0]), np.zeros(2)
    for g in G[:2]:
        v = 0.9 * v + (g + 0.01 * p)
        p = p - 0.1 * v
    np.testing.assert_allclose(got, p, rtol=0, atol=1e-15)


def test_updates_in_place_and_tied_weight_once():
    model = Tied()
    w = model.a.params["weight"]
    before = w.copy()
    opt = SGD(model, lr=0.5)
    assert [n for n, _, _ in opt.entries] == ["a.weight"]
    model.a.grads["weight"][...] = 1.0           # the shared gradient array
    opt.step()
    assert model.a.params["weight"] is w and model.b.params["weight"] is w
    assert np.array_equal(w, before - np.float32(0.5))   # one update, not two


def test_zero_grad_delegates_to_the_module():
    model = Tied()
    model.a.grads["weight"][...] = 3.0
    SGD(model, lr=0.1).zero_grad()
    assert not model.b.grads["weight"].any()


def test_float32_stays_float32_even_with_a_numpy_lr():
    a, b = Vec([1.0, 2.0], np.float32), Vec([1.0, 2.0], np.float32)
    oa, ob = SGD(a, lr=0.1, momentum=0.9), SGD(b, lr=0.1, momentum=0.9)
    ob.lr = np.float64(0.1)                      # e.g. a schedule returning a NumPy scalar
    for g in G:
        steps(oa, a, [g.astype(np.float32)])
        steps(ob, b, [g.astype(np.float32)])
    assert a.params["p"].dtype == np.float32 and oa.state["velocity"]["p"].dtype == np.float32
    assert np.array_equal(a.params["p"], b.params["p"])


def test_state_dict_reload_continues_bitwise():
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(2).astype(np.float32) for _ in range(6)]
    a, b = Vec([1.0, 2.0], np.float32), Vec([0.0, 0.0], np.float32)
    oa, ob = SGD(a, lr=0.05, momentum=0.9, nesterov=True), SGD(b, lr=0.05, momentum=0.9, nesterov=True)
    steps(oa, a, grads[:3])
    b.load_state_dict(a.state_dict())
    state = oa.state_dict()
    state["scalars"] = json.loads(json.dumps(state["scalars"]))    # scalars are JSON-able
    ob.load_state_dict(state)
    assert np.array_equal(steps(oa, a, grads[3:]), steps(ob, b, grads[3:]))


def test_decay_names():
    assert SGD(Tied(), lr=0.1).decay_names() == []
    assert SGD(Tied(), lr=0.1, weight_decay=0.1).decay_names() == ["a.weight"]


@pytest.mark.parametrize("kwargs,match", [
    (dict(lr=0.0), "learning rate must be > 0, got 0"),
    (dict(lr=0.1, momentum=1.0), r"momentum must be in \[0, 1\), got 1.0"),
    (dict(lr=0.1, momentum=-0.1), "momentum"),
    (dict(lr=0.1, nesterov=True), "nesterov needs momentum > 0"),
    (dict(lr=0.1, weight_decay=-1.0), "weight_decay must be >= 0, got -1.0"),
])
def test_bad_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SGD(Vec([1.0]), **kwargs)
