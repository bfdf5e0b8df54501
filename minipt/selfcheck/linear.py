"""Gradcheck cases: the linear op and the Linear module."""
import numpy as np

from ..core.gradcheck import check_module, check_op
from ..nn.linear import Linear
from ..ops.linear import linear_backward, linear_forward
from . import Case


def _op():
    rng = np.random.default_rng(0)
    return check_op(linear_forward, linear_backward, {
        "x": rng.standard_normal((2, 3, 4)), "w": rng.standard_normal((5, 4)), "b": rng.standard_normal(5)}, params=("w", "b"))


def _module():
    rng = np.random.default_rng(0)
    m = Linear(4, 5, rng=rng, std=1.0).to(np.float64)
    return check_module(m, rng.standard_normal((2, 3, 4)))


CASES = [
    Case("op linear", "x (2,3,4) w (5,4)", _op),
    Case("nn.Linear", "x (2,3,4) -> (2,3,5)", _module),
]
