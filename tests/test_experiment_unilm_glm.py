"""The UniLM and GLM experiments behind the claims ledger: their objectives do what the
papers say, a tiny run reports every arm, floor and per-item score the claims read, and
``minipt experiment unilm|glm`` runs them."""
import json

import numpy as np
import pytest

from minipt.cli import main
from minipt.experiments import EXPERIMENTS, glm_blanks, ledger, unilm_masks
from minipt.experiments.claims import CLAIMS
from minipt.objectives.common import IGNORE
from minipt.objectives.permutation import glm_blank_infilling
from minipt.objectives.unified import unilm_mask
from minipt.recipes import unified as R

OURS = {"unilm": ("unilm-understanding", "unilm-generation"), "glm": ("glm-blanks",)}


def test_the_claims_name_these_experiments_and_appear_in_the_ledger():
    rows = {r["claim"]: r for r in ledger.rows()}
    for name, keys in OURS.items():
        assert name in EXPERIMENTS
        assert {c.key for c in CLAIMS if c.experiment == name} == set(keys)
        for key in keys:
            assert rows[key]["experiment"] == name and rows[key]["verdict"]


@pytest.mark.parametrize("name, module", [("unilm", unilm_masks), ("glm", glm_blanks)])
def test_a_tiny_run_reports_the_arms_floors_and_items_its_claims_read(name, module):
    result = module.run("tiny", seed=0)
    for claim in (c for c in CLAIMS if c.experiment == name):
        assert np.isfinite(result["floors"][claim.floor])
        for arm in claim.arms:
            items = result["items"][arm][claim.metric]
            assert len(items) > 1 and all(0.0 <= x <= 1.0 for x in items)
            assert np.mean(items) == pytest.approx(result["arms"][arm][claim.metric])
    assert {r["arm"] for r in result["rows"]} >= set(result["arms"])


def test_unilm_arms_differ_only_in_the_masks_they_train_under():
    pairs = R.reply_pairs(50, seed=0)
    rng = np.random.default_rng(0)
    ids, seg, mask, labels, nsp = unilm_masks.pretraining(pairs, "seq2seq only")("train", rng)
    for b in range(len(ids)):                     # every row: the seq2seq mask of its own pair, no NSP
        n = int((ids[b] != 0).sum())
        n_src = int((seg[b, :n] == 0).sum())
        np.testing.assert_array_equal(mask[b, :n, :n], unilm_mask("seq2seq", n, n_src))
        assert (labels[b, :n_src] == IGNORE).all()                                 # target tokens only
    assert (nsp == IGNORE).all()
    _, seg, mask, _, nsp = unilm_masks.pretraining(pairs, "UniLM")("train", np.random.default_rng(0))
    kinds = {("bi" if m.all() else "other") for m in mask[:, :5, :5]}
    assert kinds == {"bi", "other"} and (nsp != IGNORE).any()                     # the mix, NSP on some rows


def test_bert_style_masks_glm_spans_one_token_at_a_time():
    sp = R.special_ids()
    ids = R.ids(R.toy_sentences(1, 3)[0])
    for seed in range(20):
        bert = glm_blanks.bert_style(ids, np.random.default_rng(seed), mask_id=sp["mask_id"])
        glm = glm_blank_infilling(ids, np.random.default_rng(seed), ratio=glm_blanks.RATIO, **sp)
        hidden = bert["ids"] == sp["mask_id"]
        assert sum(map(len, R.spans_in_order(glm))) == hidden.sum()                # GLM's spans, token by token
        np.testing.assert_array_equal(bert["targets"][hidden], ids[hidden])
        assert (bert["targets"][~hidden] == IGNORE).all() and bert["mask"].all()
        assert (bert["positions"][1] == 0).all()


def test_bert_fill_gives_each_blank_its_known_length():
    from minipt.models import registry
    sp = R.special_ids()
    model = registry.get("glm").build(rng=np.random.default_rng(0), vocab_size=R.tokenizer().vocab_size,
                                      max_position=32, n_layer=1, n_head=2, d_model=8)
    part_a = np.array([5, sp["mask_id"], 7, sp["mask_id"], 9])
    spans = glm_blanks.bert_fill(model, part_a, [3, 1], sp["mask_id"])
    assert [len(s) for s in spans] == [3, 1]


@pytest.mark.parametrize("name", ["unilm", "glm"])
def test_the_cli_runs_the_experiment_at_the_tiny_budget(name, tmp_path, capsys):
    out = tmp_path / name
    assert main(["experiment", name, "--budget", "tiny", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    assert {r["arm"] for r in result["rows"]} >= {c.arms[0] for c in CLAIMS if c.experiment == name}
    assert name in capsys.readouterr().out


def test_the_understanding_probe_fine_tunes_a_copy_and_leaves_the_arm_as_it_was():
    from minipt.models import registry
    entry = registry.get("unilm")
    model = entry.build(rng=np.random.default_rng(0), vocab_size=R.tokenizer().vocab_size,
                        **{**entry.presets["toy"].model, "d_model": 16, "d_ff": 32, "n_head": 2})
    before = {k: v.copy() for k, v in model.parameters().items()}
    pairs = R.reply_pairs(20, seed=0)
    items = unilm_masks.understand(model, pairs, pairs[:4], steps=2, seed=0)
    assert len(items) > 0 and set(items) <= {0.0, 1.0}
    for k, v in model.parameters().items():
        np.testing.assert_array_equal(v, before[k])          # generation fine-tunes the arm itself afterwards
