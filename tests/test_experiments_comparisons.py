"""The comparison experiments (T5's objectives and architectures): tiny budgets give every
row, the variants are what they claim, an unknown budget is refused."""
import numpy as np
import pytest

from minipt.experiments import get
from minipt.experiments import objectives as objx


def _claims(name):
    from minipt.experiments.claims import CLAIMS
    return [c for c in CLAIMS if c.experiment == name]


@pytest.mark.slow
def test_objectives_tiny_reports_the_claims_arms_floors_and_items():
    r = objx.run("tiny", progress=False)
    assert list(r["arms"]) == ["no pre-training", "prefix LM", "BERT-style", "i.i.d. 15 %", "spans, mean 3"]
    for c in _claims("objectives"):
        assert set(c.arms) <= set(r["arms"]) and c.floor in r["floors"]
        for arm in c.arms:                                         # the per-item scores give the value
            assert np.mean(r["items"][arm][c.metric]) == pytest.approx(r["arms"][arm][c.metric])
    n_test = 4 * r["test pairs per task"]
    for arm, m in r["arms"].items():
        assert len(r["items"][arm]["score"]) == n_test and set(r["items"][arm]["score"]) <= {0.0, 1.0}
        assert m["score"] == pytest.approx(np.mean([m[t] for t in ("translate", "summarize", "sentiment",
                                                                   "similarity")]))
    length = {arm: m["target length"] for arm, m in r["arms"].items()}
    assert length["no pre-training"] == 0.0
    assert length["BERT-style"] == r["floors"]["whole piece"] == r["piece tokens"] + 1   # the whole piece + </s>
    assert length["spans, mean 3"] < length["i.i.d. 15 %"] < length["BERT-style"]
    assert 0 < r["floors"]["commonest answer"] < 1


def test_the_commonest_answer_floor_is_the_mean_of_each_tasks_commonest_answer():
    from collections import Counter

    from minipt.data import text_to_text as t2t
    from minipt.recipes.seq2seq import majority_scores
    data = t2t.text_to_text((200, 10, 40), seed=3)
    floors = majority_scores(data)
    for task, d in data.items():
        top = Counter(e["target"] for e in d["train"]).most_common(1)[0][0]
        assert floors[task] == pytest.approx(np.mean([e["target"] == top for e in d["test"]]))
    assert floors["translate"] == floors["summarize"] == 0.0 and floors["sentiment"] > 0.3


def test_span_targets_are_shorter_than_iid_targets_by_counting():
    """15 % of a 40-token piece is 6 noise tokens: i.i.d. noise makes about 6 * 0.85 runs
    (one sentinel each), spans of mean 3 make 2; each target is sentinels + noise + the
    closing sentinel + </s>."""
    from minipt.data import text_to_text as t2t
    from minipt.objectives.spans import pack_pieces
    from minipt.tokenizers.special import MASK, t5_sentinels
    data = t2t.text_to_text((200, 2, 2), seed=0)
    tok = t2t.build_tokenizer(data, (MASK, *t5_sentinels(objx.N_SENTINELS)))
    texts = [t2t.plain_text(e["input"]) for t in data.values() for e in t["train"]]
    rng = np.random.default_rng(0)
    pieces = [pack_pieces(texts, 40, rng, tok.encode) for _ in range(2000)]
    v = objx.variants(tok)
    spans = objx.target_lengths(v["spans, mean 3"], pieces, np.random.default_rng(1))
    assert (spans == 6 + 2 + 1 + 1).all()                          # round(6 / 3) = 2 spans, always
    iid = objx.target_lengths(v["i.i.d. 15 %"], pieces, np.random.default_rng(1))
    expected = 40 * 0.15 + (0.15 + 39 * 0.15 * 0.85) + 2             # noise + runs (each starts after a kept token) + 2
    assert iid.mean() == pytest.approx(expected, abs=0.3)
    assert objx.target_lengths(v["BERT-style"], pieces[:5], rng).tolist() == [41.0] * 5


