import numpy as np
import pytest

from minipt.nn.attention import MultiHeadAttention
from minipt.nn.kv_cache import KVCache
from minipt.nn.stack import TransformerStack

C, H = 8, 2


def stack(**kw):
    return TransformerStack(2, d_model=C, n_heads=H, d_ff=16, rng=np.random.default_rng(0), final_norm=True,
                            dtype=np.float64, **kw)


@pytest.mark.parametrize("rope", [False, True])
def test_kv_cache_decoder_only_equals_full_forward(rope):
    s = stack(rope=rope)
    x = np.random.default_rng(1).standard_normal((2, 5, C))
    full = s(x, causal=True, positions=np.arange(5))
    cache = KVCache(2)
    steps = []
    for t in range(5):
        steps.append(s(x[:, t:t + 1], causal=True, positions=np.array([t]), cache=cache))
    assert cache.length == 5
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)


def test_kv_cache_encoder_decoder_cross_kv_computed_once():
    s = stack(cross_attention=True)
    rng = np.random.default_rng(2)
    x, memory = rng.standard_normal((2, 4, C)), rng.standard_normal((2, 3, C))
    full = s(x, memory, causal=True)
    cache = KVCache(2)
    steps = [s(x[:, :1], memory, causal=True, cache=cache)]
    cross_k = cache[0].cross_k
    steps += [s(x[:, t:t + 1], None, causal=True, cache=cache) for t in range(1, 4)]
    assert cache[0].cross_k is cross_k
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)


def test_backward_after_cached_forward_refuses():
    s = stack()
    s(np.zeros((1, 1, C)), causal=True, cache=KVCache(2))
    with pytest.raises(RuntimeError, match="inference only"):
        s.backward(np.zeros((1, 1, C)))


def test_shared_stack_has_one_set_of_parameters():
    shared, separate = stack(share=True), stack()
    assert shared.num_parameters() < separate.num_parameters()
    assert all(name.startswith(("blocks.0.", "ln_f.")) for name in shared.parameters())


def test_mha_bad_input():
    with pytest.raises(ValueError, match="d_model 10 is not divisible by n_heads 3"):
        MultiHeadAttention(10, 3, rng=np.random.default_rng(0))
    m = MultiHeadAttention(C, H, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="expected last dimension 8"):
        m(np.zeros((1, 2, 6), np.float32))
    cross = MultiHeadAttention(C, H, rng=np.random.default_rng(0), cross=True)
    with pytest.raises(ValueError, match="needs the encoder memory"):
        cross(np.zeros((1, 2, C), np.float32))


def test_return_weights_for_plotting():
    m = MultiHeadAttention(C, H, rng=np.random.default_rng(0))
    m(np.random.default_rng(0).standard_normal((1, 3, C)).astype(np.float32), causal=True, return_weights=True)
    assert m.last_weights.shape == (1, H, 3, 3) and m.last_weights[0, 0, 0, 1] == 0
