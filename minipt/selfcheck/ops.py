"""Gradcheck cases: every pure op (float64, random inputs and upstream gradient)."""
import numpy as np

from ..core.gradcheck import check_op
from ..ops import activations as A
from ..ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..ops.dropout import dropout_backward, dropout_forward
from ..ops.embedding import embedding_backward, embedding_forward
from ..ops.norms import (
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)
from ..ops.softmax import (
    log_softmax_backward,
    log_softmax_forward,
    softmax_backward,
    softmax_forward,
)
from . import Case


def _x(shape=(2, 3, 6), seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _unary(fwd, bwd, x=None):
    return lambda: check_op(fwd, bwd, {"x": _x() if x is None else x})


def _relu_input():
    x = _x()
    return x + np.sign(x) * 0.1          # keep away from the kink at 0


def _embedding():
    rng = np.random.default_rng(0)
    ids = np.array([[1, 3, 1], [0, 3, 3]])                     # repeated ids accumulate
    return check_op(lambda w: embedding_forward(ids, w), lambda dy, c: embedding_backward(dy, c),
                    {"w": rng.standard_normal((5, 4))}, params=("w",))


def _layer_norm():
    rng = np.random.default_rng(0)
    return check_op(layer_norm_forward, layer_norm_backward,
                    {"x": _x(), "g": rng.standard_normal(6), "b": rng.standard_normal(6)}, params=("g", "b"))


def _rms_norm():
    return check_op(rms_norm_forward, rms_norm_backward,
                    {"x": _x(), "g": np.random.default_rng(1).standard_normal(6)}, params=("g",))


def _swiglu():
    return check_op(A.swiglu_forward, A.swiglu_backward, {"a": _x(seed=1), "b": _x(seed=2)})


def _cross_entropy(smoothing):
    targets = np.array([[0, 4, -100], [2, 2, 1]])
    return lambda: check_op(lambda z: cross_entropy_forward(z, targets, label_smoothing=smoothing),
                            cross_entropy_backward, {"logits": _x((2, 3, 5))})


def _dropout():
    return check_op(dropout_forward, dropout_backward, {"x": _x()}, p=0.3, rng=np.random.default_rng(0))


CASES = [
    Case("op embedding", "ids (2,3) w (5,4)", _embedding),
    Case("op layer_norm", "x (2,3,6)", _layer_norm),
    Case("op rms_norm", "x (2,3,6)", _rms_norm),
    Case("op gelu (erf)", "x (2,3,6)", _unary(A.gelu_forward, A.gelu_backward)),
    Case("op gelu_tanh", "x (2,3,6)", _unary(A.gelu_tanh_forward, A.gelu_tanh_backward)),
    Case("op relu", "x (2,3,6)", lambda: check_op(A.relu_forward, A.relu_backward, {"x": _relu_input()})),
    Case("op tanh", "x (2,3,6)", _unary(A.tanh_forward, A.tanh_backward)),
    Case("op sigmoid", "x (2,3,6)", _unary(A.sigmoid_forward, A.sigmoid_backward)),
    Case("op swiglu", "a, b (2,3,6)", _swiglu),
    Case("op softmax", "x (2,3,6)", _unary(softmax_forward, softmax_backward)),
    Case("op log_softmax", "x (2,3,6)", _unary(log_softmax_forward, log_softmax_backward)),
    Case("op cross_entropy", "logits (2,3,5) ignore 1", _cross_entropy(0.0)),
    Case("op cross_entropy smooth", "logits (2,3,5) eps 0.1", _cross_entropy(0.1)),
    Case("op dropout", "x (2,3,6) p 0.3", _dropout),
]
