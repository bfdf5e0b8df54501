"""MultiHeadAttention: values against a per-head loop, head layout, RoPE, bias, dropout,
dtype, bad input. (Gradchecks are in minipt/selfcheck/blocks.py.)"""
import numpy as np
import pytest

from minipt.nn.attention import MultiHeadAttention
from minipt.nn.kv_cache import KVCache

B, T, S, C, H = 2, 5, 3, 12, 3
D = C // H


def mha(**kw):
    m = MultiHeadAttention(C, H, rng=np.random.default_rng(0), dtype=np.float64, **kw)
    r = np.random.default_rng(1)
    for _, p in m.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.3
    return m


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference(x, mem, wq, bq, wk, bk, wv, bv, wo, bo, causal=False):
    """One (b, h) at a time, straight from the equations."""
    out = np.zeros((x.shape[0], x.shape[1], C))
    for b in range(x.shape[0]):
        heads = []
        for h in range(H):
            cols = slice(h * D, (h + 1) * D)
            q = x[b] @ wq[cols].T + bq[cols]                        # (T, D)
            k = mem[b] @ wk[cols].T + bk[cols]                      # (S, D)
            v = mem[b] @ wv[cols].T + bv[cols]
            s = q @ k.T / np.sqrt(D)                                # (T, S)
            if causal:
                s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
            heads.append(softmax(s) @ v)
        out[b] = np.concatenate(heads, axis=1) @ wo.T + bo
    return out


def test_self_attention_matches_per_head_loop_with_gpt2_layout():
    m = mha()
    x = np.random.default_rng(2).standard_normal((B, T, C))
    w, b = m.c_attn.params["weight"], m.c_attn.params["bias"]     # (3C, C): q, k, v thirds
    ref = reference(x, x, w[:C], b[:C], w[C:2 * C], b[C:2 * C], w[2 * C:], b[2 * C:],
                    m.c_proj.params["weight"], m.c_proj.params["bias"], causal=True)
    np.testing.assert_allclose(m(x, causal=True), ref, rtol=0, atol=1e-12)


def test_cross_attention_matches_per_head_loop():
    m = mha(cross=True)
    r = np.random.default_rng(3)
    x, mem = r.standard_normal((B, T, C)), r.standard_normal((B, S, C))
    wkv, bkv = m.kv_proj.params["weight"], m.kv_proj.params["bias"]     # (2C, C): k, v
    ref = reference(x, mem, m.q_proj.params["weight"], m.q_proj.params["bias"], wkv[:C], bkv[:C],
                    wkv[C:], bkv[C:], m.c_proj.params["weight"], m.c_proj.params["bias"])
    y = m(x, mem)
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-12)
    dx, dmem, _ = m.backward(np.ones_like(y))
    assert dx.shape == x.shape and dmem.shape == mem.shape


def test_parameter_names_follow_hugging_face():
    assert list(mha().parameters()) == ["c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"]
    assert list(mha(cross=True, bias=False).parameters()) == ["q_proj.weight", "kv_proj.weight", "c_proj.weight"]


def test_out_std_initialises_c_proj_only():
    m = MultiHeadAttention(64, 4, rng=np.random.default_rng(0), out_std=0.002)
    assert abs(m.c_proj.params["weight"].std() - 0.002) < 2e-4
    assert abs(m.c_attn.params["weight"].std() - 0.02) < 2e-3


def test_rope_output_depends_only_on_relative_positions():
    m = mha(rope=True)
    x = np.random.default_rng(4).standard_normal((B, T, C))
    a = m(x, causal=True, positions=np.arange(T))
    b = m(x, causal=True, positions=np.arange(T) + 17)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    c = m(x, causal=True, positions=np.arange(T) * 2)                  # other distances: other output
    assert not np.allclose(a, c)


