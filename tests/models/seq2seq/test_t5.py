"""T5: forward values against a plain NumPy formula (one sequence at a time, buckets from a
scalar loop), bucket ids at their boundaries, the shared relative bias, bad input. The
whole-model gradchecks (v1.0 tied and rescaled, v1.1 gated GELU untied, dropout) run in
tests/models/test_protocol.py from the registry entry."""
import math

import numpy as np
import pytest

from minipt.models import registry
from minipt.models.protocol import IGNORE
from minipt.models.seq2seq.t5 import T5, T5Config, shift_right, tiny_batch, tiny_model
from minipt.ops.positions import relative_position_bucket


def bucket(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """One relative position's bucket, scalar by scalar, the log ratio in float32 (as Mesh
    TensorFlow: tf.log(float32(n) / max_exact) / log(max_distance / max_exact) * ...)."""
    n, b = num_buckets, 0
    if bidirectional:
        n //= 2
        b = n if rel > 0 else 0
        d = abs(rel)
    else:
        d = max(-rel, 0)
    exact = n // 2
    if d < exact:
        return b + d
    f32 = np.float32
    r = np.log(f32(d) / f32(exact)) / f32(math.log(max_distance / exact)) * f32(n - exact)
    return b + min(exact + int(r), n - 1)


def rms(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def naive_logits(model: T5, src, tgt_in, src_len):
    """One sequence: src (S,) of which the first src_len are read, tgt_in (T,) -> (T, V)."""
    c = model.config
    C, H = c.d_model, c.n_head
    D = C // H
    W = model.shared.params["weight"]

    def attention(block_attn, x, mem, bias, allowed):
        p = {n: m.params["weight"] for n, m in vars(block_attn).items() if hasattr(m, "params") and m.params}
        if mem is None:
            q, k, v = np.split(x @ p["c_attn"].T, 3, axis=-1)
        else:
            q = x @ p["q_proj"].T
            k, v = np.split(mem @ p["kv_proj"].T, 2, axis=-1)
        out = np.zeros((x.shape[0], C))
        for h in range(H):
            sl = slice(h * D, (h + 1) * D)
            s = q[:, sl] @ k[:, sl].T + (0 if bias is None else bias[h])      # no 1/sqrt(D)
            s = np.where(allowed, s, -np.inf)
            a = np.exp(s - s.max(-1, keepdims=True))
            out[:, sl] = (a / a.sum(-1, keepdims=True)) @ v[:, sl]
        return out @ p["c_proj"].T

    def ffn(mlp, x):
        if c.ffn == "relu":
            return np.maximum(x @ mlp.c_fc.params["weight"].T, 0) @ mlp.c_proj.params["weight"].T
        return (gelu_tanh(x @ mlp.w1.params["weight"].T) * (x @ mlp.w3.params["weight"].T)) \
            @ mlp.w2.params["weight"].T

    def rel_bias(table, T, S, bidi):
        b = np.zeros((c.n_head, T, S))
        for i in range(T):
            for j in range(S):
                b[:, i, j] = table[bucket(j - i, bidi, c.num_buckets, c.max_distance)]
        return b

    S, T = len(src), len(tgt_in)
    keep = np.arange(S) < src_len
    x = W[src]
    eb = rel_bias(model.encoder_bias.params["weight"], S, S, True)
    for blk in model.encoder.blocks:
        x = x + attention(blk.attn, rms(x, blk.ln_1.params["weight"], c.eps), None, eb, keep[None, :])
        x = x + ffn(blk.mlp, rms(x, blk.ln_2.params["weight"], c.eps))
    mem = rms(x, model.encoder.ln_f.params["weight"], c.eps)
    y = W[tgt_in]
    db = rel_bias(model.decoder_bias.params["weight"], T, T, False)
    causal = np.tril(np.ones((T, T), bool))
    for blk in model.decoder.blocks:
        y = y + attention(blk.attn, rms(y, blk.ln_1.params["weight"], c.eps), None, db, causal)
        y = y + attention(blk.cross_attn, rms(y, blk.ln_cross.params["weight"], c.eps), mem, None, keep[None, :])
        y = y + ffn(blk.mlp, rms(y, blk.ln_2.params["weight"], c.eps))
    y = rms(y, model.decoder.ln_f.params["weight"], c.eps)
    if c.tie_embeddings:
        return (y * C ** -0.5) @ W.T
    return y @ model.lm_head.params["weight"].T


@pytest.mark.parametrize("kw", [{}, dict(ffn="gated-gelu", tie_embeddings=False),
                                dict(ffn="gated-gelu", tie_embeddings=True, scale_output=False)])
def test_forward_matches_a_plain_numpy_formula(kw):
    model = tiny_model(**kw)
    src, tgt_in, targets = tiny_batch()
    loss, logits = model(src, tgt_in, targets)
    for b in range(2):
        want = naive_logits(model, src[b], tgt_in[b], int((src[b] != 0).sum()))
        if not model.config.scale_output and model.config.tie_embeddings:
            want = want * model.config.d_model ** 0.5                     # tied but not rescaled
        np.testing.assert_allclose(logits[b], want, rtol=0, atol=1e-12)
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    keep = targets != IGNORE
    assert float(loss) == pytest.approx(-logp[keep, targets[keep]].mean(), rel=1e-12)
    assert model.log_prob(src, tgt_in, targets) == pytest.approx(logp[keep, targets[keep]].sum(), rel=1e-12)


@pytest.mark.parametrize("kw", [{}, dict(ffn="gated-gelu", tie_embeddings=False)])
def test_cached_decoding_equals_the_full_decoder(kw):
    """Feeding the target one token at a time through the KV cache (self-attention keys
    appended, cross-attention keys computed once, the causal bias at the cache's offset)
    gives the logits of one pass over the whole target."""
    model = tiny_model(**kw)
    src, tgt_in, _ = tiny_batch()
    enc = model.encode(src)
    full = model.decode(tgt_in, enc)
    cache = model.new_cache()
    steps = [model.decode(tgt_in[:, t:t + 1], enc, cache=cache) for t in range(tgt_in.shape[1])]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)
    assert cache.length == tgt_in.shape[1]


def test_greedy_and_beam_search_with_the_cache_equal_without():
    from minipt.inference.seq2seq_decoding import beam_search, greedy
    model = tiny_model(max_target_len=7)
    src, _, _ = tiny_batch()
    kw = dict(start_id=0, eos_id=1)
    assert greedy(model, src, **kw, cache=True) == greedy(model, src, **kw, cache=False)
    assert beam_search(model, src[1, :4], **kw, beam_size=3, cache=True) == \
        beam_search(model, src[1, :4], **kw, beam_size=3, cache=False)


def test_teacher_forcing_reads_the_targets_shifted_right_from_pad():
    np.testing.assert_array_equal(shift_right(np.array([[5, 6, IGNORE, 7]]), 0), [[0, 5, 6, 0]])


# boundaries: distances whose log ratio lands on (or a rounding away from) an integer bucket
BOUNDARY_SETTINGS = [(32, 128, True), (32, 128, False), (16, 64, True), (8, 16, True), (64, 256, False),
                     (6, 7, True), (10, 20, False), (12, 37, True)]


@pytest.mark.parametrize("num_buckets, max_distance, bidirectional", BOUNDARY_SETTINGS)
def test_bucket_ids_equal_a_scalar_float32_implementation(num_buckets, max_distance, bidirectional):
    rel = np.arange(-3 * max_distance, 3 * max_distance + 1)
    ours = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    theirs = [bucket(int(r), bidirectional, num_buckets, max_distance) for r in rel]
    np.testing.assert_array_equal(ours, theirs)
    assert ours.min() >= 0 and ours.max() < num_buckets


def test_buckets_at_the_log_boundaries_of_the_default_setting():
    """32 buckets, max_distance 128, bidirectional: 8 exact distances per direction, then
    buckets 8..15 start at distances 8 * 16^(k/8): 8, 12 (11.3), 16, 23 (22.6), 32, 46, 64, 91."""
    d = np.arange(0, 200)
    b = relative_position_bucket(-d, True, 32, 128)
    starts = [int(d[np.argmax(b == k)]) for k in range(8, 16)]
    assert starts == [8, 12, 16, 23, 32, 46, 64, 91]
    assert (relative_position_bucket(d[1:], True, 32, 128) == b[1:] + 16).all()    # keys after the query
    causal = relative_position_bucket(-d, False, 32, 128)                           # 16 exact, then log
    assert causal[:16].tolist() == list(range(16)) and causal[127] == 31 and causal[128] == 31
    assert (relative_position_bucket(d, False, 32, 128) == 0).all()                 # the future: bucket 0


def test_one_bias_table_serves_every_layer():
    """Zeroing the encoder bias table changes every layer's scores: the output with the
    table equals the output with the same (H, S, S) bias handed to each block by hand."""
    model = tiny_model()
    batch = tiny_batch()
    _, logits = model(*batch)
    assert model.encoder_bias._cache is not None and len(model.encoder.blocks) == 2
    table = model.encoder_bias.params["weight"].copy()
    model.encoder_bias.params["weight"][...] = 0.0
    _, without = model(*batch)
    model.encoder_bias.params["weight"][...] = table
    assert np.abs(logits - without).max() > 1e-3
    n_params = dict(model.named_parameters())
    assert not any("blocks" in n and "bias" in n for n in n_params), "a bias inside a block"


def test_no_dense_layer_has_a_bias_and_norms_are_scale_only():
    model = tiny_model()
    for name, p in model.named_parameters():
        assert not name.endswith(".bias"), name
    assert sum(n.endswith("ln_1.weight") for n, _ in model.named_parameters()) == 4


def test_bad_input_is_refused_by_name():
    model = tiny_model()
    src, tgt_in, targets = tiny_batch()
    with pytest.raises(ValueError, match="targets: expected shape"):
        model(src, tgt_in, targets[:, :3])
    with pytest.raises(ValueError, match="source length 9 exceeds max_source_len 8"):
        model(np.ones((2, 9), int), tgt_in, targets)
    with pytest.raises(ValueError, match="target length 9 exceeds max_target_len 8"):
        model(src, np.ones((2, 9), int))
    with pytest.raises(ValueError, match=r"source rows \[1\] are empty"):
        model(np.array([[1, 2], [0, 0]]), tgt_in)
    with pytest.raises(ValueError, match="targets are all IGNORE"):
        model(src, tgt_in, np.full_like(targets, IGNORE))
    with pytest.raises(ValueError, match="target_in is empty"):
        model(src, np.zeros((2, 0), int))
    with pytest.raises(ValueError, match="ffn must be one of"):
        T5Config(ffn="swiglu")
    with pytest.raises(ValueError, match="not divisible"):
        T5Config(d_model=10, n_head=4)
    with pytest.raises(IndexError, match="99"):
        model(src, np.full((2, 6), 99))
    model.decode(tgt_in[:, :1], model.encode(src), cache=model.new_cache())
    with pytest.raises(RuntimeError, match="inference only"):
        model.decoder.backward(np.zeros((2, 1, 8)))


def test_registered_and_rebuilt_from_its_spec():
    e = registry.get("t5")
    model, batch = e.tiny()
    again = registry.build(model.spec(), dtype=np.float64)
    assert isinstance(again, T5) and again.config == model.config
    assert e.lesson == "19_t5"
