"""The one-pass Adam(W) kernel against its NumPy twin over several steps, float32 and
float64, AdamW's decoupled decay and Adam's L2; and through the optimiser."""
import math

import numpy as np
import pytest

from minipt import kernels
from minipt.optim.adam import adam_update_numpy

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decay,l2", [(0.0, 0.0), (1e-3, 0.0), (0.0, 0.1)])
def test_kernel_matches_twin(dtype, decay, l2):
    r = np.random.default_rng(0)
    p = r.standard_normal(1000).astype(dtype)
    state = {"kernel": [p.copy(), np.zeros_like(p), np.zeros_like(p)],
             "twin": [p.copy(), np.zeros_like(p), np.zeros_like(p)]}
    b1, b2, lr, eps = 0.9, 0.999, 1e-2, 1e-8
    for t in range(1, 6):
        g = r.standard_normal(1000).astype(dtype)
        step, root_c2 = lr / (1 - b1 ** t), math.sqrt(1 - b2 ** t)
        for name, fn in (("kernel", kernels.get("adam_update")), ("twin", adam_update_numpy)):
            fn(state[name][0], g, state[name][1], state[name][2], step, b1, b2, root_c2, eps, decay, l2)
    for a, b in zip(state["kernel"], state["twin"]):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=2e-6 if dtype == np.float32 else 1e-13, atol=0)
    assert not np.array_equal(state["kernel"][0], p)                # it did move


def test_optimizer_takes_the_kernel_and_stays_float32(monkeypatch):
    from minipt.nn.linear import Linear
    from minipt.optim import AdamW
    calls = []
    real = kernels.get("adam_update_all")
    monkeypatch.setattr(kernels, "get", lambda name: (lambda *a: (calls.append(len(a[1])), real(*a))[1])
                        if name == "adam_update_all" else None)
    lin = Linear(4, 3, rng=np.random.default_rng(0))
    opt = AdamW(lin, lr=1e-2, weight_decay=0.1)
    lin.grads["weight"][...] = 1.0
    opt.step()
    assert calls == [2] and lin.params["weight"].dtype == np.float32       # one call, both parameters
    assert all(a.dtype == np.float32 for slot in opt.state.values() for a in slot.values())


@pytest.mark.parametrize("decoupled", [True, False], ids=["AdamW", "Adam with L2"])
def test_one_call_for_all_parameters_gives_the_bits_of_one_call_each(decoupled):
    """Over steps with a changing learning rate and a state saved and loaded half-way (new
    moment arrays: the addresses are taken again), against ``adam_update`` per parameter;
    a parameter whose gradient is not C-contiguous takes the NumPy twin."""
    from minipt.nn.stack import TransformerStack
    from minipt.optim import Adam, AdamW
    made = [TransformerStack(2, d_model=8, n_heads=2, d_ff=16, rng=np.random.default_rng(0)) for _ in range(2)]
    opt = (AdamW if decoupled else Adam)(made[0], lr=1e-2, weight_decay=0.1)
    k = next(i for i, (_, p, _) in enumerate(opt.entries) if p.ndim == 2)
    name, p0, _ = opt.entries[k]
    strided = np.zeros((p0.shape[1], p0.shape[0]), p0.dtype).T                # not C-contiguous
    opt.entries[k] = (name, p0, strided)
    ref = dict(made[1].named_parameters())
    m_ref = {n: np.zeros_like(a) for n, a in ref.items()}
    v_ref = {n: np.zeros_like(a) for n, a in ref.items()}
    r = np.random.default_rng(1)
    for t in range(1, 5):
        opt.lr = 1e-2 / t
        for n, _, g in opt.entries:
            g[...] = r.standard_normal(g.shape)
        opt.step()
        step, root_c2 = opt.lr / (1 - 0.9 ** t), math.sqrt(1 - 0.999 ** t)
        for n, _, g in opt.entries:
            wd = 0.1 if opt._decays[n] else 0.0
            decay, l2 = (opt.lr * wd, 0.0) if decoupled else (0.0, wd)
            args = (ref[n], g, m_ref[n], v_ref[n], step, 0.9, 0.999, root_c2, 1e-8, decay, l2)
            if n == name:
                adam_update_numpy(*args)
            else:
                kernels.get("adam_update")(*(a.reshape(-1) for a in args[:4]), *args[4:])
        if t == 2:
            opt.load_state_dict(opt.state_dict())
        for n, p, _ in opt.entries:
            assert np.array_equal(p, ref[n]), (t, n)
            assert np.array_equal(opt.state["m"][n], m_ref[n]) and np.array_equal(opt.state["v"][n], v_ref[n])
    assert [e[0] for e in opt._plan["rest"]] == [name] and len(opt._plan["held"]) == len(opt.entries) - 1