def test_weights_are_kept_when_asked_and_rows_sum_to_one():
    m = mha()
    x = np.random.default_rng(5).standard_normal((B, T, C))
    m(x, causal=True, return_weights=True)
    p = m.last_weights
    assert p.shape == (B, H, T, T)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-12)
    assert np.all(p[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0)
    m(x)
    assert m.last_weights is None


def test_bias_gradient_is_returned_only_with_a_bias():
    m = mha()
    x = np.random.default_rng(6).standard_normal((B, T, C))
    bias = np.random.default_rng(7).standard_normal((H, T, T))
    y = m(x, bias=bias)
    g = m.backward(np.ones_like(y))
    assert g.dbias.shape == (H, T, T) and np.any(g.dbias) and g.dmemory is None
    assert m.backward(np.ones_like(m(x))).dbias is None


def test_attention_dropout_only_in_training():
    m = mha(dropout=0.5)
    x = np.random.default_rng(8).standard_normal((B, T, C))
    ref = mha()                                                         # same weights, no dropout
    for (_, a), (_, b) in zip(m.named_parameters(), ref.named_parameters()):
        b[...] = a
    assert not np.allclose(m(x), ref(x))
    m.eval()
    np.testing.assert_array_equal(m(x), ref(x))


def test_float32_stays_float32():
    m = MultiHeadAttention(C, H, rng=np.random.default_rng(0), rope=True)
    x = np.random.default_rng(0).standard_normal((B, T, C)).astype(np.float32)
    y = m(x, causal=True, positions=np.arange(T))
    dx = m.backward(np.ones_like(y)).dx
    assert y.dtype == dx.dtype == np.float32
    assert all(g.dtype == np.float32 for g in m.gradients().values())


def test_bad_input_names_the_problem():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="d_model 10 is not divisible by n_heads 3"):
        MultiHeadAttention(10, 3, rng=rng)
    with pytest.raises(ValueError, match="even head size"):
        MultiHeadAttention(9, 3, rng=rng, rope=True)
    with pytest.raises(ValueError, match="self-attention only"):
        MultiHeadAttention(C, H, rng=rng, rope=True, cross=True)
    with pytest.raises(ValueError, match="dropout must be in"):
        MultiHeadAttention(C, H, rng=rng, dropout=1.0)
    m = MultiHeadAttention(C, H, rng=rng)
    with pytest.raises(ValueError, match=f"x: expected last dimension {C}, got shape"):
        m(np.zeros((1, 2, 6), np.float32))
    with pytest.raises(ValueError, match="x: expected 3 dimensions"):
        m(np.zeros((2, C), np.float32))
    with pytest.raises(ValueError, match="build with cross=True"):
        m(np.zeros((1, 2, C), np.float32), np.zeros((1, 2, C), np.float32))
    with pytest.raises(RuntimeError, match="needs a forward"):
        MultiHeadAttention(C, H, rng=rng).backward(np.zeros((1, 2, C), np.float32))
    cross = MultiHeadAttention(C, H, rng=rng, cross=True)
    with pytest.raises(ValueError, match="needs the encoder memory"):
        cross(np.zeros((1, 2, C), np.float32))
    with pytest.raises(ValueError, match=f"memory: expected last dimension {C}, got shape"):
        cross(np.zeros((1, 2, C), np.float32), np.zeros((1, 3, C + 1), np.float32))
    with pytest.raises(ValueError, match="memory: expected batch 1"):
        cross(np.zeros((1, 2, C), np.float32), np.zeros((2, 3, C), np.float32))
    rope = MultiHeadAttention(C, H, rng=rng, rope=True)
    with pytest.raises(ValueError, match="needs positions"):
        rope(np.zeros((1, 2, C), np.float32))
    with pytest.raises(ValueError, match=r"positions: expected shape \(2,\), got \(3,\)"):
        rope(np.zeros((1, 2, C), np.float32), positions=np.arange(3))


def test_backward_after_cached_forward_refuses():
    m = mha()
    m(np.zeros((1, 1, C)), causal=True, cache=KVCache(1)[0])
    with pytest.raises(RuntimeError, match="inference only"):
        m.backward(np.zeros((1, 1, C)))


def test_gradcheck_with_a_per_sequence_bias_and_mask():
    """A (B, H, T, S) bias (its gradient per sequence) under a (B, 1, T, S) padding mask."""
    from minipt.core.gradcheck import check_module
    from minipt.core.module import Module
    pad = np.array([[True] * 4, [True, True, False, False]])[:, None, None, :]   # (B, 1, 1, S) -> (B, 1, T, S)
    pad = np.broadcast_to(pad, (2, 1, 4, 4)).copy()

    class Biased(Module):
        def __init__(self):
            super().__init__()
            self.attn = MultiHeadAttention(8, 2, rng=np.random.default_rng(0), dtype=np.float64, std=0.5)

        def forward(self, x, bias):
            return self.attn(x, mask=pad, bias=bias)

        def backward(self, dy):
            g = self.attn.backward(dy)
            return g.dx, g.dbias
    r = np.random.default_rng(1)
    res = check_module(Biased(), r.standard_normal((2, 4, 8)), r.standard_normal((2, 2, 4, 4)))
    assert res.passed, str(res)
