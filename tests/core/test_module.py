import numpy as np
import pytest

from minipt import Module, check_module
from minipt.nn.linear import Linear


class TiedPair(Module):
    """x -> A x -> A^T-ish reuse: the second layer is tied to the first's weight."""
    def __init__(self, rng):
        super().__init__()
        self.first = Linear(4, 4, rng=rng, std=0.5)
        self.second = Linear(4, 4, rng=rng, std=0.5, bias=False)
        self.second.tie("weight", self.first, "weight")

    def forward(self, x):
        return self.second(np.tanh(self.first(x)))

    def backward(self, dy):
        dh = self.second.backward(dy)
        h = self.second._cache[0]
        return self.first.backward(dh * (1 - h ** 2))


def test_dotted_names_and_tie_dedup():
    m = TiedPair(np.random.default_rng(0))
    assert list(m.parameters()) == ["first.weight", "first.bias"]
    assert m.num_parameters() == 20


def test_tied_gradients_accumulate_both_uses():
    m = TiedPair(np.random.default_rng(0)).to(np.float64)
    assert m.first.params["weight"] is m.second.params["weight"]
    res = check_module(m, np.random.default_rng(1).standard_normal((3, 4)))
    assert res.passed, str(res)


def test_zero_grad_zeroes_every_gradient_nested_listed_and_tied():
    class Outer(Module):
        def __init__(self, rng):
            super().__init__()
            self.pair = TiedPair(rng)                                    # nested, with a tie
            self.layers = [Linear(4, 4, rng=rng), Linear(4, 2, rng=rng)]   # children in a list
            self.add_param("scale", np.ones(2))
    m = Outer(np.random.default_rng(0))
    grads = [g for _, mod in m.named_modules() for g in mod.grads.values()]
    assert len(grads) == 8
    for g in grads:
        g[...] = 3.0
    m.zero_grad()
    assert all(not g.any() for g in grads)
    assert m.pair.second.grads["weight"] is m.pair.first.grads["weight"]   # the tie kept


def test_load_state_dict_names_first_mismatch():
    m = Linear(3, 2, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"weight: model has shape \(2, 3\)"):
        m.load_state_dict({"weight": np.zeros((3, 3)), "bias": np.zeros(2)})
    with pytest.raises(KeyError, match="bias"):
        m.load_state_dict({"weight": np.zeros((2, 3))})
