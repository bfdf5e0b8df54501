"""Attention values and bad input (gradients: the selfcheck cases, every mask kind)."""
import numpy as np
import pytest

from minipt.nn import masks
from minipt.ops.attention import attention_backward, attention_forward


def qkv(B=2, H=2, T=4, S=4, D=3, dtype=np.float64):
    r = np.random.default_rng(0)
    return [r.standard_normal(s).astype(dtype) for s in ((B, H, T, D), (B, H, S, D), (B, H, S, D))]


def test_causal_fast_path_equals_explicit_mask():
    q, k, v = qkv()
    a, _ = attention_forward(q, k, v, causal=True)
    b, _ = attention_forward(q, k, v, mask=masks.causal(4))
    assert np.allclose(a, b, atol=1e-15)


def test_causal_offset_for_cached_queries():
    q, k, v = qkv()
    full, _ = attention_forward(q, k, v, causal=True)
    last, _ = attention_forward(q[:, :, 2:], k, v, causal=True)      # T 2 queries, S 4 keys
    assert np.allclose(full[:, :, 2:], last, atol=1e-14)


def test_fully_masked_row_is_zero_not_nan():
    q, k, v = qkv()
    out, cache = attention_forward(q, k, v, mask=masks.padding([4, 0], 4))
    assert np.all(np.isfinite(out)) and not np.any(out[1])
    grads = attention_backward(np.ones_like(out), cache)
    assert all(np.all(np.isfinite(g)) for g in grads[:3]) and not np.any(grads[0][1])


def test_weights_sum_to_one_and_float32_kept():
    q, k, v = qkv(dtype=np.float32)
    out, cache = attention_forward(q, k, v, causal=True)
    assert out.dtype == np.float32 and cache["p"].dtype == np.float32
    assert np.allclose(cache["p"].sum(-1), 1, atol=1e-6)


def test_bad_input_names_sizes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="disagree"):
        attention_forward(q[..., :2], k, v)
    with pytest.raises(ValueError, match="same shape"):
        attention_forward(q, k, v[:, :, :3])
    with pytest.raises(ValueError, match=r"mask shape \(3, 3\)"):
        attention_forward(q, k, v, mask=masks.causal(3))
    with pytest.raises(TypeError, match="boolean"):
        attention_forward(q, k, v, mask=np.ones((4, 4)))
    with pytest.raises(ValueError, match="dropout_p"):
        attention_forward(q, k, v, dropout_p=1.0)