def test_per_item_scores_are_the_held_out_answers_scored_one_by_one():
    """``test_items`` against ``recipes.seq2seq.evaluate``'s per-task scores, on a model
    whose answers differ between items (random weights answer nothing right, so one
    right answer is planted by scoring against the model's own answer)."""
    from minipt.data import text_to_text as t2t
    from minipt.models.seq2seq.transformer import Transformer, TransformerConfig
    from minipt.recipes.seq2seq import evaluate
    from minipt.tokenizers.special import BOS, MASK, PAD, t5_sentinels
    data = t2t.text_to_text((30, 2, 3), seed=0)
    tok = t2t.build_tokenizer(data, (MASK, *t5_sentinels(objx.N_SENTINELS)))
    model = Transformer(TransformerConfig(vocab_size=tok.vocab_size, pad_id=tok.token_to_id(PAD), prenorm=True,
                                          max_source_len=objx.MAX_SOURCE, max_target_len=objx.MAX_TARGET,
                                          **objx.SMALL), rng=np.random.default_rng(0))
    test = [e for t in data.values() for e in t["test"]]
    _, answers = evaluate(model, tok, test, BOS, objx.MAX_SOURCE)
    test[4] = {**test[4], "target": answers[test[4]["task"]][1]}  # the second summarize pair: now right
    items = objx.test_items(model, tok, test)
    assert items.shape == (12,) and items[4] == 1.0
    scores, _ = evaluate(model, tok, test, BOS, objx.MAX_SOURCE)
    for k, task in enumerate(data):
        assert items[3 * k:3 * k + 3].mean() == pytest.approx(scores[task])


def test_objective_batches_have_the_stated_layout():
    from minipt.data import text_to_text as t2t
    from minipt.tokenizers.special import BOS, EOS, MASK, t5_sentinels
    data = t2t.text_to_text((30, 2, 2), seed=0)
    tok = t2t.build_tokenizer(data, (MASK, *t5_sentinels(objx.N_SENTINELS)))
    texts = [t2t.plain_text(e["input"]) for t in data.values() for e in t["train"]]
    v = objx.variants(tok)
    src, tin, tgt = objx.objective_batch(v["BERT-style"], 20, tok, texts, 4, np.random.default_rng(0))
    assert src.shape == (4, 20) and tin.shape == tgt.shape == (4, 21)
    assert (tin[:, 0] == tok.token_to_id(BOS)).all() and (tgt[:, -1] == tok.token_to_id(EOS)).all()
    np.testing.assert_array_equal(tin[:, 1:], tgt[:, :-1])             # teacher forcing: shifted by one
    assert (src != tgt[:, :-1]).any() and (src == tgt[:, :-1]).mean() > 0.7   # about 15 % corrupted
    with pytest.raises(ValueError, match="too long"):
        objx.objective_batch(v["BERT-style"], objx.MAX_TARGET, tok, texts, 2, np.random.default_rng(0))


@pytest.mark.parametrize("name", ["objectives"])
def test_unknown_budget_is_refused(name):
    with pytest.raises(ValueError, match="budget must be one of"):
        get(name).run("huge", progress=False)


# -- architectures ---------------------------------------------------------------------
from minipt.experiments import architectures as archx  # noqa: E402


def _tok():
    from minipt.data import text_to_text as t2t
    from minipt.tokenizers.special import MASK, SEP, t5_sentinels
    data = t2t.text_to_text((30, 2, 2), seed=0)
    return data, t2t.build_tokenizer(data, (SEP, MASK, *t5_sentinels(objx.N_SENTINELS)))


@pytest.mark.slow
def test_architectures_tiny_reports_the_claims_arms_floors_and_items():
    r = archx.run("tiny", progress=False)
    assert list(r["arms"]) == list(archx.ARCHITECTURES)
    for c in _claims("architectures"):
        assert set(c.arms) <= set(r["arms"]) and c.floor in r["floors"]
    for arm, m in r["arms"].items():
        assert len(r["items"][arm]["score"]) == 4 * r["test pairs per task"]
        assert np.mean(r["items"][arm]["score"]) == pytest.approx(m["score"]) and m["parameters"] > 0


def test_shared_encoder_decoder_has_about_half_the_parameters():
    _, tok = _tok()
    full = archx.build("encoder-decoder", tok, archx.TOY, np.random.default_rng(0))
    shared = archx.build("shared encoder-decoder", tok, archx.TOY, np.random.default_rng(0))
    C, L, V = 64, 2, tok.vocab_size
    block = 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C)  # ln, attn, mlp
    cross = 2 * C + (C * C + C) + (2 * C * C + 2 * C) + (C * C + C)
    assert full.num_parameters() == V * C + 2 * C * 2 + L * block + L * (block + cross)          # + final norms
    assert shared.num_parameters() == full.num_parameters() - L * block
    body = lambda m: m.num_parameters() - V * C                                                  # without the table
    assert 0.5 < body(shared) / body(full) < 0.6                                                 # ~half (cross-attn kept)
    for e, d in zip(shared.encoder.blocks, shared.decoder.blocks):
        assert d.attn.c_attn.params["weight"] is e.attn.c_attn.params["weight"]
        assert d.mlp.c_fc.grads["weight"] is e.mlp.c_fc.grads["weight"]
        assert d.cross_attn.q_proj.params["weight"] is not e.attn.c_attn.params["weight"]


