"""ALBERT: whole-model gradchecks for each sharing mode, the factorised embedding and the
E-sized MLM head against NumPy written here, shared layers that stay one set of weights
(and sum their gradients), parameter counts against a hand count, bad input."""
import math

import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.core.module import eval_mode
from minipt.models.encoder import albert, bert
from minipt.models.encoder.albert import ALBERT_TINY, BERT_BASE, build, tiny
from minipt.nn.stack import TransformerStack
from minipt.optim.adam import AdamW

MODES = ("all", "attention", "ffn", None)


def _erf_gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _ln(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


@pytest.mark.parametrize("share", MODES)
def test_whole_model_gradcheck_with_shared_layers_and_factorised_embedding(share):
    model, batch = tiny(share)
    result = check_module(model, *batch, select=lambda out: out[0], max_checks=5)
    assert result.passed, str(result)
    names = {a.name for a in result.arrays}
    assert "encoder.embedding_projection.weight" in names and "mlm.bias" in names
    if share == "all":                                   # one layer's arrays, summed over three uses
        assert not any(n.startswith("encoder.stack.blocks.1.") for n in names)


def test_factorised_embedding_and_e_sized_head_match_numpy():
    model, (ids, seg, mask, mlm, sop) = tiny("all")
    P = model.parameters()
    seen = {}
    forward = model.encoder.stack.forward

    def spy(x, *a, **k):
        seen["x"] = x.copy()
        return forward(x, *a, **k)
    model.encoder.stack.forward = spy
    with eval_mode(model):
        out = model.outputs(ids, seg, mask, mlm, sop)
        h = model.encoder(ids, seg, mask)
    e = "encoder.embeddings."
    T = ids.shape[1]
    x = P[e + "word_embeddings.weight"][ids] + P[e + "token_type_embeddings.weight"][seg] \
        + P[e + "position_embeddings.weight"][:T]                                  # (B, T, E)
    x = _ln(x, P[e + "ln.weight"], P[e + "ln.bias"], 1e-12)
    want = x @ P["encoder.embedding_projection.weight"].T + P["encoder.embedding_projection.bias"]   # (B, T, H)
    assert x.shape[-1] == 4 and want.shape[-1] == 8
    np.testing.assert_allclose(seen["x"], want, rtol=0, atol=1e-12)
    t = _ln(_erf_gelu(h @ P["mlm.dense.weight"].T + P["mlm.dense.bias"]), P["mlm.ln.weight"], P["mlm.ln.bias"], 1e-12)
    logits = t @ P[e + "word_embeddings.weight"].T + P["mlm.bias"]                  # tied (V, E) decoder
    np.testing.assert_allclose(out.logits, logits, rtol=0, atol=1e-12)


@pytest.mark.parametrize("share,shared,own", [
    ("all", ("attn.c_attn.weight", "mlp.c_fc.weight", "ln_1.weight", "ln_2.bias"), ()),
    ("attention", ("attn.c_attn.weight", "attn.c_proj.bias"), ("mlp.c_fc.weight", "ln_1.weight", "ln_2.bias")),
    ("ffn", ("mlp.c_fc.weight", "mlp.c_proj.bias"), ("attn.c_attn.weight", "ln_1.weight", "ln_2.bias")),
])
def test_shared_layers_hold_identical_weights_through_training(share, shared, own):
    model = build(rng=np.random.default_rng(0), **{**ALBERT_TINY, "share": share})
    opt = AdamW(model, lr=1e-2)
    batch = bert.tiny_batch()
    for _ in range(2):
        model.zero_grad()
        model(*batch)
        model.backward()
        opt.step()
    blocks = [dict(b.named_parameters()) for b in model.encoder.stack.blocks]
    for name in shared:
        assert all(b[name] is blocks[0][name] for b in blocks[1:]), name
    for name in own:
        assert not any(np.array_equal(b[name], blocks[0][name]) for b in blocks[1:]), name


@pytest.mark.parametrize("share", ("attention", "ffn"))
def test_partly_shared_stack_equals_separate_blocks_and_sums_their_gradients(share):
    kw = dict(d_model=8, n_heads=2, d_ff=16, prenorm=False, activation="gelu", dtype=np.float64)
    shared = TransformerStack(3, share=share, rng=np.random.default_rng(0), **kw)
    separate = TransformerStack(3, rng=np.random.default_rng(1), **kw)
    r = np.random.default_rng(2)
    for a, b in zip(shared.blocks, separate.blocks):
        for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
            p[...] += r.standard_normal(p.shape) * 0.1     # shared arrays get several nudges, still one array
    for a, b in zip(shared.blocks, separate.blocks):
        for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
            q[...] = p
    x, dy = r.standard_normal((2, 5, 8)), r.standard_normal((2, 5, 8))
    np.testing.assert_allclose(shared(x), separate(x), rtol=0, atol=1e-12)
    shared.zero_grad(), separate.zero_grad()
    np.testing.assert_allclose(shared.backward(dy).dx, separate.backward(dy).dx, rtol=0, atol=1e-12)
    prefix = "attn." if share == "attention" else "mlp."
    for name, g in shared.blocks[0].named_grads():
        per_layer = [dict(b.named_grads())[name] for b in separate.blocks]
        want = sum(per_layer) if name.startswith(prefix) else per_layer[0]
        np.testing.assert_allclose(g, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("share", MODES)
def test_parameter_count_formula_matches_the_model(share):
    model = build(rng=np.random.default_rng(0), **{**ALBERT_TINY, "share": share})
    sizes = {k: ALBERT_TINY[k] for k in ("vocab_size", "max_position", "d_model", "d_ff", "n_layer", "embedding_size")}
    assert albert.parameter_count(**sizes, share=share) == model.num_parameters()
    same_h = bert.build(rng=np.random.default_rng(0), **{**ALBERT_TINY, "embedding_size": None})
    sizes["embedding_size"] = None
    assert albert.parameter_count(**sizes) == same_h.num_parameters()
    assert model.num_parameters() < same_h.num_parameters()


def test_paper_scale_counts_against_a_hand_count():
    V, P, H, F, L, E = 30000, 512, 768, 3072, 12, 128
    layer = sum(a * b for a, b in [(H, 3 * H), (1, 3 * H), (H, H), (1, H), (H, F), (1, F), (F, H), (1, H)]) + 4 * H
    heads = (H * H + H) + (2 * H + 2)                       # pooler, 2-way head
    bert_base = (V + P + 2) * H + 2 * H + L * layer + (H * H + H + 2 * H + V) + heads
    albert_base = (V + P + 2) * E + 2 * E + (E * H + H) + layer + (H * E + E + 2 * E + V) + heads
    counts = albert.paper_counts()
    assert counts == {"BERT-base": bert_base, "ALBERT-base": albert_base}
    assert 108e6 < counts["BERT-base"] < 111e6 and 11e6 < counts["ALBERT-base"] < 13e6   # table 1: 108M, 12M
    assert albert.parameter_count(**BERT_BASE, embedding_size=128, share="attention") > counts["ALBERT-base"]


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="share must be one of all, attention, ffn or None, got 'both'"):
        albert.AlbertConfig(share="both")
    with pytest.raises(ValueError, match="sentence-order prediction; nsp must be True"):
        albert.AlbertConfig(nsp=False)
    with pytest.raises(ValueError, match="embedding_size"):
        albert.AlbertConfig(embedding_size=0)
    with pytest.raises(ValueError, match="share must be one of all, attention, ffn"):
        TransformerStack(2, share="mlp", d_model=8, n_heads=2, d_ff=16, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="share must be"):
        albert.parameter_count(**BERT_BASE, share="layers")
    model, (ids, seg, mask, mlm, sop) = tiny()
    with pytest.raises(ValueError, match="nsp_labels: expected 0"):
        model(ids, seg, mask, mlm, np.array([1, 2]))
