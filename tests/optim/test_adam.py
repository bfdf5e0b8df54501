"""Adam and AdamW against steps written out by hand, the no-decay rule, state dicts, dtype."""
import json
import math

import numpy as np
import pytest

from minipt.core.module import Module
from minipt.nn.embedding import Embedding as RealEmbedding
from minipt.nn.linear import Linear
from minipt.optim import Adam, AdamW, default_no_decay


class Vec(Module):
    def __init__(self, value, dtype=np.float64):
        super().__init__()
        self.add_param("p", np.array(value, dtype=dtype))


class Embedding(Module):
    """Found by class name, as minipt.nn.embedding.Embedding would be."""
    def __init__(self, rng):
        super().__init__()
        self.add_param("weight", rng.standard_normal((5, 4)).astype(np.float32))


class Positions(Module):
    """Found by the marker attribute."""
    no_weight_decay = True

    def __init__(self, rng):
        super().__init__()
        self.add_param("table", rng.standard_normal((6, 4)).astype(np.float32))


class Norm(Module):
    def __init__(self):
        super().__init__()
        self.add_param("weight", np.ones(4, np.float32))
        self.add_param("bias", np.zeros(4, np.float32))


class Net(Module):
    def __init__(self, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.wte = Embedding(rng)
        self.wpe = Positions(rng)
        self.ln = Norm()
        self.fc = Linear(4, 4, rng=rng)
        self.head = Linear(4, 5, bias=False, rng=rng)
        self.head.tie("weight", self.wte, "weight")        # GPT's tied output layer


def steps(opt, model, grads):
    for g in grads:
        model.grads["p"][...] = g
        opt.step()
    return model.params["p"].copy()


G = [np.array([0.3, -2.0]), np.array([-1.2, 0.5]), np.array([0.7, 0.1])]


def by_hand(p, grads, lr, b1, b2, eps, wd=0.0, decoupled=False):
    """Kingma & Ba algorithm 1 (+ L2 through g), or Loshchilov & Hutter algorithm 2."""
    p, m, v = np.array(p, dtype=np.float64), 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        if wd and not decoupled:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        mhat = m / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        if decoupled:
            p = p - lr * wd * p
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def test_adam_three_steps_by_hand():
    m = Vec([0.5, -1.0])
    got = steps(Adam(m, lr=0.01, betas=(0.9, 0.99), eps=1e-8), m, G)
    np.testing.assert_allclose(got, by_hand([0.5, -1.0], G, 0.01, 0.9, 0.99, 1e-8), rtol=1e-13)


def test_adam_l2_three_steps_by_hand():
    m = Vec([[0.5, -1.0]])                                  # 2-D, so weight decay applies
    got = steps(Adam(m, lr=0.01, betas=(0.9, 0.99), weight_decay=0.1), m, [g[None] for g in G])
    want = by_hand([[0.5, -1.0]], [g[None] for g in G], 0.01, 0.9, 0.99, 1e-8, wd=0.1)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_adamw_three_steps_by_hand():
    m = Vec([[0.5, -1.0]])
    opt = AdamW(m, lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)
    first = steps(opt, m, [G[0][None]])
    # step 1 written out: mhat = g, sqrt(vhat) = |g|, so p1 = p0 - lr wd p0 - lr g / (|g| + eps)
    assert first[0, 0] == pytest.approx(0.5 - 0.01 * 0.1 * 0.5 - 0.01 * 0.3 / (0.3 + 1e-8), rel=1e-14)
    got = steps(opt, m, [g[None] for g in G[1:]])
    want = by_hand([[0.5, -1.0]], [g[None] for g in G], 0.01, 0.9, 0.99, 1e-8, wd=0.1, decoupled=True)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_bias_correction_makes_the_first_step_about_lr_per_coordinate():
    m = Vec([0.0, 0.0, 0.0])
    got = steps(Adam(m, lr=1e-3), m, [np.array([1e-4, -3.0, 250.0])])
    np.testing.assert_allclose(got, [-1e-3, 1e-3, -1e-3], rtol=1e-4)


def test_default_no_decay_rule():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == \
        ["wte.weight", "wpe.table", "ln.weight", "ln.bias", "fc.weight", "fc.bias"]
    assert default_no_decay(net) == {"wte.weight", "wpe.table", "ln.weight", "ln.bias", "fc.bias"}
    assert AdamW(net, weight_decay=0.1).decay_names() == ["fc.weight"]
    assert Adam(net, weight_decay=0.1).decay_names() == ["fc.weight"]   # same rule for L2
    assert AdamW(net, weight_decay=0.0).decay_names() == []


def test_real_embedding_is_not_decayed():
    class Lm(Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.tok = RealEmbedding(7, 4, rng=rng)
            self.out = Linear(4, 3, rng=rng)
    assert AdamW(Lm()).decay_names() == ["out.weight"]


def test_no_decay_override():
    keep_bias = lambda name, p: name.endswith("bias")
    assert AdamW(Net(), no_decay=keep_bias).decay_names() == ["wte.weight", "wpe.table", "ln.weight", "fc.weight"]
    assert AdamW(Net(), no_decay=lambda name, p: False).decay_names() == [n for n, _ in Net().named_parameters()]


def test_decay_touches_exactly_the_decay_names():
    net = Net()
    before = net.state_dict()
    AdamW(net, lr=0.1, weight_decay=0.5).step()            # zero gradients: only decay moves p
    for name, p in net.named_parameters():
        want = before[name] - np.float32(0.1 * 0.5) * before[name] if name == "fc.weight" else before[name]
        assert np.array_equal(p, want), name


def test_float32_stays_float32_even_with_a_numpy_lr():
    a, b = Net(), Net()
    oa, ob = AdamW(a, lr=1e-2), AdamW(b, lr=1e-2)
    ob.lr = np.float64(1e-2)
    rng = np.random.default_rng(3)
    for _ in range(2):
        grads = {n: rng.standard_normal(g.shape).astype(np.float32) for n, g in a.named_grads()}
        for model, opt in ((a, oa), (b, ob)):
            for n, g in model.named_grads():
                g[...] = grads[n]
            opt.step()
    assert all(p.dtype == np.float32 for _, p in a.named_parameters())
    assert all(arr.dtype == np.float32 for slot in oa.state.values() for arr in slot.values())
    assert all(np.array_equal(pa, pb) for (_, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()))


@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_state_dict_reload_mid_way_continues_bitwise(cls):
    rng = np.random.default_rng(0)
    a, b = Net(seed=0), Net(seed=1)
    oa, ob = cls(a, lr=1e-2, weight_decay=0.1), cls(b, lr=0.5, weight_decay=0.1)
    grads = [{n: rng.standard_normal(g.shape).astype(np.float32) for n, g in a.named_grads()} for _ in range(7)]

    def step(model, opt, g):
        for n, arr in model.named_grads():
            arr[...] = g[n]
        opt.step()
    for g in grads[:3]:
        step(a, oa, g)
    b.load_state_dict(a.state_dict())
    state = oa.state_dict()
    assert set(state["arrays"]) == {f"{s}/{n}" for s in ("m", "v") for n, _ in a.named_parameters()}
    state["scalars"] = json.loads(json.dumps(state["scalars"]))
    ob.load_state_dict(state)
    state["arrays"]["m/fc.weight"][...] = 99.0                 # the optimiser holds copies
    for g in grads[3:]:
        step(a, oa, g)
        step(b, ob, g)
    assert ob.t == oa.t == 7
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(pa, pb), n


def test_load_state_dict_errors_name_the_problem():
    net = Net()
    opt = AdamW(net)
    opt.step()
    with pytest.raises(ValueError, match="optimiser state is for AdamW, not Adam"):
        Adam(Net()).load_state_dict(opt.state_dict())
    bad = opt.state_dict()
    bad["arrays"]["m/fc.weight"] = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"m/fc.weight: expected shape \(4, 4\), got \(2, 2\)"):
        AdamW(Net()).load_state_dict(bad)
    bad = opt.state_dict()
    bad["arrays"]["m/nope.weight"] = np.zeros(2, np.float32)
    with pytest.raises(KeyError, match="nope.weight"):
        AdamW(Net()).load_state_dict(bad)


@pytest.mark.parametrize("kwargs,match", [
    (dict(lr=-1.0), "learning rate must be > 0"),
    (dict(betas=(1.0, 0.9)), r"betas must be in \[0, 1\), got \(1.0, 0.9\)"),
    (dict(betas=(0.9, -0.1)), "betas"),
    (dict(eps=0.0), "eps must be > 0, got 0.0"),
    (dict(weight_decay=-0.1), "weight_decay must be >= 0, got -0.1"),
    (dict(weight_decay=math.nan), "weight_decay"),
])
@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_bad_hyperparameters(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(Vec([1.0]), **kwargs)


def test_zero_grad_zeroes_every_gradient_and_a_tied_one_once():
    from minipt.models.decoder.gpt import GPT, GPTConfig
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8), rng=np.random.default_rng(0))
    opt = AdamW(model, lr=1e-3)
    for _, g in model.named_grads():
        g[...] = 1.0
    opt.zero_grad()
    assert all(not g.any() for _, mod in model.named_modules() for g in mod.grads.values())


