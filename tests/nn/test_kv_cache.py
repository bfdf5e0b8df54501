"""KV cache: step-by-step decoding equals the full causal forward (float64, 1e-12) for a
decoder-only stack (learned positions, RoPE, T5 bias, GPT-3 banded layers) and for an
encoder-decoder decoder stack (cross k, v computed once); growth, limits, beam reorder."""
import numpy as np
import pytest

from minipt.nn import masks
from minipt.nn.kv_cache import KVCache, LayerCache
from minipt.nn.positions import LearnedPositions, T5RelativeBias
from minipt.nn.stack import TransformerStack

B, C, H, F, L = 2, 8, 2, 16, 2


def stack(**kw):
    s = TransformerStack(L, d_model=C, n_heads=H, d_ff=F, rng=np.random.default_rng(0), final_norm=True,
                         dtype=np.float64, **kw)
    r = np.random.default_rng(1)
    for _, p in s.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.3
    return s


def decode(run, T, chunks=None):
    """Feed positions in chunks (default one token at a time) through a fresh cache."""
    cache, outs, t = KVCache(L), [], 0
    for size in chunks or [1] * T:
        assert cache.length == t
        outs.append(run(t, size, cache))
        t += size
    assert cache.length == T
    return np.concatenate(outs, axis=1)


def test_learned_positions_decoder_only():
    s, wpe = stack(), LearnedPositions(16, C, rng=np.random.default_rng(2), dtype=np.float64)
    x = np.random.default_rng(3).standard_normal((B, 7, C))
    full = s(x + wpe(7), causal=True)
    step = lambda t, n, cache: s(x[:, t:t + n] + wpe(n, offset=cache.length), causal=True, cache=cache)
    np.testing.assert_allclose(decode(step, 7), full, rtol=0, atol=1e-12)
    np.testing.assert_allclose(decode(step, 7, chunks=[4, 1, 2]), full, rtol=0, atol=1e-12)   # prefill + steps


def test_rope_decoder_only():
    s = stack(rope=True, norm="rms", activation="swiglu", bias=False)
    x = np.random.default_rng(4).standard_normal((B, 6, C))
    full = s(x, causal=True, positions=np.arange(6))
    step = lambda t, n, cache: s(x[:, t:t + n], causal=True, positions=np.arange(t, t + n), cache=cache)
    np.testing.assert_allclose(decode(step, 6), full, rtol=0, atol=1e-12)


def test_t5_bias_with_offset():
    s, rel = stack(norm="rms"), T5RelativeBias(H, bidirectional=False, num_buckets=8, max_distance=16,
                                                rng=np.random.default_rng(5), dtype=np.float64)
    x = np.random.default_rng(6).standard_normal((B, 6, C))
    full = s(x, causal=True, attn_bias=rel(6))
    step = lambda t, n, cache: s(x[:, t:t + n], causal=True, attn_bias=rel(n, t + n, offset=t), cache=cache)
    np.testing.assert_allclose(decode(step, 6), full, rtol=0, atol=1e-12)


def test_gpt3_banded_layers():
    band = lambda i, T, S: masks.banded(T, 2, S) if i % 2 else None
    s = stack(layer_masks=band)
    x = np.random.default_rng(7).standard_normal((B, 6, C))
    full = s(x, causal=True)
    step = lambda t, n, cache: s(x[:, t:t + n], causal=True, cache=cache)
    np.testing.assert_allclose(decode(step, 6), full, rtol=0, atol=1e-12)
    np.testing.assert_allclose(decode(step, 6, chunks=[3, 3]), full, rtol=0, atol=1e-12)


def test_encoder_decoder_cross_kv_computed_once():
    s = stack(cross_attention=True)
    r = np.random.default_rng(8)
    x, memory = r.standard_normal((B, 5, C)), r.standard_normal((B, 4, C))
    pad = masks.padding(np.array([4, 2]), 4)                              # (B, 1, S) encoder padding
    full = s(x, memory, causal=True, memory_mask=pad)
    firsts = []

    def step(t, n, cache):
        y = s(x[:, t:t + n], memory if t == 0 else None, causal=True, memory_mask=pad, cache=cache)
        firsts.append(cache[1].cross_k)
        return y
    np.testing.assert_allclose(decode(step, 5), full, rtol=0, atol=1e-12)
    assert all(k is firsts[0] for k in firsts)                            # the very same array every step


def test_backward_after_cached_forward_refuses_and_leaves_grads_alone():
    s = stack()
    s.zero_grad()
    y = s(np.ones((1, 1, C)), causal=True, cache=KVCache(L))
    with pytest.raises(RuntimeError, match="inference only"):
        s.backward(np.ones_like(y))
    with pytest.raises(RuntimeError, match="inference only"):
        s.blocks[0].backward(np.ones_like(y))
    assert not any(np.any(g) for g in s.gradients().values())
    s(np.ones((1, 2, C)), causal=True)                                    # a plain forward trains again
    s.backward(np.ones((1, 2, C)))


def test_growth_beyond_initial_capacity_keeps_every_entry():
    c = LayerCache()
    r = np.random.default_rng(9)
    parts = [r.standard_normal((B, H, n, 4)) for n in (3, 14, 1, 20)]
    for p in parts:
        k, v = c.append(p, -p)
    np.testing.assert_array_equal(k, np.concatenate(parts, axis=2))
    np.testing.assert_array_equal(v, -k)
    assert c.length == 38


def test_max_length_and_shape_errors():
    c = LayerCache(max_length=4)
    c.append(np.zeros((1, H, 3, 4)), np.zeros((1, H, 3, 4)))
    with pytest.raises(ValueError, match="sequence length 5 exceeds the cache's max_length 4"):
        c.append(np.zeros((1, H, 2, 4)), np.zeros((1, H, 2, 4)))
    with pytest.raises(ValueError, match="cannot append"):
        c.append(np.zeros((1, H + 1, 1, 4)), np.zeros((1, H + 1, 1, 4)))
    with pytest.raises(ValueError, match="must both be"):
        c.append(np.zeros((1, H, 1, 4)), np.zeros((1, H, 1, 3)))
    with pytest.raises(ValueError, match="n_layers must be an integer >= 1"):
        KVCache(0)


def test_select_reorders_beams():
    cache = KVCache(1)
    k = np.arange(3 * H * 2 * 4, dtype=float).reshape(3, H, 2, 4)
    cache[0].append(k, k + 1)
    cache[0].cross_k, cache[0].cross_v = k[:, :, :1], k[:, :, 1:]
    cache.select(np.array([2, 2, 0]))
    np.testing.assert_array_equal(cache[0].k, k[[2, 2, 0]])
    np.testing.assert_array_equal(cache[0].v, k[[2, 2, 0]] + 1)
    np.testing.assert_array_equal(cache[0].cross_k, k[[2, 2, 0], :, :1])
    cache.reset()
    assert cache.length == 0 and cache[0].k is None
