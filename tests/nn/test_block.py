"""TransformerBlock: a GPT-2 block against a from-the-equations reference, post-LN output
statistics, names, dropout, dtype and bad input. (Gradchecks: minipt/selfcheck/blocks.py.)"""
import math

import numpy as np
import pytest

from minipt.nn.block import TransformerBlock

B, T, S, C, H, F = 2, 5, 3, 8, 2, 16


def block(**kw):
    m = TransformerBlock(C, H, F, rng=np.random.default_rng(0), dtype=np.float64, **kw)
    r = np.random.default_rng(1)
    for _, p in m.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.3
    return m


def x_(seed=2, shape=(B, T, C)):
    return np.random.default_rng(seed).standard_normal(shape)


def ln(x, g, b, eps=1e-5):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_block(x, p):
    """picoGPT-style GPT-2 block from a {name: array} dict."""
    def lin(h, name):
        return h @ p[name + ".weight"].T + p[name + ".bias"]

    def attn(h):
        q, k, v = np.split(lin(h, "attn.c_attn"), 3, axis=-1)               # (B, T, C) each
        heads = lambda t: t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)  # (B, H, T, D)
        s = heads(q) @ heads(k).transpose(0, 1, 3, 2) / math.sqrt(C // H)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        o = (w / w.sum(-1, keepdims=True)) @ heads(v)                       # (B, H, T, D)
        return lin(o.transpose(0, 2, 1, 3).reshape(B, T, C), "attn.c_proj")

    h = x + attn(ln(x, p["ln_1.weight"], p["ln_1.bias"]))
    return h + lin(gelu_tanh(lin(ln(h, p["ln_2.weight"], p["ln_2.bias"]), "mlp.c_fc")), "mlp.c_proj")


def test_pre_ln_block_equals_gpt2_reference():
    m = block()
    x = x_()
    np.testing.assert_allclose(m(x, causal=True), gpt2_block(x, m.parameters()), rtol=0, atol=1e-12)


def test_post_ln_output_is_normalised():
    m = block(prenorm=False, norm="layer")
    m.ln_2.params["weight"][...] = 1.0
    m.ln_2.params["bias"][...] = 0.0
    y = m(x_())
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1.0, atol=1e-4)                # eps 1e-5 in the denominator
    r = block(prenorm=False, norm="rms")
    r.ln_2.params["weight"][...] = 1.0
    np.testing.assert_allclose(np.sqrt((r(x_()) ** 2).mean(-1)), 1.0, atol=1e-4)


def test_pre_ln_is_residual_with_zero_branches():
    m = block()
    m.attn.c_proj.params["weight"][...] = 0
    m.attn.c_proj.params["bias"][...] = 0
    m.mlp.c_proj.params["weight"][...] = 0
    m.mlp.c_proj.params["bias"][...] = 0
    x = x_()
    np.testing.assert_array_equal(m(x), x)
    np.testing.assert_array_equal(m.backward(np.ones_like(x)).dx, np.ones_like(x))


def test_names_follow_hugging_face_gpt2():
    names = list(block().parameters())
    assert names == ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                     "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                     "mlp.c_proj.weight", "mlp.c_proj.bias"]
    dec = list(block(cross_attention=True, norm="rms", bias=False, activation="swiglu").parameters())
    assert dec == ["ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight", "ln_cross.weight",
                   "cross_attn.q_proj.weight", "cross_attn.kv_proj.weight", "cross_attn.c_proj.weight",
                   "ln_2.weight", "mlp.w1.weight", "mlp.w3.weight", "mlp.w2.weight"]


def test_scaled_residual_init_reaches_both_output_projections():
    m = TransformerBlock(64, 4, 256, rng=np.random.default_rng(0), out_std=0.02 / math.sqrt(2 * 12))
    for proj in (m.attn.c_proj, m.mlp.c_proj):
        assert abs(proj.params["weight"].std() - 0.02 / math.sqrt(24)) < 3e-4
    assert abs(m.mlp.c_fc.params["weight"].std() - 0.02) < 1e-3