def test_an_optimiser_refuses_arrays_replaced_after_it_was_built():
    model = Linear(3, 2, rng=np.random.default_rng(0))
    opt = AdamW(model, lr=1e-3)
    opt.zero_grad()
    model.to(np.float64)                                     # new parameter and gradient arrays
    for call in (opt.zero_grad, opt.step):
        with pytest.raises(RuntimeError, match="weight: the module's arrays were replaced.*build the optimiser"):
            call()


@pytest.mark.parametrize("cls", [Adam, AdamW])
@pytest.mark.parametrize("seed", [0, 1])
def test_two_threads_take_the_halves_of_zero_grad_and_step_with_the_same_bits(cls, seed, monkeypatch):
    """From TWO_THREADS_FROM elements on (here 0), with two cores free, zero_grad and the
    fused update give each of two threads half of the arrays; every array ends as on one
    thread. Seed 1's model has one parameter: one half is empty."""
    from minipt.kernels import threads
    together, real = [], threads.run_together
    monkeypatch.setattr(threads, "refresh", lambda: 2)
    monkeypatch.setattr(threads, "run_together", lambda calls, on_thread=None: together.append(len(calls)) or
                        real(calls, on_thread))
    ends = {}
    for start in (threads.TWO_THREADS_FROM, 0):
        monkeypatch.setattr(threads, "TWO_THREADS_FROM", start)
        together.clear()
        model = Net(seed=3) if seed == 0 else Linear(6, 5, bias=False, rng=np.random.default_rng(3))
        opt = cls(model, lr=1e-2, weight_decay=0.1)
        r = np.random.default_rng(seed)
        for _ in range(3):
            opt.zero_grad()
            assert not any(g.any() for _, _, g in opt.entries)
            for _, _, g in opt.entries:
                g += r.standard_normal(g.shape).astype(g.dtype)
            opt.step()
        assert together == ([] if start else [2] * 6)              # three zero_grads, three steps
        ends[start] = [p.copy() for _, p, _ in opt.entries] + [a.copy() for d in opt.state.values() for a in d.values()]
    one, two = ends.values()
    assert len(one) == len(two) and all(np.array_equal(a, b) for a, b in zip(one, two))
