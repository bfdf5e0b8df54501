"""BERT: forward values against the paper's equations in plain NumPy, whole-model float64
gradchecks (tied MLM decoder, NSP through the pooler), padding that never counts, and
bad input refused by name."""
import math

import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.core.module import eval_mode
from minipt.models import registry
from minipt.models.encoder.bert import TINY, build, perturbed, tiny, tiny_batch
from minipt.models.protocol import IGNORE

PAD = 0


def _ln(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x):
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def naive(model, ids, segments, mask, mlm_labels, nsp_labels):
    """Devlin et al. 2019 written out: embeddings sum + LN, post-LN blocks with exact GELU,
    padding keys masked, MLM head tied to W_tok, tanh pooler on [CLS], the two losses."""
    p = dict(model.named_parameters())
    c = model.config
    e = "encoder.embeddings."
    B, T = ids.shape
    C, H = c.d_model, c.n_head
    D = C // H
    x = p[e + "word_embeddings.weight"][ids] + p[e + "token_type_embeddings.weight"][segments] \
        + p[e + "position_embeddings.weight"][:T]
    h = _ln(x, p[e + "ln.weight"], p[e + "ln.bias"], c.eps)
    for i in range(c.n_layer):
        q = f"encoder.stack.blocks.{i}."
        out = np.zeros_like(h)
        for b in range(B):
            qkv = h[b] @ p[q + "attn.c_attn.weight"].T + p[q + "attn.c_attn.bias"]       # (T, 3C)
            heads = []
            for n in range(H):
                qh, kh, vh = (qkv[:, j * C + n * D: j * C + (n + 1) * D] for j in range(3))
                s = qh @ kh.T / math.sqrt(D)
                s[:, mask[b] == 0] = -np.inf                                           # padding keys
                a = np.exp(s - s.max(1, keepdims=True))
                heads.append((a / a.sum(1, keepdims=True)) @ vh)
            out[b] = np.concatenate(heads, 1) @ p[q + "attn.c_proj.weight"].T + p[q + "attn.c_proj.bias"]
        h = _ln(h + out, p[q + "ln_1.weight"], p[q + "ln_1.bias"], c.eps)
        f = _gelu(h @ p[q + "mlp.c_fc.weight"].T + p[q + "mlp.c_fc.bias"]) @ p[q + "mlp.c_proj.weight"].T \
            + p[q + "mlp.c_proj.bias"]
        h = _ln(h + f, p[q + "ln_2.weight"], p[q + "ln_2.bias"], c.eps)
    t = _ln(_gelu(h @ p["mlm.dense.weight"].T + p["mlm.dense.bias"]), p["mlm.ln.weight"], p["mlm.ln.bias"], c.eps)
    logits = t @ p[e + "word_embeddings.weight"].T + p["mlm.bias"]                    # tied decoder
    pooled = np.tanh(h[:, 0] @ p["pooler.dense.weight"].T + p["pooler.dense.bias"])
    nsp_logits = pooled @ p["nsp.weight"].T + p["nsp.bias"]
    lp = _log_softmax(logits)
    terms = [-lp[b, t_, mlm_labels[b, t_]] for b in range(B) for t_ in range(T)
             if mlm_labels[b, t_] != IGNORE and mask[b, t_] == 1]
    mlm_loss = sum(terms) / len(terms)
    nsp_loss = -_log_softmax(nsp_logits)[np.arange(B), nsp_labels].mean()
    return logits, nsp_logits, mlm_loss, nsp_loss


def test_forward_matches_the_papers_equations():
    model, batch = tiny()
    with eval_mode(model):
        out = model.outputs(*batch)
    logits, nsp_logits, mlm_loss, nsp_loss = naive(model, *batch)
    np.testing.assert_allclose(out.logits, logits, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.nsp_logits, nsp_logits, rtol=0, atol=1e-12)
    assert float(out.mlm_loss) == pytest.approx(mlm_loss, abs=1e-12)
    assert float(out.nsp_loss) == pytest.approx(nsp_loss, abs=1e-12)
    assert float(out.loss) == pytest.approx(mlm_loss + nsp_loss, abs=1e-12)


def test_the_mlm_decoder_is_the_token_embedding():
    model, _ = tiny()
    names = [n for n, _ in model.named_parameters()]
    assert not any("decoder" in n for n in names)                 # one array, listed once
    assert model.mlm.decoder.params["weight"] is model.encoder.embeddings.word_embeddings.params["weight"]


