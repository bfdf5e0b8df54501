"""The fine-tuning and masking experiments: the masking schemes mask what they say at
the same rate, and tiny runs report every setting and scheme."""
import numpy as np
import pytest

from minipt.data.encoder_corpus import encoder_corpus
from minipt.experiments import fine_tuning, masking
from minipt.objectives.common import IGNORE


@pytest.fixture(scope="module")
def corpus():
    return encoder_corpus(n_docs=60, seed=0, mode="nsp", max_length=32, batch_size=64, n_instances={"train": 200,
                                                                                                       "val": 50})


def test_phrase_units_are_noun_phrases_and_single_other_words():
    tokens = ["the", "old", "k", "##ing", "sees", "his", "gold", "near", "the", "river", "."]
    assert masking.word_starts(tokens).tolist() == [1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1]
    assert masking.phrase_units(tokens) == [(0, 4), (4, 5), (5, 7), (7, 8), (8, 10), (10, 11)]


@pytest.mark.parametrize("scheme", masking.SCHEMES)
def test_each_scheme_masks_its_units_at_the_same_rate(corpus, scheme):
    ids, segments, mask, labels = corpus.unmasked("train", np.random.default_rng(1))
    inputs, seg2, mask2, targets, labels2 = masking.SchemeBatches(corpus, scheme).get_batch("train",
                                                                                           np.random.default_rng(1))
    np.testing.assert_array_equal(seg2, segments)
    np.testing.assert_array_equal(labels2, labels)
    chosen = targets != IGNORE
    np.testing.assert_array_equal(targets[chosen], ids[chosen])            # targets are the clean tokens
    assert not np.isin(ids[chosen], corpus.special_ids).any()              # never [CLS], [SEP], [PAD]
    body = ~np.isin(ids, corpus.special_ids)
    rate = chosen.sum() / body.sum()
    assert 0.12 < rate < 0.22, rate                                        # about 15 % for every scheme
    tokens = [[corpus.tok.id_to_token(int(i)) for i in row] for row in ids]
    for b in range(len(ids)):
        pos = np.flatnonzero(body[b])
        row = [tokens[b][p] for p in pos]
        c = chosen[b, pos]
        if scheme in ("whole word", "phrase"):                             # a unit is chosen whole
            units = masking.phrase_units(row) if scheme == "phrase" else \
                list(zip(np.flatnonzero(masking.word_starts(row)), list(np.flatnonzero(masking.word_starts(row))[1:])
                         + [len(row)]))
            for s, e in units:
                assert c[s:e].all() or not c[s:e].any(), (scheme, row[s:e], c[s:e])
    runs = [len(r) for row in chosen for r in np.split(row, np.flatnonzero(np.diff(row.astype(int))) + 1)
            if r.all() and r.size]
    if scheme == "span":                                                   # longer runs than single tokens
        assert np.mean(runs) > 2.0
    elif scheme in ("token", "whole word"):                                # most toy words are one piece
        assert np.mean(runs) < 1.6


def test_unknown_scheme_and_budget_are_refused(corpus):
    with pytest.raises(ValueError, match="scheme must be one of"):
        masking.SchemeBatches(corpus, "random")
    with pytest.raises(ValueError, match="budget must be one of"):
        masking.run("huge")
    with pytest.raises(ValueError, match="budget must be one of"):
        fine_tuning.run("huge")


def test_majority_baseline():
    class Data:
        test = [{"label": 1}, {"label": 1}, {"label": 0}]
    assert fine_tuning.majority("sentiment", Data) == pytest.approx(2 / 3)
    Data.test = [{"tags": ["DET", "NOUN", "NOUN"]}, {"tags": ["VERB"]}]
    assert fine_tuning.majority("tagging", Data) == 0.5        # span QA's floor: tests/test_fair_studies.py


@pytest.mark.slow
def test_fine_tuning_tiny_run_reports_every_setting_and_task():
    out = fine_tuning.run("tiny", progress=False)
    assert [r["setting"] for r in out["rows"]] == list(fine_tuning.SETTINGS)
    for r in out["rows"]:
        assert set(r) == {"setting", *fine_tuning.TASKS} and all(0 <= r[t] <= 1 for t in fine_tuning.TASKS)
    assert set(out["majority"]) == set(fine_tuning.TASKS) and 0 < out["mlm accuracy"] < 1


@pytest.mark.slow
def test_masking_tiny_run_reports_every_scheme():
    out = masking.run("tiny", progress=False)
    assert [r["masking"] for r in out["rows"]] == list(masking.SCHEMES)
    assert all(0 <= r["span QA exact match"] <= 1 and 0 < r["MLM accuracy"] < 1 for r in out["rows"])
    for scheme in masking.SCHEMES:            # the ledger's arms: per-question scores whose mean is the figure
        em = out["items"][scheme]["exact match"]
        assert len(em) == 32 and set(em) <= {0.0, 1.0}
        assert np.mean(em) == pytest.approx(out["arms"][scheme]["exact match"])
    qa = fine_tuning.task_data(masking.BUDGETS["tiny"], 0)["span_qa"]
    assert out["floors"]["baseline"] == fine_tuning.majority("span_qa", qa, fine_tuning.pretrain(
        masking.BUDGETS["tiny"], seed=0)[1])
    assert masking.BUDGETS["full"]["schemes"] == ("token", "whole word", "span")     # the claims' arms
