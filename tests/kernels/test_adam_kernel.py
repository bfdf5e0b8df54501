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
    real = kernels.get("adam_update")
    monkeypatch.setattr(kernels, "get", lambda name: (lambda *a: (calls.append(1), real(*a))[1])
                        if name == "adam_update" else None)
    lin = Linear(4, 3, rng=np.random.default_rng(0))
    opt = AdamW(lin, lr=1e-2, weight_decay=0.1)
    lin.grads["weight"][...] = 1.0
    opt.step()
    assert len(calls) == 2 and lin.params["weight"].dtype == np.float32
    assert all(a.dtype == np.float32 for slot in opt.state.values() for a in slot.values())