@pytest.mark.parametrize("parts,checks", [("mlm+nsp", 8), ("mlm only", 4)])
def test_whole_model_gradcheck_with_the_tied_decoder(parts, checks):
    model, (ids, seg, mask, mlm, nsp) = tiny()                     # dropout on, replayed per forward
    batch = (ids, seg, mask, mlm, nsp if parts == "mlm+nsp" else None)
    result = check_module(model, *batch, select=lambda out: out[0], max_checks=checks)
    assert result.passed, str(result)
    word = next(a for a in result.arrays if a.name.endswith("word_embeddings.weight"))
    assert word.checked == checks and word.max_rel_error < 1e-6


def test_encoder_gradcheck_with_a_random_upstream_gradient_over_every_position():
    model, (ids, seg, mask, _, _) = tiny()
    result = check_module(model.encoder, ids, seg, mask, max_checks=8)      # G ~ N(0, 1) of shape (B, T, C)
    assert result.passed, str(result)


def test_padding_never_changes_the_loss():
    model, (ids, seg, mask, mlm, nsp) = tiny()
    rng = np.random.default_rng(5)
    ids = ids[:, :6].copy()                                        # room for two padded columns in T = 8
    seg, mask, mlm = seg[:, :6].copy(), mask[:, :6].copy(), mlm[:, :6].copy()
    with eval_mode(model):
        base = model.outputs(ids, seg, mask, mlm, nsp)
        wide = lambda a, fill: np.concatenate([a, fill], axis=1)
        pad_ids = rng.integers(0, TINY["vocab_size"], (2, 2))      # whatever sits on padding
        more = model.outputs(wide(ids, pad_ids), wide(seg, rng.integers(0, 2, (2, 2))),
                             wide(mask, np.zeros((2, 2), int)), wide(mlm, rng.integers(0, 11, (2, 2))), nsp)
    assert float(more.loss) == pytest.approx(float(base.loss), abs=1e-12)
    real = mask.astype(bool)
    np.testing.assert_allclose(more.logits[:, :6][real], base.logits[real], rtol=0, atol=1e-12)
    # and a label on a padded position inside the batch is dropped, not counted
    mlm2 = mlm.copy()
    mlm2[1, 5] = 7                                                 # row 1 is padding from t = 5
    with eval_mode(model):
        assert float(model.outputs(ids, seg, mask, mlm2, nsp).loss) == pytest.approx(float(base.loss), abs=1e-12)


def test_bad_input_is_refused_by_name():
    model, (ids, seg, mask, mlm, nsp) = tiny()
    long = np.ones((1, TINY["max_position"] + 1), dtype=np.int64)
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_position 8"):
        model(long)
    with pytest.raises(IndexError, match="input_ids: token id 11 is outside the vocabulary"):
        model(np.array([[1, 2, TINY["vocab_size"]]]))
    with pytest.raises(IndexError, match="input_ids: token id -1 is outside"):
        model(np.array([[1, -1, 2]]))
    bad_seg = seg.copy()
    bad_seg[0, 3] = 2
    with pytest.raises(ValueError, match=r"token_type_ids: expected segment ids 0 \(A\) to 1, got \[2\]"):
        model(ids, bad_seg, mask, mlm, nsp)
    bad_seg[0, 3] = -1
    with pytest.raises(ValueError, match=r"token_type_ids: expected segment ids 0 \(A\) to 1, got \[-1\]"):
        model(ids, bad_seg, mask, mlm, nsp)
    with pytest.raises(ValueError, match="no predicted position"):
        model(ids, seg, mask, np.full_like(mlm, IGNORE), nsp)
    only_pad = np.full_like(mlm, IGNORE)
    only_pad[1, 6] = 4                                             # a label, but on padding
    with pytest.raises(ValueError, match="no predicted position"):
        model(ids, seg, mask, only_pad, nsp)
    with pytest.raises(ValueError, match="nsp_labels"):
        model(ids, seg, mask, mlm, np.array([1, 2]))
    with pytest.raises(ValueError, match="attention_mask"):
        model(ids, seg, np.zeros_like(mask), mlm, nsp)
    with pytest.raises(ValueError, match="token_type_ids: expected shape"):
        model(ids, seg[:, :5], mask, mlm, nsp)


def test_registered_for_train_and_gradcheck():
    entry = registry.get("bert")
    assert entry.objective == "MLM + NSP" and not entry.language_model
    cases = entry.all_gradchecks()
    assert cases and cases[0].name == "model BERT"


def test_roberta_and_albert_hooks_keep_the_gradients_right():
    """nsp=False (no pooler) with positions from an offset, and a factorised embedding."""
    ids, seg, mask, mlm, _ = tiny_batch()
    for settings in (dict(nsp=False, position_offset=1, max_position=9), dict(embedding_size=4)):
        model = perturbed(build(rng=np.random.default_rng(0), dtype=np.float64, **{**TINY, **settings}))
        result = check_module(model, ids, seg, mask, mlm, select=lambda out: out[0], max_checks=4)
        assert result.passed, f"{settings}: {result}"
