"""minipt train roberta | albert | electra: the bert recipe with each model's hooks. A short
run of each writes a report of its own kind (RoBERTa MLM only on byte-level BPE, ALBERT's
SOP, ELECTRA's replaced-token detection); the hooks' pieces checked by hand."""
import json
from dataclasses import replace

import numpy as np
import pytest

from minipt.cli import main
from minipt.data.encoder_corpus import encoder_corpus
from minipt.models import registry
from minipt.models.encoder import roberta
from minipt.objectives.common import IGNORE
from minipt.recipes.electra import electra_batches
from minipt.tokenizers.base import Tokenizer
from minipt.tokenizers.special import BERT_SPECIALS

SMALL = dict(n_layer=1, n_head=2, d_model=16, d_ff=32)
DATA = dict(n_docs=40, max_length=24, n_instances={"train": 64, "val": 32})
TRAIN = dict(steps=3, warmup=1, eval_every=3, eval_batches=1)


@pytest.fixture
def tiny_presets(monkeypatch):
    for name, extra in (("roberta", dict(vocab_size=300)), ("albert", dict(vocab_size=120)),
                        ("electra", dict(vocab_size=120))):
        p = registry.get(name).presets["toy"]
        model = {**p.model, **SMALL}
        if name == "electra":
            model.update(generator_d_model=8, generator_n_head=1, generator_d_ff=16)
        tiny = replace(p, model=model, batch_size=8, train={**p.train, **TRAIN}, data={**p.data, **DATA, **extra})
        monkeypatch.setitem(registry.get(name).presets, "tiny", tiny)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["roberta", "albert", "electra"])
def test_short_run_reports_its_own_objective(tiny_presets, tmp_path, capsys, name):
    out = tmp_path / name
    assert main(["train", name, "--preset", "tiny", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 3 and np.isfinite(report["val_loss"])
    printed = capsys.readouterr().out
    if name == "roberta":
        assert "sentence_task" not in report and 0 <= report["mlm_accuracy"] <= 1
        tok = Tokenizer.load(out / "tokenizer.json")
        assert type(tok).__name__ == "RobertaTokenizer" and tok.special_tokens["[PAD]"] == 1
    elif name == "albert":
        assert report["sentence_task"] == "SOP" and "SOP accuracy" in printed
    else:
        assert 0 <= report["rtd_accuracy"] <= 1 and 0 < report["rtd_baseline"] < 1
        assert 0 <= report["rtd_auc"] <= 1 and 0 < report["base_rate_entropy"] < np.log(2)
        assert "replaced-token detection AUC" in printed and "for the base rate" in printed
    assert main(["train", name, "--preset", "tiny", "--out", str(out)]) == 2          # a second run is refused


def test_byte_bpe_tokenizer_takes_robertas_layout_under_bert_strings():
    docs = [[["the", "dog", "sleeps", "."], ["a", "dog", "runs", "."]]] * 3
    tok = roberta.byte_bpe_tokenizer(docs, 270)
    assert tok.vocab_size == 270 and [tok.special_tokens[t] for t in BERT_SPECIALS] == [1, 3, 0, 2, 4]
    assert len(tok.encode("dog")) == 1                               # merges learned on bare words
    with pytest.raises(ValueError, match="merges"):
        roberta.byte_bpe_tokenizer(docs, 261)


def test_electra_batches_mask_with_mask_only_and_never_specials():
    corpus = encoder_corpus(n_docs=30, mode="packed", max_length=24, batch_size=8,
                            n_instances={"train": 32, "val": 16})
    ids, seg, mask, targets = electra_batches(corpus)("train", np.random.default_rng(0))
    chosen = targets != IGNORE
    assert chosen.any() and np.all(ids[chosen] == corpus.mask_id)        # ELECTRA: [MASK] every time
    assert not np.isin(targets[chosen], corpus.special_ids).any()
    clean = corpus.unmasked("train", np.random.default_rng(0))[0]
    assert np.array_equal(ids[~chosen], clean[~chosen])
