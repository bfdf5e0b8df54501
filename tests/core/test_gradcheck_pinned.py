"""The checker pinned: every gradcheck in the suite is only as strict as this module.

A checker whose tolerance drifts (5,000 times looser still passes every correct backward)
or that stops looking at input gradients keeps the whole suite green, so here it must
fail backwards that are wrong by a known small amount, in parameters and in inputs, and
must report the inputs it checked."""
import numpy as np
import pytest

from minipt import check_module, check_op
from minipt.core.gradcheck import TOLERANCE, GradcheckResult
from minipt.nn.linear import Linear
from minipt.ops.linear import linear_backward, linear_forward


def linear_inputs(seed=0):
    r = np.random.default_rng(seed)
    return {"x": r.standard_normal((3, 5)), "w": r.standard_normal((4, 5)), "b": r.standard_normal(4)}


def scaled(which: int, factor: float):
    """linear_backward with gradient number ``which`` (0 dx, 1 dw, 2 db) multiplied by ``factor``."""
    def backward(dy, cache):
        grads = list(linear_backward(dy, cache))
        grads[which] = grads[which] * factor
        return tuple(grads)
    return backward


def test_the_tolerance_is_pinned_at_1e_6():
    assert TOLERANCE == 1e-6
    assert GradcheckResult().tol == 1e-6
    res = check_op(linear_forward, linear_backward, linear_inputs(), params=("w", "b"))
    assert res.tol == 1e-6


def test_a_correct_backward_is_far_inside_the_tolerance():
    res = check_op(linear_forward, linear_backward, linear_inputs(), params=("w", "b"))
    assert res.passed and res.max_error() < 1e-8          # 100x margin: the tolerance is not tight


@pytest.mark.parametrize("rel", [1e-4, 1e-5])
@pytest.mark.parametrize("which,name", [(0, "x"), (1, "w"), (2, "b")])
def test_a_small_relative_error_in_any_gradient_fails(which, name, rel):
    """A backward off by 1e-4 (or 1e-5) relative, in one gradient only, fails and is named."""
    res = check_op(linear_forward, scaled(which, 1.0 + rel), linear_inputs(), params=("w", "b"))
    assert not res.passed
    assert res.worst.name == name and res.worst.max_rel_error == pytest.approx(rel, rel=0.05)


def test_a_wrong_input_gradient_fails_with_right_parameter_gradients():
    res = check_op(linear_forward, scaled(0, 1.0 + 1e-4), linear_inputs(), params=("w", "b"))
    assert res.max_error("param") < 1e-8                   # the weights alone would pass
    assert res.max_error("input") > 5e-5 and not res.passed
    assert {a.name: a.kind for a in res.arrays} == {"x": "input", "w": "param", "b": "param"}


class WrongInputGradient(Linear):
    """A Linear whose parameter gradients are right and whose input gradient is 1e-4 off."""

    def backward(self, dy):
        return super().backward(dy) * (1.0 + 1e-4)


def module(cls=Linear):
    m = cls(5, 4, rng=np.random.default_rng(0), dtype=np.float64)
    m.params["bias"][...] = np.random.default_rng(1).standard_normal(4)
    return m


def test_check_module_reports_every_input_and_parameter_element():
    x = np.random.default_rng(2).standard_normal((3, 5))
    res = check_module(module(), x)
    assert res.passed
    by_name = {a.name: a for a in res.arrays}
    assert by_name["input0"].kind == "input" and by_name["input0"].checked == x.size
    assert by_name["weight"].kind == "param" and by_name["weight"].checked == 20
    assert by_name["bias"].checked == 4


def test_check_module_fails_a_wrong_input_gradient():
    x = np.random.default_rng(2).standard_normal((3, 5))
    res = check_module(module(WrongInputGradient), x)
    assert res.max_error("param") < 1e-8
    assert not res.passed and res.worst.name == "input0"


def test_max_checks_samples_but_still_catches_a_uniform_error():
    res = check_op(linear_forward, scaled(1, 1.0 + 1e-4), linear_inputs(), params=("w", "b"), max_checks=3)
    assert {a.name: a.checked for a in res.arrays} == {"x": 3, "w": 3, "b": 3}
    assert not res.passed
