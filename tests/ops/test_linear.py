import numpy as np
import pytest

from minipt import check_op
from minipt.ops.linear import linear_backward, linear_forward


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradcheck(shape, bias):
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal(shape), "w": rng.standard_normal((6, 4))}
    inputs["b"] = rng.standard_normal(6) if bias else None
    if not bias:
        fwd = lambda x, w: linear_forward(x, w, None)
        bwd = lambda dy, c: linear_backward(dy, c)[:2]
        inputs.pop("b")
        res = check_op(fwd, bwd, inputs)
    else:
        res = check_op(linear_forward, linear_backward, inputs)
    assert res.passed, str(res)


def test_linear_bad_input():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="expected last dimension 4"):
        linear_forward(x, np.zeros((5, 4), np.float32), None)
    with pytest.raises(TypeError, match="dtype mismatch"):
        linear_forward(np.zeros((2, 4)), np.zeros((5, 4), np.float32), None)