def test_decoder_block_returns_dmemory_and_uses_memory():
    m = block(cross_attention=True)
    x, mem = x_(), x_(3, (B, S, C))
    y = m(x, mem, causal=True)
    assert not np.allclose(y, m(x, mem * 2, causal=True))
    m(x, mem, causal=True)
    dx, dmem, _, _ = m.backward(np.ones_like(y))
    assert dx.shape == x.shape and dmem.shape == mem.shape and np.any(dmem)


def test_residual_dropout_train_and_eval():
    m = block(dropout=0.3)
    ref = block()                                                        # same weights (same seeds)
    x = x_()
    assert not np.allclose(m(x), ref(x))
    g = [r for _, r in m.generators()]
    assert len(g) == 3 and len({id(r) for r in g}) == 3     # attention, attn branch, mlp branch
    m.eval()
    np.testing.assert_array_equal(m(x), ref(x))


def test_float32_block_stays_float32():
    m = TransformerBlock(C, H, F, rng=np.random.default_rng(0), activation="swiglu", norm="rms", rope=True,
                         cross_attention=True, dropout=0.1)
    x, mem = x_().astype(np.float32), x_(3, (B, S, C)).astype(np.float32)
    y = m(x, mem, causal=True, positions=np.arange(T))
    dx, dmem, _, _ = m.backward(np.ones_like(y))
    assert y.dtype == dx.dtype == dmem.dtype == np.float32
    assert all(g.dtype == np.float32 for g in m.gradients().values())


def test_bad_input_names_the_problem():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="norm must be 'layer' or 'rms', got 'batch'"):
        TransformerBlock(C, H, F, rng=rng, norm="batch")
    with pytest.raises(ValueError, match="d_ff must be an integer >= 1, got 0"):
        TransformerBlock(C, H, 0, rng=rng)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        TransformerBlock(C, H, F, rng=rng, activation="swish")
    with pytest.raises(ValueError, match="d_model 8 is not divisible by n_heads 3"):
        TransformerBlock(C, 3, F, rng=rng)
    m = TransformerBlock(C, H, F, rng=rng)
    with pytest.raises(ValueError, match="no cross-attention"):
        m(np.zeros((1, 2, C), np.float32), np.zeros((1, 2, C), np.float32))
    with pytest.raises(ValueError, match="expected last dimension 8"):
        m(np.zeros((1, 2, 4), np.float32))
    with pytest.raises(ValueError, match="needs the encoder memory"):
        TransformerBlock(C, H, F, rng=rng, cross_attention=True)(np.zeros((1, 2, C), np.float32))


@pytest.mark.parametrize("prenorm", [True, False])
@pytest.mark.parametrize("cross", [False, True])
def test_forward_and_backward_leave_their_inputs_and_the_upstream_gradient_alone(prenorm, cross):
    """The residual adds write into the sub-layers' new arrays, never into x, memory or dy;
    a second backward from the same forward gives the same gradients."""
    m = block(prenorm=prenorm, cross_attention=cross)
    x, mem, dy = x_(), x_(3, (B, S, C)), x_(4)
    keep = x.copy(), mem.copy(), dy.copy()
    y = m(x, mem if cross else None)
    first = m.backward(dy)
    assert all(np.array_equal(a, b) for a, b in zip((x, mem, dy), keep))
    assert not any(np.shares_memory(y, a) for a in (x, mem))
    m(x, mem if cross else None)
    second = m.backward(dy)
    assert np.array_equal(first.dx, second.dx) and not np.shares_memory(first.dx, dy)


def test_residual_adds_into_the_branch_only_when_that_is_safe():
    from minipt.nn.block import residual
    x, f = x_(), x_(5)
    want = x + f
    out = residual(x, f)
    assert out is f and np.array_equal(out, want) and np.array_equal(x, x_())
    same = residual(x, x)                                    # one array on both sides: a new one
    assert same is not x and np.array_equal(same, 2 * x_()) and np.array_equal(x, x_())
    wide = residual(x.astype(np.float32), x_(5))             # a float64 branch is not cast down
    assert wide.dtype == np.float64 and np.array_equal(x.astype(np.float32) + x_(5), wide)
