"""BART (models/seq2seq/bart.py): forward values against a plain NumPy formula written
here, the heads, KV-cached decoding against uncached, bad input. The whole-model float64
gradchecks (LM, from token vectors with a padded source, classifier, tagger) run in
tests/models/test_protocol.py through the registry entry (``minipt gradcheck`` too)."""
from math import erf, sqrt

import numpy as np
import pytest

from minipt.core.module import eval_mode
from minipt.inference.seq2seq_decoding import beam_search, greedy
from minipt.models.protocol import IGNORE
from minipt.models.seq2seq.bart import (
    Bart,
    BartConfig,
    shift_right,
    tiny,
    tiny_classifier,
    tiny_model,
    tiny_tagger,
)
from minipt.models.seq2seq.bart_heads import BartClassifier, BartTagger, eos_positions

gelu = np.vectorize(lambda x: 0.5 * x * (1.0 + erf(x / sqrt(2.0))))


def ln(x, p, name, eps=1e-5):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * p[name + ".weight"] + p[name + ".bias"]


def mha(x, mem, p, name, H, allowed):
    """Separate q, k, v as transformers' BartAttention: rows of the fused minipt matrices."""
    C = x.shape[-1]
    D = C // H
    if name.endswith("cross_attn"):
        q = x @ p[name + ".q_proj.weight"].T + p[name + ".q_proj.bias"]
        wk, wv = np.split(p[name + ".kv_proj.weight"], 2)
        bk, bv = np.split(p[name + ".kv_proj.bias"], 2)
    else:
        wq, wk, wv = np.split(p[name + ".c_attn.weight"], 3)
        bq, bk, bv = np.split(p[name + ".c_attn.bias"], 3)
        q = x @ wq.T + bq
    k, v = mem @ wk.T + bk, mem @ wv.T + bv
    out = np.zeros_like(q)
    for h in range(H):
        s = slice(h * D, (h + 1) * D)
        scores = q[:, s] @ k[:, s].T / np.sqrt(D)
        scores = np.where(allowed, scores, -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        out[:, s] = (w / w.sum(-1, keepdims=True)) @ v[:, s]
    return out @ p[name + ".c_proj.weight"].T + p[name + ".c_proj.bias"]


def block(x, mem, p, name, H, self_allowed, cross_allowed):
    x = ln(x + mha(x, x, p, name + ".attn", H, self_allowed), p, name + ".ln_1")
    if mem is not None:
        x = ln(x + mha(x, mem, p, name + ".cross_attn", H, cross_allowed), p, name + ".ln_cross")
    f = gelu(x @ p[name + ".mlp.c_fc.weight"].T + p[name + ".mlp.c_fc.bias"])
    return ln(x + f @ p[name + ".mlp.c_proj.weight"].T + p[name + ".mlp.c_proj.bias"], p, name + ".ln_2")


def numpy_bart(model: Bart, src, dec_in):
    """Logits (B, T, V), one sequence at a time, loops and plain formulas."""
    c, p = model.config, model.parameters()
    W = p["shared.weight"]
    out = []
    for s, d in zip(src, dec_in):
        keys = s != c.pad_id                                                  # (S,)
        h = ln(W[s] + p["enc_positions.weight"][2:2 + len(s)], p, "enc_ln")
        for i in range(c.encoder_layers):
            h = block(h, None, p, f"encoder.blocks.{i}", c.n_head, keys[None, :], None)
        y = ln(W[d] + p["dec_positions.weight"][2:2 + len(d)], p, "dec_ln")
        causal = np.tril(np.ones((len(d), len(d)), dtype=bool))
        for i in range(c.decoder_layers):
            y = block(y, h, p, f"decoder.blocks.{i}", c.n_head, causal, keys[None, :])
        out.append(y @ W.T + p["final_logits_bias"])
    return np.stack(out)


def test_forward_matches_the_numpy_formula():
    model, (src, dec_in, targets) = tiny()
    loss, logits = model(src, dec_in, targets)
    np.testing.assert_array_equal(dec_in, [[2, 0, 5, 6, 7, 2], [2, 0, 8, 9, 4, 6]])   # </s> first, IGNORE as <pad>
    ref = numpy_bart(model, src, dec_in)
    assert np.abs(logits - ref).max() <= 1e-12 * np.abs(ref).max()
    z = ref - ref.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    keep = targets != IGNORE
    nll = -np.mean([logp[b, t, targets[b, t]] for b, t in zip(*np.nonzero(keep))])
    assert float(loss) == pytest.approx(nll, rel=1e-12)


def test_source_padding_is_invisible():
    """A padded source reads the same as the unpadded one: the pad keys are masked out."""
    model = tiny_model(seed=3)
    dec = np.array([[2, 5, 6]])
    short = model(np.array([[0, 5, 3, 2]]), dec)[1]
    padded = model(np.array([[0, 5, 3, 2, 1, 1]]), dec)[1]
    np.testing.assert_allclose(padded, short, rtol=0, atol=1e-12)


def test_the_tied_output_layer_is_the_shared_table():
    model = tiny_model()
    names = [n for n, _ in model.named_parameters()]
    assert "shared.weight" in names and not any("lm_head" in n for n in names)
    src, dec_in, targets = tiny()[1]
    model.zero_grad()
    model(src, dec_in, targets)
    model.backward()
    g = model.gradients()["shared.weight"]
    assert np.abs(g).max() > 0
    assert model.params_of_shared() is model.shared.params["weight"]


def test_cached_decoding_equals_uncached():
    """inference/seq2seq_decoding.py: the KV-cached greedy and beam outputs equal the ones
    that re-run the decoder over the whole prefix each step; the last step's logits too."""
    model = Bart(BartConfig(vocab_size=20, max_positions=10, encoder_layers=1, decoder_layers=2, n_head=2, d_model=16,
                            d_ff=24), rng=np.random.default_rng(2), dtype=np.float64)
    r = np.random.default_rng(3)
    for n, p in model.named_parameters():
        p[...] = r.normal(1.0 if p.ndim == 1 and "ln" in n and n.endswith("weight") else 0.0, 0.3, p.shape)
    model.shared.params["weight"] *= 4.0                  # token identity outweighs the biases: varied output
    src = tiny()[1][0]
    a = greedy(model, src, start_id=2, eos_id=-1, max_new_tokens=7, cache=True)
    b = greedy(model, src, start_id=2, eos_id=-1, max_new_tokens=7, cache=False)
    assert a == b and len(set(a[0] + a[1])) > 2, a
    for row in src:
        assert beam_search(model, row, start_id=2, eos_id=4, beam_size=3, max_new_tokens=7) == \
            beam_search(model, row, start_id=2, eos_id=4, beam_size=3, max_new_tokens=7, cache=False)
    out = np.array([[2] + r for r in a])
    with eval_mode(model):
        enc = model.encode(src)
        cache = model.new_cache()
        for t in range(out.shape[1] - 1):
            step = model.decode(out[:, t:t + 1], enc, cache=cache)[:, -1]
        full = model(src, out[:, :-1])[1][:, -1]
    np.testing.assert_allclose(step, full, rtol=0, atol=1e-12)


def test_the_cache_refuses_more_than_max_positions():
    model, (src, _, _) = tiny()
    with pytest.raises(ValueError, match="max_positions 8"):
        enc = model.encode(src)
        cache = model.new_cache()
        for _ in range(9):
            model.decode(np.full((2, 1), 2), enc, cache=cache)


def test_classifier_reads_the_last_eos_of_the_decoder():
    model, (ids, labels) = tiny_classifier()
    loss, logits = model(ids, labels)
    np.testing.assert_array_equal(eos_positions(ids, 2), [3, 5])
    h = numpy_bart(model.bart, ids, shift_right(ids, 2, 1))                  # logits of the LM head...
    top = model.bart.hidden(ids, shift_right(ids, 2, 1))                      # ...and the states below them
    np.testing.assert_allclose(top @ model.bart.params_of_shared().T + model.bart.params["final_logits_bias"], h,
                               rtol=0, atol=1e-12)
    p = model.parameters()
    rep = top[[0, 1], [3, 5]]                                                 # (B, C) at the last </s>
    ref = np.tanh(rep @ p["dense.weight"].T + p["dense.bias"]) @ p["out_proj.weight"].T + p["out_proj.bias"]
    np.testing.assert_allclose(logits, ref, rtol=0, atol=1e-12)
    z = ref - ref.max(-1, keepdims=True)
    assert float(loss) == pytest.approx(-np.mean((z - np.log(np.exp(z).sum(-1, keepdims=True)))[[0, 1], labels]),
                                        rel=1e-12)


def test_tagger_scores_every_decoder_state():
    model, (ids, tags) = tiny_tagger()
    _, logits = model(ids, tags)
    top = model.bart.hidden(ids, shift_right(ids, 2, 1))
    p = model.parameters()
    np.testing.assert_allclose(logits, top @ p["classifier.weight"].T + p["classifier.bias"], rtol=0, atol=1e-12)


def test_bad_input_is_refused_by_name():
    model, (src, dec_in, targets) = tiny()
    with pytest.raises(ValueError, match="exceeds max_positions 8"):
        model(np.zeros((1, 9), dtype=np.int64), np.zeros((1, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="target_in: length 9 exceeds"):
        model(src, np.zeros((2, 9), dtype=np.int64))
    with pytest.raises(IndexError, match="99"):
        model(src, np.full((2, 3), 99))
    with pytest.raises(ValueError, match="target_in has batch 1, the source 2"):
        model(src, dec_in[:1])
    with pytest.raises(ValueError, match="targets: expected shape"):
        model(src, dec_in[:, :3], targets)
    with pytest.raises(ValueError, match="all IGNORE: an empty target"):
        model(src, dec_in, np.full_like(targets, IGNORE))
    with pytest.raises(ValueError, match=r"source rows \[1\] are empty"):
        model(np.array([[0, 5, 2], [1, 1, 1]]), dec_in)
    with pytest.raises(ValueError, match="row 0 has no EOS"):
        BartClassifier(model, 2, rng=np.random.default_rng(0))(np.array([[0, 5, 6]]), np.array([1]))
    with pytest.raises(ValueError, match="not divisible"):
        BartConfig(d_model=10, n_head=4)
    with pytest.raises(ValueError, match="pad_id 70 is outside"):
        BartConfig(vocab_size=64, pad_id=70)
    with pytest.raises(RuntimeError, match="forward with targets"):
        model(src, dec_in)
        model.backward()
    tagger = BartTagger(model, 2, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="targets: expected shape"):
        tagger(src, np.zeros((2, 2), dtype=np.int64))
