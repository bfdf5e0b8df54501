"""The comparison experiments (T5's objectives and architectures): tiny budgets give every
row, the variants are what they claim, an unknown budget is refused."""
import numpy as np
import pytest

from minipt.experiments import get
from minipt.experiments import objectives as objx


@pytest.mark.slow
def test_objectives_tiny_gives_every_row():
    r = objx.run("tiny", progress=False)
    names = [row["objective"] for row in r["rows"]]
    assert names == ["none", "prefix LM", "BERT-style 15%", "deshuffling",
                     *[f"i.i.d. sentinels {p}%" for p in (10, 15, 25, 50)],
                     *[f"spans 15%, mean length {s}" for s in (2, 3, 5, 10)]]
    for row in r["rows"]:
        assert 0.0 <= row["mean score"] <= 1.0
        assert set(row) >= {"translate", "summarize", "sentiment", "similarity", "target length"}
    length = {row["objective"]: row["target length"] for row in r["rows"]}
    assert length["none"] == 0.0
    assert length["BERT-style 15%"] == length["deshuffling"] == r["piece tokens"] + 1   # the whole piece + </s>
    iid = [length[f"i.i.d. sentinels {p}%"] for p in (10, 15, 25, 50)]
    assert iid == sorted(iid)                                          # more noise, longer targets


def test_objective_batches_have_the_stated_layout():
    from minipt.data import text_to_text as t2t
    from minipt.tokenizers.special import BOS, EOS, MASK, t5_sentinels
    data = t2t.text_to_text((30, 2, 2), seed=0)
    tok = t2t.build_tokenizer(data, (MASK, *t5_sentinels(objx.N_SENTINELS)))
    texts = [t2t.plain_text(e["input"]) for t in data.values() for e in t["train"]]
    v = objx.variants(tok)
    src, tin, tgt = objx.objective_batch(v["deshuffling"], 20, tok, texts, 4, np.random.default_rng(0))
    assert src.shape == (4, 20) and tin.shape == tgt.shape == (4, 21)
    assert (tin[:, 0] == tok.token_to_id(BOS)).all() and (tgt[:, -1] == tok.token_to_id(EOS)).all()
    np.testing.assert_array_equal(tin[:, 1:], tgt[:, :-1])             # teacher forcing: shifted by one
    np.testing.assert_array_equal(np.sort(src, axis=1), np.sort(tgt[:, :-1], axis=1))
    rng = np.random.default_rng(1)
    spans = [objx.mean_target_length(v[f"spans 15%, mean length {s}"], 40, tok, texts, rng, 200) for s in (2, 10)]
    assert spans[0] > spans[1]                                         # longer spans, fewer sentinels


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
def test_architectures_tiny_gives_every_row():
    r = archx.run("tiny", progress=False)
    assert [row["architecture"] for row in r["rows"]] == list(archx.ARCHITECTURES)
    for row in r["rows"]:
        assert 0.0 <= row["mean score"] <= 1.0 and row["parameters"] > 0
        assert {"translate", "summarize", "sentiment", "similarity"} <= set(row)


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
    from minipt.tokenizers.special import EOS, MASK, PAD, SEP
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
    b.arch = "decoder-only LM"
    assert b.finetune(pairs)[2] == 0
    b.arch = "encoder-only"
    x, _, attn, y = b.finetune(pairs)
    for i, (s, t) in enumerate(zip(enc, tgt)):
        assert (x[i, len(s):len(s) + archx.MAX_TARGET] == tok.token_to_id(MASK)).all()
        assert y[i, len(s):len(s) + len(t)].tolist() == t
    assert (attn == (x != tok.token_to_id(PAD))).all()


@pytest.mark.parametrize("arch", ["decoder-only LM", "prefix LM", "encoder-only"])
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
