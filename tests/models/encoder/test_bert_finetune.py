"""BERT's fine-tuning heads: whole-model gradchecks, forward values against plain NumPy,
a frozen encoder that really stays frozen, and bad input refused by name."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module, gradcheck
from minipt.core.module import eval_mode
from minipt.models import registry
from minipt.models.encoder.bert import TINY, BertConfig, BertForPreTraining, perturbed
from minipt.models.encoder.finetune import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    best_spans,
    tiny_task_batch,
)
from minipt.models.protocol import IGNORE
from minipt.train import TrainConfig, train

CONFIG = BertConfig(**TINY)


def model(cls, freeze=False, **kw):
    m = cls(CONFIG, rng=np.random.default_rng(0), dtype=np.float64, freeze_encoder=freeze, **kw)
    return perturbed(m)


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def whole(m, batch):
    return check_module(m, *batch, select=lambda out: out[0], max_checks=6)


# -- gradients -------------------------------------------------------------------------------
@pytest.mark.parametrize("pair", [False, True], ids=["single", "pair"])
def test_classifier_whole_model_gradcheck(pair):
    ids, segments, mask, labels = tiny_task_batch("bert-classify")
    if not pair:                                           # one sentence: segment A everywhere
        segments = np.zeros_like(segments)
    res = whole(model(BertForSequenceClassification, n_classes=3), (ids, segments, mask, labels))
    assert res.passed, res
    assert {a.name for a in res.arrays} >= {"head.pooler.dense.weight", "head.classifier.weight",
                                            "encoder.embeddings.token_type_embeddings.weight"}


def test_tagger_whole_model_gradcheck():
    res = whole(model(BertForTokenClassification, n_classes=3), tiny_task_batch("bert-tag"))
    assert res.passed, res


def test_span_qa_whole_model_gradcheck_and_the_two_exact_zeros():
    m, batch = model(BertForQuestionAnswering), tiny_task_batch("bert-qa")
    res = whole(m, batch)
    # a softmax over positions ignores a shift shared by every position: the last block's
    # LayerNorm bias and the head's bias have a true gradient of exactly 0
    zero = {"encoder.stack.blocks.1.ln_2.bias", "head.qa_outputs.bias"}
    assert all(a.max_rel_error < res.tol for a in res.arrays if a.name not in zero), res
    m.zero_grad()
    m(*batch)
    m.backward()
    grads = m.gradients()
    assert all(np.abs(grads[n]).max() < 1e-14 for n in zero)
    assert np.abs(grads["head.qa_outputs.weight"]).max() > 1e-3


@pytest.mark.parametrize("name", ["bert-classify", "bert-tag", "bert-qa"])
def test_frozen_encoder_gets_no_gradient_and_the_head_is_exact(name):
    m, batch = registry.get(name).build(rng=np.random.default_rng(0), dtype=np.float64, freeze_encoder=True,
                                        **TINY, **({} if name == "bert-qa" else {"n_classes": 3})), \
        tiny_task_batch(name)
    perturbed(m)
    head = {k: p for k, p in m.named_parameters() if k.startswith("head.")}
    assert head and len(head) < len(m.parameters())

    states = [g.bit_generator.state for _, g in m.generators()]

    def run():
        for (_, g), state in zip(m.generators(), states):     # the same dropout masks every time
            g.bit_generator.state = state
        loss, _ = m(*batch)

        def back(dy):
            m.zero_grad()
            m.backward(dy)
            return {k: g for k, g in m.named_grads() if k.startswith("head.")}
        return loss, back
    res = gradcheck(run, head, {k: "param" for k in head}, max_checks=8)
    assert all(a.max_rel_error < res.tol for a in res.arrays if a.name != "head.qa_outputs.bias"), res
    assert all(not np.any(g) for k, g in m.named_grads() if k.startswith("encoder."))


# -- forward values against plain NumPy ------------------------------------------------------------
def test_classifier_forward_values():
    m = model(BertForSequenceClassification, n_classes=3)
    ids, segments, mask, labels = tiny_task_batch("bert-classify")
    with eval_mode(m):
        loss, logits = m(ids, segments, mask, labels)
        h = m.encoder(ids, segments, mask)
    p = m.parameters()
    pooled = np.tanh(h[:, 0] @ p["head.pooler.dense.weight"].T + p["head.pooler.dense.bias"])
    want = pooled @ p["head.classifier.weight"].T + p["head.classifier.bias"]
    np.testing.assert_allclose(logits, want, rtol=1e-12, atol=1e-14)
    assert float(loss) == pytest.approx(-log_softmax(want)[[0, 1], labels].mean(), rel=1e-12)


def test_tagger_forward_values_count_only_tagged_tokens():
    m = model(BertForTokenClassification, n_classes=3)
    ids, segments, mask, tags = tiny_task_batch("bert-tag")
    with eval_mode(m):
        loss, logits = m(ids, segments, mask, tags)
        h = m.encoder(ids, segments, mask)
    p = m.parameters()
    want = h @ p["head.classifier.weight"].T + p["head.classifier.bias"]
    np.testing.assert_allclose(logits, want, rtol=1e-12, atol=1e-14)
    b, t = np.nonzero(tags != IGNORE)
    assert len(b) == 6
    assert float(loss) == pytest.approx(-log_softmax(want)[b, t, tags[b, t]].mean(), rel=1e-12)


def test_span_qa_forward_values_softmax_over_the_context_only():
    m = model(BertForQuestionAnswering)
    ids, segments, mask, context, start, end = tiny_task_batch("bert-qa")
    with eval_mode(m):
        loss, logits = m(ids, segments, mask, context, start, end)
        h = m.encoder(ids, segments, mask)
    W, bias = m.parameters()["head.qa_outputs.weight"], m.parameters()["head.qa_outputs.bias"]
    total = 0.0
    for r in range(2):
        where = np.flatnonzero(context[r])
        s = h[r, where] @ W[0] + bias[0]                    # S . h_t + b_S over the context
        e = h[r, where] @ W[1] + bias[1]
        np.testing.assert_allclose(logits[r, 0, where], s, rtol=1e-12)
        np.testing.assert_allclose(logits[r, 1, where], e, rtol=1e-12)
        assert (logits[r][:, context[r] == 0] == -1e9).all()
        ps, pe = np.exp(s - s.max()) / np.exp(s - s.max()).sum(), np.exp(e - e.max()) / np.exp(e - e.max()).sum()
        total += -np.log(ps[list(where).index(start[r])]) - np.log(pe[list(where).index(end[r])])
    assert float(loss) == pytest.approx(total / 2 / 2, rel=1e-12)   # mean of the two CEs, mean over rows


def test_best_spans_is_the_best_allowed_pair():
    r = np.random.default_rng(0)
    s, e = r.standard_normal((5, 9)), r.standard_normal((5, 9))
    got = best_spans(s, e, max_answer=3)
    for b in range(5):
        pairs = [(i, j) for i in range(9) for j in range(i, min(i + 3, 9))]
        assert tuple(got[b]) == max(pairs, key=lambda ij: s[b, ij[0]] + e[b, ij[1]])


# -- freezing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bert-classify", "bert-qa"])
def test_a_frozen_encoder_is_not_updated_by_training_with_weight_decay(name):
    extra = {} if name == "bert-qa" else {"n_classes": 3}
    m = registry.get(name).build(rng=np.random.default_rng(0), freeze_encoder=True, **TINY, **extra)
    before = m.state_dict()
    batch = tiny_task_batch(name)
    train(m, lambda split, rng: batch, TrainConfig(steps=5, lr=1e-2, warmup=0, weight_decay=0.1, eval_every=0,
                                                     progress=False))
    after = m.state_dict()
    for k in before:
        if k.startswith("encoder."):
            np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    assert all(not np.array_equal(after[k], before[k]) for k in before if k.endswith("weight") and k.startswith("head."))
    assert m.training and not m.encoder.training                     # the features never see dropout
    h1, h2 = m.encoder(*batch[:3]), m.encoder(*batch[:3])
    np.testing.assert_array_equal(h1, h2)


def test_fine_tuning_updates_the_encoder_and_spec_round_trips():
    m = registry.get("bert-tag").build(rng=np.random.default_rng(0), n_classes=3, **TINY)
    before = m.state_dict()["encoder.embeddings.word_embeddings.weight"].copy()
    batch = tiny_task_batch("bert-tag")
    train(m, lambda split, rng: batch, TrainConfig(steps=3, lr=1e-2, warmup=0, eval_every=0, progress=False))
    assert not np.array_equal(m.state_dict()["encoder.embeddings.word_embeddings.weight"], before)
    frozen = registry.build({**m.spec(), "freeze_encoder": True})
    assert frozen.freeze_encoder and frozen.spec()["n_classes"] == 3


def test_load_pretrained_copies_encoder_and_pooler():
    pre = perturbed(BertForPreTraining(CONFIG, rng=np.random.default_rng(5), dtype=np.float64))
    m = model(BertForSequenceClassification, n_classes=3).load_pretrained(pre)
    for k, v in pre.encoder.parameters().items():
        np.testing.assert_array_equal(m.encoder.parameters()[k], v)
    np.testing.assert_array_equal(m.head.pooler.dense.params["weight"], pre.pooler.dense.params["weight"])
    other = BertForTokenClassification(BertConfig(**{**TINY, "d_model": 16}), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="d_model"):
        other.load_pretrained(pre)


# -- bad input -----------------------------------------------------------------------------------
def test_labels_outside_the_classes_are_refused():
    ids, segments, mask, labels = tiny_task_batch("bert-classify")
    m = model(BertForSequenceClassification, n_classes=3)
    with pytest.raises(ValueError, match="class 3 is outside the 3 classes"):
        m(ids, segments, mask, np.array([0, 3]))
    with pytest.raises(ValueError, match="class -1"):
        m(ids, segments, mask, np.array([-1, 0]))
    with pytest.raises(ValueError, match=r"expected shape \(2,\)"):
        m(ids, segments, mask, np.array([0]))
    with pytest.raises(TypeError, match="integers"):
        m(ids, segments, mask, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="n_classes"):
        BertForSequenceClassification(CONFIG, rng=np.random.default_rng(0), n_classes=1)


def test_bad_tags_are_refused():
    ids, segments, mask, tags = tiny_task_batch("bert-tag")
    m = model(BertForTokenClassification, n_classes=3)
    bad = tags.copy()
    bad[0, 1] = 7
    with pytest.raises(ValueError, match="class 7 is outside the 3 classes"):
        m(ids, segments, mask, bad)
    bad = tags.copy()
    bad[1, 6] = 1                                            # row 1 is padded from position 5
    with pytest.raises(ValueError, match=r"position \(1, 6\) is padding"):
        m(ids, segments, mask, bad)
    with pytest.raises(ValueError, match="no tagged position"):
        m(ids, segments, mask, np.full_like(tags, IGNORE))


def test_answer_spans_outside_the_context_are_refused():
    ids, segments, mask, context, start, end = tiny_task_batch("bert-qa")
    m = model(BertForQuestionAnswering)
    with pytest.raises(ValueError, match="start_positions: row 0 points at 1, outside the context"):
        m(ids, segments, mask, context, np.array([1, 3]), end)
    with pytest.raises(ValueError, match="end_positions: row 1 points at 6, which is padding"):
        m(ids, segments, mask, context, start, np.array([5, 6]))
    with pytest.raises(ValueError, match="row 0 points at 9, outside the sequence of 7 tokens"):
        m(ids, segments, mask, context, np.array([9, 3]), end)
    with pytest.raises(ValueError, match="row 0 ends at 4, before its start 5"):
        m(ids, segments, mask, context, np.array([5, 3]), np.array([4, 3]))
    with pytest.raises(ValueError, match="both start_positions and end_positions"):
        m(ids, segments, mask, context, start)
    pad_context = context.copy()
    pad_context[1, 6] = 1
    with pytest.raises(ValueError, match=r"context_mask: position \(1, 6\).*padding"):
        m(ids, segments, mask, pad_context, start, end)


def test_sequences_over_the_maximum_length_are_refused():
    m = model(BertForSequenceClassification, n_classes=3)
    ids = np.ones((1, TINY["max_position"] + 1), dtype=np.int64)
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_position 8"):
        m(ids, None, None, np.array([0]))


def test_backward_before_a_labelled_forward_is_refused():
    m = model(BertForSequenceClassification, n_classes=3)
    ids, segments, mask, _ = tiny_task_batch("bert-classify")
    m(ids, segments, mask)
    with pytest.raises(RuntimeError, match="forward with labels"):
        m.backward()


def test_each_head_alone_against_a_random_upstream_gradient():
    from minipt.nn.task_heads import SequenceClassifier, SpanClassifier, TokenClassifier
    r = np.random.default_rng(3)
    h = r.standard_normal((2, 5, 8))
    for head in (SequenceClassifier(8, 3, rng=r, dtype=np.float64), TokenClassifier(8, 3, rng=r, dtype=np.float64)):
        assert check_module(head, h).passed
    span = SpanClassifier(8, rng=r, dtype=np.float64)
    context = np.array([[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]], dtype=bool)
    arrays = {"h": h, **span.parameters()}

    def run():
        start, end = span(h, context)

        def back(dy):
            span.zero_grad()
            return {"h": span.backward(dy[0], dy[1]), **span.gradients()}
        # minus a constant: -1e9 off the context would swamp the difference quotient in round-off
        return np.stack([start, end]) - np.where(context, 0.0, -1e9), back
    res = gradcheck(run, arrays, {"h": "input"})
    assert res.passed, res
