"""UniLM: the four masks against their definitions, forward values against a plain loop,
what each position may see (information flow through the whole model), cached decoding
equal to re-reading, bad input by name. The float64 gradchecks of the four modes are the
entry's cases (run for every entry by tests/models/test_protocol.py)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from minipt.models import registry
from minipt.models.protocol import IGNORE
from minipt.models.unified.unilm import (
    EOS,
    MASK,
    SOS,
    UniLM,
    build,
    tiny_batch,
    tiny_model,
)
from minipt.objectives.unified import UNILM_MODES, unilm_example, unilm_mask

sys.path.insert(0, str(Path(__file__).parent))
from unified_reference import block, block_params, gelu, ln  # noqa: E402  (the plain-NumPy loop beside this file)


def sees_by_definition(mode, i, j, n_src):
    """The paper's Sec. 2.2, position by position."""
    if mode == "bidirectional":
        return True
    if mode == "left_to_right":
        return j <= i
    if mode == "right_to_left":
        return j >= i
    return j < n_src if i < n_src else j <= i          # seq2seq: source sees source; target sees left


@pytest.mark.parametrize("mode", UNILM_MODES)
def test_each_mask_is_its_definition(mode):
    T, n_src = 9, 4
    want = np.array([[sees_by_definition(mode, i, j, n_src) for j in range(T)] for i in range(T)])
    np.testing.assert_array_equal(unilm_mask(mode, T, n_src), want)


def naive_logits(model: UniLM, ids, seg, sees):
    """BERT's equations one position at a time, under the may-attend rule ``sees(b, i, j)``."""
    c, P = model.config, dict(model.named_parameters())
    e = "encoder.embeddings."
    out = np.zeros(ids.shape + (c.vocab_size,))
    for b in range(ids.shape[0]):
        xs = [ln(P[e + "word_embeddings.weight"][ids[b, t]] + P[e + "token_type_embeddings.weight"][seg[b, t]]
                 + P[e + "position_embeddings.weight"][t], P[e + "ln.weight"], P[e + "ln.bias"], c.eps)
              for t in range(ids.shape[1])]
        for layer in range(c.n_layer):
            xs = block(xs, block_params(model, f"encoder.stack.blocks.{layer}."), lambda i, j: sees(b, i, j),
                       c.n_head, c.eps)
        for t, h in enumerate(xs):
            z = ln(gelu(P["mlm.dense.weight"] @ h + P["mlm.dense.bias"]), P["mlm.ln.weight"], P["mlm.ln.bias"], c.eps)
            out[b, t] = P["encoder.embeddings.word_embeddings.weight"] @ z + P["mlm.bias"]
    return out


