"""Update rules against steps computed by hand from the papers' formulas."""
import math

import numpy as np
import pytest

from minipt import Module
from minipt.nn import Embedding, LayerNorm, Linear
from minipt.optim import SGD, Adam, AdamW


class One(Module):
    """A single parameter p whose gradient the test sets."""
    def __init__(self, value, dtype=np.float64):
        super().__init__()
        self.add_param("p", np.array(value, dtype=dtype))


def run(opt, model, grads):
    for g in grads:
        model.grads["p"][...] = g
        opt.step()
    return model.params["p"].copy()


def test_sgd_momentum_by_hand():
    m = One([1.0, -2.0])
    p = run(SGD(m, lr=0.1, momentum=0.9), m, [np.array([1.0, 2.0]), np.array([0.5, -1.0])])
    v1 = np.array([1.0, 2.0]); p1 = np.array([1.0, -2.0]) - 0.1 * v1
    v2 = 0.9 * v1 + np.array([0.5, -1.0]); p2 = p1 - 0.1 * v2
    np.testing.assert_allclose(p, p2, rtol=0, atol=1e-15)


def test_sgd_nesterov_by_hand():
    m = One([1.0])
    p = run(SGD(m, lr=0.1, momentum=0.5, nesterov=True), m, [np.array([2.0]), np.array([1.0])])
    v1 = 2.0; p1 = 1.0 - 0.1 * (2.0 + 0.5 * v1)
    v2 = 0.5 * v1 + 1.0; p2 = p1 - 0.1 * (1.0 + 0.5 * v2)
    assert p[0] == pytest.approx(p2, abs=1e-15)


def adam_by_hand(p, grads, lr, b1, b2, eps, wd=0.0, decoupled=False):
    m = v = 0.0
    for t, g in enumerate(grads, start=1):
        if wd and not decoupled:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        if decoupled:
            p = p - lr * wd * p
        p = p - lr * mhat / (math.sqrt(vhat) + eps)
    return p


@pytest.mark.parametrize("cls,wd", [(Adam, 0.0), (Adam, 0.1), (AdamW, 0.1)])
def test_adam_family_by_hand(cls, wd):
    grads = [0.3, -1.2, 0.7]
    m = One([[0.5]])                                   # 2-D: AdamW decays it
    opt = cls(m, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd)
    p = run(opt, m, [np.array([[g]]) for g in grads])
    want = adam_by_hand(0.5, grads, 0.01, 0.9, 0.99, 1e-8, wd, decoupled=cls is AdamW)
    assert p[0, 0] == pytest.approx(want, rel=1e-13)


class Tiny(Module):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.wte = Embedding(5, 4, rng=rng)
        self.ln = LayerNorm(4)
        self.fc = Linear(4, 3, rng=rng)


def test_adamw_no_decay_rule_and_override():
    assert AdamW(Tiny(), weight_decay=0.1).decay_names() == ["fc.weight"]
    everything = AdamW(Tiny(), weight_decay=0.1, no_decay=lambda name, p: False)
    assert sorted(everything.decay_names()) == ["fc.bias", "fc.weight", "ln.bias", "ln.weight", "wte.weight"]


def test_float32_stays_float32():
    m = Tiny()
    for _, g in m.named_grads():
        g[...] = 0.1
    opt = AdamW(m, lr=1e-3)
    opt.step()
    assert all(p.dtype == np.float32 for _, p in m.named_parameters())
    assert all(a.dtype == np.float32 for d in opt.state.values() for a in d.values())


def test_state_dict_roundtrip_continues_identically():
    rng = np.random.default_rng(0)
    a, b = Tiny(), Tiny()
    oa, ob = AdamW(a, lr=1e-2), AdamW(b, lr=1e-2)
    grads = [{n: rng.standard_normal(g.shape).astype(np.float32) for n, g in a.named_grads()} for _ in range(6)]

    def step(model, opt, g):
        for n, arr in model.named_grads():
            arr[...] = g[n]
        opt.step()
    for g in grads[:3]:
        step(a, oa, g)
    b.load_state_dict(a.state_dict())
    ob.load_state_dict(oa.state_dict())
    for g in grads[3:]:
        step(a, oa, g)
        step(b, ob, g)
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(pa, pb), n


def test_bad_hyperparameters():
    with pytest.raises(ValueError, match="learning rate"):
        SGD(One([1.0]), lr=0)
    with pytest.raises(ValueError, match="momentum"):
        SGD(One([1.0]), lr=0.1, momentum=1.0)
    with pytest.raises(ValueError, match="betas"):
        Adam(One([1.0]), betas=(1.0, 0.9))
