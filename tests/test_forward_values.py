"""Forward values against independent formulas: what a gradcheck cannot see.

A gradcheck compares a backward with the forward's own difference quotients, so a bug
that changes both consistently (a constant added to a loss, a wrong label-smoothing mass,
a scale of 1/D for 1/sqrt(D), a KV-cached step that sees the wrong positions) passes it.
Here each value is recomputed from its formula in plain loops or closed forms, written
without minipt's code, in float64 (and float32 where the kernels differ)."""
import math

import numpy as np
import pytest

from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.llama import llama_config
from minipt.nn.kv_cache import KVCache
from minipt.nn.positions import LearnedPositions
from minipt.ops.activations import gelu_forward, gelu_tanh_forward, swiglu_forward
from minipt.ops.attention import attention_forward, attention_forward_numpy
from minipt.ops.cross_entropy import cross_entropy_forward
from minipt.ops.norms import layer_norm_forward, rms_norm_forward
from minipt.ops.positions import rope_forward, sinusoidal_table
from minipt.ops.softmax import log_softmax_forward, softmax_forward


# -- losses --------------------------------------------------------------------------------------
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cross_entropy_with_label_smoothing_equals_the_direct_formula(smoothing, dtype):
    """loss = mean over counted positions of -sum_v q_v log p_v, q = (1 - e) onehot(y) + e / V."""
    rng = np.random.default_rng(0)
    V = 7
    z = (rng.standard_normal((3, 5, V)) * 3).astype(dtype)
    y = rng.integers(0, V, (3, 5))
    y[0, 2] = y[2, 4] = -100
    total, count = 0.0, 0
    for i in range(3):
        for t in range(5):
            if y[i, t] == -100:
                continue
            row = z[i, t].astype(np.float64)
            logp = [row[v] - math.log(sum(math.exp(r) for r in row)) for v in range(V)]
            q = [(1 - smoothing) * (v == y[i, t]) + smoothing / V for v in range(V)]
            total += -sum(qv * lv for qv, lv in zip(q, logp))
            count += 1
    loss, _ = cross_entropy_forward(z, y, label_smoothing=smoothing)
    assert loss.dtype == dtype
    assert float(loss) == pytest.approx(total / count, rel=1e-12 if dtype == np.float64 else 2e-6)


def test_model_loss_is_the_cross_entropy_of_its_logits():
    m = GPT(GPTConfig.gpt2(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8),
            rng=np.random.default_rng(0), dtype=np.float64)
    ids = np.random.default_rng(1).integers(0, 11, (2, 8))
    targets = np.roll(ids, -1, axis=1)
    loss, logits = m(ids, targets)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    direct = -np.mean(np.take_along_axis(logp, targets[..., None], -1))
    assert float(loss) == pytest.approx(direct, rel=1e-12)
    assert m.log_prob(ids, targets) == pytest.approx(-direct * targets.size, rel=1e-12)


