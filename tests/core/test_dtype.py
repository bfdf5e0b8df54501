"""Layers compute in the dtype they are given: float32 stays float32 end to end (no silent
NEP 50 upcast by a NumPy float64 scalar), float64 stays float64."""
import numpy as np
import pytest

from minipt.nn import (
    GELU,
    Dropout,
    Embedding,
    FeedForward,
    LayerNorm,
    Linear,
    RMSNorm,
    Sequential,
    Tanh,
)
from minipt.ops.cross_entropy import cross_entropy_backward, cross_entropy_forward


def modules(dtype):
    rng = np.random.default_rng(0)
    return [
        Linear(6, 6, rng=rng, dtype=dtype), LayerNorm(6, dtype=dtype), RMSNorm(6, dtype=dtype),
        Dropout(0.2, rng=np.random.default_rng(1)), GELU("none"), GELU("tanh"),
        FeedForward(6, 12, rng=rng, activation="gelu_tanh", dtype=dtype),
        FeedForward(6, 12, rng=rng, activation="swiglu", dtype=dtype),
        Sequential(Linear(6, 6, rng=rng, dtype=dtype), Tanh()),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_modules_keep_dtype(dtype):
    x = np.random.default_rng(0).standard_normal((2, 3, 6)).astype(dtype)
    for m in modules(dtype):
        y = m(x)
        dx = m.backward(np.ones_like(y))
        assert y.dtype == dtype and dx.dtype == dtype, type(m).__name__
        assert all(g.dtype == dtype for _, g in m.named_grads()), type(m).__name__


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_and_loss_keep_dtype(dtype):
    emb = Embedding(5, 4, rng=np.random.default_rng(0), dtype=dtype)
    h = emb(np.array([[1, 2, 2]]))
    emb.backward(np.ones_like(h))
    loss, cache = cross_entropy_forward(h, np.array([[0, 3, 1]]))
    assert h.dtype == dtype and loss.dtype == dtype and emb.grads["weight"].dtype == dtype
    assert cross_entropy_backward(1.0, cache).dtype == dtype


def test_check_same_dtype_returns_the_one_dtype_and_names_every_array_on_a_mismatch():
    from minipt.core.checks import check_same_dtype
    a32, b32, c64 = np.zeros(2, np.float32), np.ones(3, np.float32), np.zeros(2)
    assert check_same_dtype(x=a32, bias=None, w=b32) == np.float32
    assert check_same_dtype(x=c64) == np.float64 and check_same_dtype(bias=None) is None
    with pytest.raises(TypeError, match=r"dtype mismatch: x float32, w float32, b float64 \(cast"):
        check_same_dtype(x=a32, w=b32, skipped=None, b=c64)
    with pytest.raises(TypeError, match="ids: expected dtype float32 or float64, got int64"):
        check_same_dtype(x=a32, ids=np.zeros(2, np.int64))
