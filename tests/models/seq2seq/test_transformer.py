"""The Transformer encoder-decoder: whole-model float64 gradchecks (tied output layer,
shared and separate embeddings, post- and pre-LN, dropout), forward values against plain
NumPy for a one-layer model, source-padding and target-padding invariance, bad input."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.core.module import eval_mode
from minipt.models import registry
from minipt.models.protocol import IGNORE
from minipt.models.seq2seq.transformer import TINY, build, tiny, tiny_batch


# the shared-embedding tiny model is gradchecked by tests/models/test_protocol.py (registry entry)
@pytest.mark.parametrize("kw", [dict(share_embeddings=False, src_vocab_size=11),
                                pytest.param(dict(prenorm=True), marks=pytest.mark.slow)],
                         ids=["separate", "prenorm"])
def test_whole_model_gradcheck(kw):
    model, batch = tiny(**kw)
    if "src_vocab_size" in kw:
        batch = (batch[0] + (batch[0] > 0) * 1, *batch[1:])          # source ids up to 9 < 11
    res = check_module(model, *batch, select=lambda out: out[0], max_checks=6)
    assert res.passed, str(res)
    names = {a.name for a in res.arrays}
    emb = {"shared.weight"} if not kw.get("src_vocab_size") else {"src_embed.weight", "tgt_embed.weight"}
    assert emb <= names and "decoder.blocks.1.cross_attn.kv_proj.weight" in names
    assert "encoder.blocks.0.attn.c_attn.weight" in names


@pytest.mark.slow
def test_gradcheck_with_dropout_replayed():
    model, batch = tiny(dropout=0.2)
    model.train()
    res = check_module(model, *batch, select=lambda out: out[0], max_checks=6)
    assert res.passed, str(res)


# -- forward values against plain NumPy -----------------------------------------------
def _ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _mha(xq, xkv, wq, bq, wk, bk, wv, bv, wo, bo, H, allowed):
    """xq (T, C), xkv (S, C), allowed (T, S) -> (T, C), one sequence."""
    T, C = xq.shape
    D = C // H
    q, k, v = xq @ wq.T + bq, xkv @ wk.T + bk, xkv @ wv.T + bv
    out = np.zeros((T, C))
    for h in range(H):
        sl = slice(h * D, (h + 1) * D)
        s = q[:, sl] @ k[:, sl].T / np.sqrt(D)
        s = np.where(allowed, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        out[:, sl] = (p / p.sum(-1, keepdims=True)) @ v[:, sl]
    return out @ wo.T + bo


def _numpy_forward(P, src, tgt_in, C, H, pad=0):
    """One encoder and one decoder layer, post-LN, ReLU, tied output, sinusoidal positions."""
    maxT = 16
    pe = np.zeros((maxT, C))
    pos = np.arange(maxT)[:, None]
    i = np.arange(0, C, 2)
    pe[:, 0::2] = np.sin(pos / 10000 ** (i / C))
    pe[:, 1::2] = np.cos(pos / 10000 ** (i / C))
    E = P["shared.weight"]
    out = []
    for s_ids, t_ids in zip(src, tgt_in):
        real = s_ids != pad
        x = E[s_ids] * np.sqrt(C) + pe[:len(s_ids)]
        p = "encoder.blocks.0."
        w = P[p + "attn.c_attn.weight"]
        b = P[p + "attn.c_attn.bias"]
        a = _mha(x, x, w[:C], b[:C], w[C:2 * C], b[C:2 * C], w[2 * C:], b[2 * C:], P[p + "attn.c_proj.weight"],
                 P[p + "attn.c_proj.bias"], H, np.broadcast_to(real, (len(s_ids), len(s_ids))))
        h = _ln(x + a, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
        f = np.maximum(h @ P[p + "mlp.c_fc.weight"].T + P[p + "mlp.c_fc.bias"], 0) @ P[p + "mlp.c_proj.weight"].T \
            + P[p + "mlp.c_proj.bias"]
        mem = _ln(h + f, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
        T = len(t_ids)
        y = E[t_ids] * np.sqrt(C) + pe[:T]
        p = "decoder.blocks.0."
        w, b = P[p + "attn.c_attn.weight"], P[p + "attn.c_attn.bias"]
        a = _mha(y, y, w[:C], b[:C], w[C:2 * C], b[C:2 * C], w[2 * C:], b[2 * C:], P[p + "attn.c_proj.weight"],
                 P[p + "attn.c_proj.bias"], H, np.tril(np.ones((T, T), bool)))
        h = _ln(y + a, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
        wkv, bkv = P[p + "cross_attn.kv_proj.weight"], P[p + "cross_attn.kv_proj.bias"]
        a = _mha(h, mem, P[p + "cross_attn.q_proj.weight"], P[p + "cross_attn.q_proj.bias"], wkv[:C], bkv[:C],
                 wkv[C:], bkv[C:], P[p + "cross_attn.c_proj.weight"], P[p + "cross_attn.c_proj.bias"], H,
                 np.broadcast_to(real, (T, len(s_ids))))
        h = _ln(h + a, P[p + "ln_cross.weight"], P[p + "ln_cross.bias"])
        f = np.maximum(h @ P[p + "mlp.c_fc.weight"].T + P[p + "mlp.c_fc.bias"], 0) @ P[p + "mlp.c_proj.weight"].T \
            + P[p + "mlp.c_proj.bias"]
        h = _ln(h + f, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
        out.append(h @ E.T)
    return np.stack(out)


def test_forward_values_match_numpy_for_one_layer():
    from minipt.models.decoder.gpt import perturbed
    model = perturbed(build(rng=np.random.default_rng(3), dtype=np.float64, vocab_size=9, n_encoder_layers=1,
                            n_decoder_layers=1, n_head=2, d_model=8, d_ff=12, max_source_len=16,
                            max_target_len=16, activation="relu"))
    src, tin, tgt = tiny_batch()
    loss, logits = model(src, tin, tgt)
    want = _numpy_forward(dict(model.named_parameters()), src, tin, C=8, H=2)
    np.testing.assert_allclose(logits, want, rtol=1e-10, atol=1e-10)
    z = want - want.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    keep = tgt != IGNORE
    nll = -np.array([logp[b, t, tgt[b, t]] for b, t in zip(*np.nonzero(keep))])
    assert float(loss) == pytest.approx(nll.mean(), rel=1e-12)
    assert model.log_prob(src, tin, tgt) == pytest.approx(-nll.sum(), rel=1e-12)


def test_padding_never_counts():
    model, (src, tin, tgt) = tiny()
    with eval_mode(model):
        _, logits = model(src, tin, tgt)
        # row 1 alone, without its source and target padding: the same real logits
        _, alone = model(src[1:, :3], tin[1:, :3], tgt[1:, :3])
        np.testing.assert_allclose(logits[1, :3], alone[0], rtol=1e-12, atol=1e-12)
        # more source padding and other ids in padded target slots change nothing real
        src2 = np.concatenate([src, np.zeros((2, 1), int)], axis=1)
        tin2 = tin.copy()
        tin2[1, 3] = 7
        loss, logits2 = model(src2, tin2, tgt)
        np.testing.assert_allclose(logits2[0], logits[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(logits2[1, :3], logits[1, :3], rtol=1e-12, atol=1e-12)
        assert float(loss) == pytest.approx(float(model(src, tin, tgt)[0]), rel=1e-12)


def test_bad_input_is_refused_by_name():
    model, (src, tin, tgt) = tiny()
    with pytest.raises(ValueError, match="source length 7 exceeds max_source_len 6"):
        model(np.ones((1, 7), int), tin[:1], tgt[:1])
    with pytest.raises(ValueError, match="target length 6 exceeds max_target_len 5"):
        model(src[:1], np.ones((1, 6), int), np.ones((1, 6), int))
    with pytest.raises(ValueError, match="target_in is empty"):
        model(src[:1], np.ones((1, 0), int), np.ones((1, 0), int))
    with pytest.raises(ValueError, match="targets are all IGNORE"):
        model(src[:1], tin[:1], np.full((1, 4), IGNORE))
    with pytest.raises(IndexError, match="12"):
        model(np.array([[3, 12]]), tin[:1], tgt[:1])
    with pytest.raises(IndexError, match="9"):
        model(src[:1], np.array([[1, 9, 2, 2]]), tgt[:1])
    with pytest.raises(ValueError, match=r"source rows \[1\] are empty"):
        model(np.array([[3, 4], [0, 0]]), tin, tgt)
    with pytest.raises(ValueError, match="targets: expected shape"):
        model(src, tin, tgt[:, :2])
    with pytest.raises(ValueError, match="share_embeddings needs one vocabulary"):
        build(rng=np.random.default_rng(0), **{**TINY, "src_vocab_size": 12})


def test_registered_and_rebuilt_from_its_spec():
    entry = registry.get("transformer")
    model, _ = entry.tiny()
    again = registry.build(model.spec(), dtype=np.float64)
    assert again.spec() == model.spec() and entry.lesson == "18_encoder_decoder"
    assert model.new_cache().max_length == TINY["max_target_len"]