# -- softmax, norms, activations ---------------------------------------------------------------------
def test_softmax_and_log_softmax_values():
    x = np.random.default_rng(0).standard_normal((4, 6)) * 4
    e = np.exp(x)
    np.testing.assert_allclose(softmax_forward(x)[0], e / e.sum(1, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(log_softmax_forward(x)[0], x - np.log(e.sum(1, keepdims=True)), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_layer_norm_values_with_gain_bias_and_eps_that_matters(dtype, tol):
    """y = g (x - mean) / sqrt(var + eps) + b, population variance; rows of std 1e-3 next to
    eps 1e-5 make the place of eps visible (sqrt(var) + eps would be far off)."""
    rng = np.random.default_rng(0)
    C = 10
    scale = np.array([3, 1, 1e-3, 1e-3, 0.1, 10])[:, None]
    x = (rng.standard_normal((6, C)) + 2) * scale                     # mean 2 std per row: centring matters
    g, b = rng.standard_normal(C), rng.standard_normal(C)
    x, g, b = (a.astype(dtype).astype(np.float64) for a in (x, g, b))   # the inputs as the op sees them
    want = np.empty_like(x)
    for n in range(6):
        mean = sum(x[n]) / C
        var = sum((v - mean) ** 2 for v in x[n]) / C
        want[n] = [g[c] * (x[n, c] - mean) / math.sqrt(var + 1e-5) + b[c] for c in range(C)]
    y, _ = layer_norm_forward(x.astype(dtype), g.astype(dtype), b.astype(dtype), 1e-5)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


def test_rms_norm_values():
    """y = g x / sqrt(mean(x^2) + eps), no centring (Zhang & Sennrich 2019)."""
    rng = np.random.default_rng(1)
    C = 8
    x = rng.standard_normal((5, C)) * np.array([1, 1e-3, 5, 1e-4, 0.5])[:, None] + 0.7
    g = rng.standard_normal(C)
    want = np.array([[g[c] * x[n, c] / math.sqrt(sum(v * v for v in x[n]) / C + 1e-6) for c in range(C)]
                     for n in range(5)])
    np.testing.assert_allclose(rms_norm_forward(x, g, 1e-6)[0], want, rtol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_gelu_values(dtype, tol):
    x = np.linspace(-6, 6, 97)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    approx = np.array([0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x])
    np.testing.assert_allclose(gelu_forward(x.astype(dtype))[0], exact, rtol=tol, atol=tol)
    np.testing.assert_allclose(gelu_tanh_forward(x.astype(dtype))[0], approx, rtol=tol, atol=tol)


def test_swiglu_values():
    """swiglu(a, b) = silu(a) * b = a / (1 + e^-a) * b (Shazeer 2020)."""
    a, b = np.random.default_rng(2).standard_normal((2, 4, 5)) * 3
    want = np.array([[ai / (1 + math.exp(-ai)) * bi for ai, bi in zip(ra, rb)] for ra, rb in zip(a, b)])
    np.testing.assert_allclose(swiglu_forward(a, b)[0], want, rtol=1e-12)


# -- attention ------------------------------------------------------------------------------------------
def naive_attention(q, k, v, allowed, bias=None):
    """One query at a time: scores q.k / sqrt(D) (+ bias) over the allowed keys, softmax, sum of v."""
    B, H, T, D = q.shape
    S = k.shape[2]
    out = np.zeros_like(q)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                keys = [j for j in range(S) if allowed(b, i, j)]
                if not keys:
                    continue
                s = [sum(q[b, h, i, d] * k[b, h, j, d] for d in range(D)) / math.sqrt(D)
                     + (0.0 if bias is None else bias[h, i, j]) for j in keys]
                m = max(s)
                w = [math.exp(x - m) for x in s]
                out[b, h, i] = sum(wj / sum(w) * v[b, h, j] for wj, j in zip(w, keys))
    return out


def qkv(T, S, B=2, H=2, D=4, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal((B, H, T, D)), r.standard_normal((B, H, S, D)), r.standard_normal((B, H, S, D))


@pytest.mark.parametrize("forward", [attention_forward, attention_forward_numpy], ids=["default", "numpy"])
@pytest.mark.parametrize("T,S", [(5, 5), (2, 6), (1, 4)])
def test_causal_attention_equals_a_naive_loop_with_the_cache_offset(forward, T, S):
    """Query i of T new positions after S - T cached ones sees keys j <= i + (S - T)."""
    q, k, v = qkv(T, S)
    if forward is attention_forward:
        out, _ = forward(q, k, v, causal=True)
    else:
        out, _ = forward(q, k, v, None, True, None, 0.0, None, False, 1 / math.sqrt(4))
    np.testing.assert_allclose(out, naive_attention(q, k, v, lambda b, i, j: j <= i + (S - T)), rtol=1e-12,
                               atol=1e-13)


def test_masked_attention_with_bias_equals_a_naive_loop():
    T = S = 5
    q, k, v = qkv(T, S, seed=1)
    lengths = [5, 3]                                             # padding: batch 1 sees 3 keys
    mask = np.arange(S)[None, None, :] < np.array(lengths)[:, None, None]        # (B, 1, S) -> (B, T, S)
    mask = np.broadcast_to(mask, (2, T, S)).copy()
    bias = np.random.default_rng(2).standard_normal((2, T, S))
    out, _ = attention_forward(q, k, v, mask, bias=bias)
    want = naive_attention(q, k, v, lambda b, i, j: j < lengths[b], bias)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-13)


# -- positions -----------------------------------------------------------------------------------------
def test_rope_rotates_each_pair_i_and_i_plus_half_by_t_theta_i():
    B, H, T, D = 1, 2, 5, 8
    x = np.random.default_rng(3).standard_normal((B, H, T, D))
    positions = np.array([0, 1, 2, 7, 30])
    y, _ = rope_forward(x, positions)
    want = np.empty_like(x)
    for t, pos in enumerate(positions):
        for i in range(D // 2):
            a = pos * 10000.0 ** (-2 * i / D)
            x1, x2 = x[..., t, i], x[..., t, i + D // 2]
            want[..., t, i] = x1 * math.cos(a) - x2 * math.sin(a)
            want[..., t, i + D // 2] = x1 * math.sin(a) + x2 * math.cos(a)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-13)


def test_sinusoidal_and_learned_position_values():
    pe = sinusoidal_table(6, 4, np.float64)
    for t in range(6):
        for i in range(2):
            assert pe[t, 2 * i] == pytest.approx(math.sin(t / 10000 ** (2 * i / 4)), abs=1e-14)
            assert pe[t, 2 * i + 1] == pytest.approx(math.cos(t / 10000 ** (2 * i / 4)), abs=1e-14)
    wpe = LearnedPositions(10, 3, rng=np.random.default_rng(0), dtype=np.float64)
    np.testing.assert_array_equal(wpe(4, offset=5), wpe.params["weight"][5:9])


# -- the KV cache at the model level --------------------------------------------------------------
SMALL = dict(vocab_size=13, block_size=12, n_layer=2, n_head=2, d_model=16)
MODELS = {"gpt2": GPTConfig.gpt2(**SMALL), "gpt1": GPTConfig.gpt1(**SMALL), "gpt3": GPTConfig.gpt3(**SMALL),
          "llama": llama_config(**SMALL)}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("chunks", [[1] * 10, [4, 1, 3, 2]], ids=["token-by-token", "prefill+chunks"])
def test_cached_decoding_at_position_t_equals_row_t_of_the_full_forward(name, chunks):
    """Feeding a sequence through a KV cache, a chunk at a time, gives for every position t
    the logits of row t of one full forward: positions (learned and rotary), the causal
    offset and GPT-3's banded layers all continue where the cache stands."""
    m = GPT(MODELS[name], rng=np.random.default_rng(0), dtype=np.float64)
    r = np.random.default_rng(1)
    for _, p in m.named_parameters():
        p += r.standard_normal(p.shape) * 0.3                 # away from init: every term matters
    ids = np.random.default_rng(2).integers(0, 13, (2, 10))
    m.eval()
    _, full = m(ids)
    cache, rows, t = KVCache(m.config.n_layer), [], 0
    for n in chunks:
        _, logits = m(ids[:, t:t + n], cache=cache)
        rows.append(logits)
        t += n
    np.testing.assert_allclose(np.concatenate(rows, axis=1), full, rtol=1e-10, atol=1e-11)
