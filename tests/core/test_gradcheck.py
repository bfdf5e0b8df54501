"""The gradient checker itself: it must fail a wrong backward, and say where."""
import numpy as np
import pytest

from minipt import check_op, gradcheck
from minipt.ops.linear import linear_backward, linear_forward


def test_passes_a_correct_backward():
    rng = np.random.default_rng(0)
    res = check_op(linear_forward, linear_backward,
                   {"x": rng.standard_normal((3, 4)), "w": rng.standard_normal((2, 4)), "b": rng.standard_normal(2)})
    assert res.passed and res.max_error() < 1e-7


def test_fails_a_wrong_backward_and_names_the_array():
    rng = np.random.default_rng(0)

    def wrong_backward(dy, cache):
        dx, dw, db = linear_backward(dy, cache)
        dw[1, 2] *= 1.01                      # a 1 % error in one element
        return dx, dw, db
    res = check_op(linear_forward, wrong_backward,
                   {"x": rng.standard_normal((3, 4)), "w": rng.standard_normal((2, 4)), "b": rng.standard_normal(2)})
    assert not res.passed
    assert res.worst.name == "w" and res.worst.where == (1, 2)


def test_random_upstream_catches_what_all_ones_hides():
    """sum over a row of softmax is 1 whatever x is: a backward that forgets the
    -y * sum(dy * y) term is exact for an all-ones upstream gradient, wrong otherwise."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5))

    def run():
        e = np.exp(x - x.max(-1, keepdims=True))
        y = e / e.sum(-1, keepdims=True)
        return y, lambda dy: {"x": y * dy}    # missing the -y * sum(dy * y) term
    assert not gradcheck(run, {"x": x}).passed


def test_refuses_float32():
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda: (None, None), {"x": np.zeros(3, np.float32)})