def test_shared_encoder_decoder_gradcheck_through_the_ties():
    from minipt.core.gradcheck import check_module
    from minipt.models.decoder.gpt import perturbed
    from minipt.models.seq2seq.transformer import (
        TINY,
        Transformer,
        TransformerConfig,
        tiny_batch,
    )
    model = perturbed(archx.share_encoder_decoder(Transformer(TransformerConfig(**{**TINY, "prenorm": True}),
                                                              rng=np.random.default_rng(0), dtype=np.float64)))
    res = check_module(model, *tiny_batch(), select=lambda out: out[0], max_checks=6)
    assert res.passed, str(res)
    names = {a.name for a in res.arrays}
    assert "encoder.blocks.0.attn.c_attn.weight" in names and "decoder.blocks.0.attn.c_attn.weight" not in names


def test_single_stack_layouts():
    from minipt.models.protocol import IGNORE
    from minipt.tokenizers.special import EOS, SEP
    data, tok = _tok()
    pairs = [data["sentiment"]["train"][0], data["translate"]["train"][0]]
    enc = [tok.encode(e["input"]) + [tok.token_to_id(SEP)] for e in pairs]
    tgt = [tok.encode(e["target"]) + [tok.token_to_id(EOS)] for e in pairs]
    b = archx.Batches("prefix LM", tok, data, 0, 40)
    idx, y, prefix = b.finetune(pairs)
    assert prefix.tolist() == [len(s) for s in enc]
    for i, (s, t) in enumerate(zip(enc, tgt)):
        assert idx[i, :len(s)].tolist() == s
        assert y[i, len(s) - 1:len(s) - 1 + len(t)].tolist() == t                # each target token, next
        assert (y[i, :len(s) - 1] == IGNORE).all() and (y[i, len(s) - 1 + len(t):] == IGNORE).all()
    b.arch = "decoder-only"
    assert b.finetune(pairs)[2] == 0


@pytest.mark.parametrize("arch", ["decoder-only", "prefix LM"])
def test_batched_answers_equal_one_at_a_time(arch):
    data, tok = _tok()
    from minipt.models.decoder.gpt import perturbed
    model = perturbed(archx.build(arch, tok, archx.SMALL, np.random.default_rng(1)), scale=1.0)   # sensitive
    inputs = [data["sentiment"]["test"][0]["input"], data["similarity"]["test"][0]["input"]]
    together = archx.answer(arch, model, tok, inputs)
    assert together == [archx.answer(arch, model, tok, [x])[0] for x in inputs]


def test_unknown_architecture_and_budget_are_refused():
    _, tok = _tok()
    with pytest.raises(ValueError, match="unknown architecture"):
        archx.build("rnn", tok, archx.SMALL, np.random.default_rng(0))
    with pytest.raises(ValueError, match="budget must be one of"):
        archx.run("huge", progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("module, arm", [(objx, "spans, mean 3"), (archx, "prefix LM")])
def test_one_arm_run_alone_gives_the_figures_of_the_whole_run(module, arm):
    """``only``: each arm depends on the seed alone, so arms run as separate processes
    merge into the record one run would give."""
    whole = module.run("tiny", seed=1, progress=False)
    alone = module.run("tiny", seed=1, progress=False, only=(arm,))
    assert list(alone["arms"]) == [arm] and alone["floors"] == whole["floors"]
    assert alone["arms"][arm] == whole["arms"][arm] and alone["items"][arm] == whole["items"][arm]
    with pytest.raises(ValueError, match="unknown arm"):
        module.run("tiny", progress=False, only=("encoder-only",))


def test_the_t5_claims_are_judged_from_the_committed_runs():
    from minipt.experiments import ledger
    from minipt.experiments.verdict import VERDICTS
    rows = {r["claim"]: r for r in ledger.rows()}
    for key in ("t5-architectures", "t5-prefix-lm", "t5-denoising", "t5-spans", "t5-short-targets", "t5-pretraining"):
        assert rows[key]["verdict"] in VERDICTS and rows[key]["seeds"] == [0, 1, 2], key
