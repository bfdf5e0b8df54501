"""TransformerStack: ALBERT sharing, per-layer masks (GPT-3), final norm, shared bias
gradient, bad input. (Gradchecks: minipt/selfcheck/blocks.py.)"""
import numpy as np
import pytest

from minipt.nn import masks
from minipt.nn.block import TransformerBlock
from minipt.nn.stack import TransformerStack

B, T, C, H, F = 2, 6, 8, 2, 16


def stack(n=3, seed=0, **kw):
    s = TransformerStack(n, d_model=C, n_heads=H, d_ff=F, rng=np.random.default_rng(seed), dtype=np.float64, **kw)
    r = np.random.default_rng(seed + 1)
    for _, p in s.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.3
    return s


def x_(seed=2):
    return np.random.default_rng(seed).standard_normal((B, T, C))


def test_shared_stack_equals_separate_blocks_with_copied_weights_and_sums_their_gradients():
    shared, separate = stack(share=True), stack()
    assert shared.num_parameters() * 3 == separate.num_parameters()
    assert all(name.startswith("blocks.0.") for name in shared.parameters())
    first = shared.blocks[0].parameters()
    for block in separate.blocks:
        for name, p in block.parameters().items():
            p[...] = first[name]
    x, dy = x_(), x_(3)
    np.testing.assert_allclose(shared(x, causal=True), separate(x, causal=True), rtol=0, atol=1e-12)
    shared.zero_grad()
    separate.zero_grad()
    np.testing.assert_allclose(shared.backward(dy), separate.backward(dy), rtol=0, atol=1e-12)
    for name, g in shared.blocks[0].gradients().items():
        total = sum(block.gradients()[name] for block in separate.blocks)
        np.testing.assert_allclose(g, total, rtol=0, atol=1e-12)


def test_shared_stack_keeps_ties_through_dtype_cast():
    s = TransformerStack(2, share=True, d_model=C, n_heads=H, d_ff=F, rng=np.random.default_rng(0))
    s.to(np.float64)
    assert s.blocks[1].attn.c_attn.params["weight"] is s.blocks[0].attn.c_attn.params["weight"]
    assert s.blocks[1].ln_2.grads["bias"] is s.blocks[0].ln_2.grads["bias"]


def test_layer_masks_list_and_callable_agree():
    band = masks.banded(T, 2)
    as_list = stack(2, layer_masks=[None, band])
    as_call = stack(2, layer_masks=lambda i, T, S: masks.banded(T, 2, S) if i % 2 else None)
    x = x_()
    np.testing.assert_array_equal(as_list(x, causal=True), as_call(x, causal=True))
    assert not np.allclose(as_list(x, causal=True), stack(2)(x, causal=True))
    # given per call, they override the constructor's
    np.testing.assert_array_equal(stack(2)(x, causal=True, layer_masks=[None, band]), as_list(x, causal=True))


def test_banded_layers_limit_how_far_information_travels():
    """One banded layer (window 2) lets position t see t-1, t only: the output at t
    does not depend on inputs before t-1; dense causal layers reach further."""
    s = stack(1, layer_masks=[masks.banded(T, 2)])
    x = x_()
    y = s(x)
    dx = s.backward(_only_last(y))                                         # d y[:, -1].sum() / dx
    assert np.all(dx[:, :T - 2] == 0) and np.all(np.abs(dx[:, T - 2:]).sum(-1) > 0)
    d = stack(1)
    d(x, causal=True)
    assert np.all(np.abs(d.backward(_only_last(y))).sum(-1) > 0)


def _only_last(y):
    g = np.zeros_like(y)
    g[:, -1] = 1.0
    return g


def test_layer_mask_is_anded_with_the_stack_mask():
    pad = masks.padding(np.array([T, 3]), T)                              # (B, 1, T)
    band = masks.banded(T, 3)
    s = stack(2, layer_masks=[band, None])
    x = x_()
    y = s(x, mask=pad)
    blocks = stack(2)
    ref = blocks.blocks[1](blocks.blocks[0](x, mask=pad & band), mask=pad)
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-12)


def test_final_norm_and_its_kind():
    assert "ln_f.weight" in stack(final_norm=True).parameters()
    assert "ln_f.bias" not in stack(final_norm=True, norm="rms").parameters()
    assert "ln_f.weight" not in stack().parameters()


def test_shared_bias_gradient_is_summed_over_layers():
    s = stack(3)
    bias = np.random.default_rng(4).standard_normal((H, T, T))
    y = s(x_(), causal=True, attn_bias=bias)
    s.backward(np.ones_like(y))
    total = sum(b.attn.dbias for b in s.blocks)
    np.testing.assert_allclose(s.dattn_bias, total, rtol=0, atol=1e-15)
    assert s.dcross_bias is None


def test_decoder_stack_sums_dmemory_over_layers():
    s = stack(2, cross_attention=True)
    mem = np.random.default_rng(5).standard_normal((B, 4, C))
    y = s(x_(), mem, causal=True)
    dx, dmem = s.backward(np.ones_like(y))
    assert dx.shape == (B, T, C) and dmem.shape == mem.shape
    b0, b1 = s.blocks                                     # the same blocks run by hand
    y2 = b1(b0(x_(), mem, causal=True), mem, causal=True)
    dh, dm1 = b1.backward(np.ones_like(y2))
    dx0, dm0 = b0.backward(dh)
    np.testing.assert_allclose(dmem, dm0 + dm1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dx, dx0, rtol=0, atol=1e-12)


def test_block_kwargs_reach_every_block():
    s = TransformerStack(2, d_model=C, n_heads=H, d_ff=F, rng=np.random.default_rng(0), prenorm=False,
                         norm="rms", activation="swiglu", bias=False, out_std=0.001)
    assert all(isinstance(b, TransformerBlock) and not b.prenorm for b in s.blocks)
    assert "blocks.1.mlp.w2.weight" in s.parameters()
    assert s.blocks[1].mlp.w2.params["weight"].std() < 0.002


def test_bad_input_names_the_problem():
    kw = dict(d_model=C, n_heads=H, d_ff=F, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_layers must be an integer >= 1, got 0"):
        TransformerStack(0, **kw)
    with pytest.raises(ValueError, match="layer_masks has 1 entries for 2 layers"):
        TransformerStack(2, layer_masks=[None], **kw)
    with pytest.raises(TypeError, match="needs the block arguments"):
        TransformerStack(2)
    s = TransformerStack(2, **kw)
    x = np.zeros((1, 3, C), np.float32)
    with pytest.raises(ValueError, match="layer_masks has 3 entries for 2 layers"):
        s(x, layer_masks=[None] * 3)
    with pytest.raises(ValueError, match="no cross-attention"):
        s(x, x)
    from minipt.nn.kv_cache import KVCache
    with pytest.raises(ValueError, match="cache has 3 layer slots for 2 layers"):
        s(x, cache=KVCache(3))