@pytest.mark.parametrize("mode", UNILM_MODES)
def test_forward_matches_a_position_by_position_loop(mode):
    model = tiny_model()
    ids, seg, mask, labels, nsp = tiny_batch(mode)
    _, logits = model(ids, seg, mask, labels, nsp)
    n_src, real = (4, 3), (7, 5)
    want = naive_logits(model, ids, seg, lambda b, i, j: j < real[b] and sees_by_definition(mode, i, j, n_src[b]))
    np.testing.assert_allclose(logits, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", UNILM_MODES)
def test_a_token_reaches_exactly_the_positions_that_may_see_it(mode):
    """Change token j: the logits at i move if and only if the mask lets i see j (the four
    masks are transitive, so two layers reach no further than one)."""
    model, T, n_src = tiny_model(), 7, 4
    ids = np.array([[SOS, 4, 5, EOS, 7, 8, EOS]])
    seg = (np.arange(T) >= n_src)[None].astype(np.int64)
    _, base = model(ids, seg, mode, src_len=n_src)
    for j in range(T):
        other = ids.copy()
        other[0, j] = 10 if ids[0, j] != 10 else 9
        _, moved = model(other, seg, mode, src_len=n_src)
        changed = np.abs(moved - base).max(axis=-1)[0] > 1e-9
        np.testing.assert_array_equal(changed, [sees_by_definition(mode, i, j, n_src) for i in range(T)],
                                      err_msg=f"{mode}: changing token {j}")


def test_the_gradchecks_cover_all_four_modes():
    names = [c.name for c in registry.get("unilm").all_gradchecks()]
    assert names[0] == "model UniLM" and [f"UniLM {m}" for m in UNILM_MODES] == names[1:]


def test_nsp_counts_only_where_labelled():
    model = tiny_model()
    ids, seg, mask, labels, _ = tiny_batch("bidirectional")
    plain, _ = model(ids, seg, mask, labels, np.array([IGNORE, IGNORE]))
    both, _ = model(ids, seg, mask, labels, np.array([1, IGNORE]))
    z = model.nsp_logits(model.encode(ids, seg, mask))[0]
    nsp = -(z[1] - np.log(np.exp(z).sum()))
    assert float(both) == pytest.approx(float(plain) + nsp, rel=1e-12)


def test_finetuning_masks_target_tokens_only_with_the_final_eos():
    rng = np.random.default_rng(0)
    finals = 0
    for _ in range(200):
        ex = unilm_example(np.arange(10, 15), np.arange(20, 24), rng, sos_id=1, eos_id=2, mask_id=3, vocab_size=30,
                           mask_prob=0.5, mode="seq2seq")
        assert ex["mode"] == "seq2seq"
        assert (ex["targets"][:7] == IGNORE).all() and (ex["ids"][:7] == [1, 10, 11, 12, 13, 14, 2]).all()
        finals += ex["targets"][-1] == 2
    assert 60 < finals < 140                              # the final [EOS] is masked like any target token


def test_cached_decoding_equals_rereading_the_sequence():
    model = build(rng=np.random.default_rng(3), dtype=np.float64, vocab_size=11, max_position=16, n_layer=2,
                  n_head=2, d_model=8, d_ff=16, dropout=0.0)
    for p in model.parameters().values():
        p[...] += np.random.default_rng(4).standard_normal(p.shape) * 0.5
    src = np.array([4, 5, 6, 7])
    kw = dict(sos_id=SOS, eos_id=EOS, mask_id=MASK, max_len=8)
    cached, plain = model.generate(src, **kw), model.generate(src, **kw, use_cache=False)
    assert cached == plain and len(cached) >= 3
    # and the scores of each step agree to round-off
    cache, out = model.new_cache(), []
    n = len(src) + 2
    prefix = np.concatenate([[SOS], src, [EOS]])
    for step, tok in enumerate([None] + cached[:3]):
        step_logits = model._cached_step(prefix if tok is None else [tok], MASK, n, cache)[0, -1]
        out.append(tok) if tok is not None else None
        ids = np.concatenate([prefix, np.array(out, dtype=np.int64), [MASK]])[None]
        seg = (np.arange(ids.shape[1]) >= n)[None].astype(np.int64)
        np.testing.assert_allclose(step_logits, model(ids, seg, "seq2seq", src_len=n)[1][0, -1], atol=1e-12)


def test_bad_input_is_refused_by_name():
    model = tiny_model()
    ids, seg, mask, labels, nsp = tiny_batch("seq2seq")
    with pytest.raises(ValueError, match="unknown mask mode 'sideways'"):
        model(ids, seg, "sideways", labels)
    with pytest.raises(ValueError, match="unknown mask mode 'up'"):
        unilm_example([4], [5], np.random.default_rng(0), sos_id=1, eos_id=2, mask_id=3, vocab_size=9, mode="up")
    with pytest.raises(ValueError, match="source length"):
        model(ids, seg, "seq2seq", labels)                 # seq2seq needs src_len
    with pytest.raises(ValueError, match=r"mask: expected shape \(7, 7\) or \(2, 7, 7\)"):
        model(ids, seg, mask[:, :5], labels)
    with pytest.raises(TypeError, match="boolean"):
        model(ids, seg, mask.astype(int), labels)
    with pytest.raises(ValueError, match="exceed max_position"):
        model(np.zeros((1, 9), dtype=np.int64), None, "bidirectional")
    with pytest.raises(ValueError, match="nsp_labels"):
        model(ids, seg, mask, labels, np.array([2, 1]))
    with pytest.raises(ValueError, match="max_len"):
        model.generate(np.array([4, 5, 6]), sos_id=SOS, eos_id=EOS, mask_id=MASK, max_len=5)


def test_a_notnext_reply_always_comes_from_another_pair():
    from minipt.recipes import unified as R
    vocab = R.tokenizer().vocab_size
    pairs = [([20 + 2 * k], [21 + 2 * k]) for k in range(3)]             # reply of pair k: 21 + 2k
    assert 21 + 2 * 2 < vocab
    ids, seg, _, targets, nsp = R.unilm_batch(pairs, np.random.default_rng(0), 300, 0.0, "bidirectional")
    original = np.where(targets != IGNORE, targets, ids)
    a, b = original[:, 1], original[:, 3]                                   # [SOS] a [EOS] b [EOS]
    assert (seg[:, 3] == 1).all()
    assert ((nsp == 1) == (b == a + 1)).all()                               # NotNext: never its own reply
    assert 100 < int((nsp == 0).sum()) < 200
