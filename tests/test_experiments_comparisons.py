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
