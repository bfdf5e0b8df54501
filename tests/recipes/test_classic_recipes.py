"""The classic recipes end to end on a small toy corpus: a result line against the oracle
(LMs) or the analogy and category scores (vectors), and the files they name."""
import dataclasses
import json
from pathlib import Path

import pytest

from minipt.models import registry
from minipt.models.registry import Preset

SMALL = {
    "ngram": Preset(model=dict(order=3, smoothing="kn"), train={}, data=dict(n_words=5000)),
    "nnlm": Preset(model=dict(order=3, dim=8, hidden=16), batch_size=8,
                   train=dict(steps=20, lr=3e-3, min_lr=3e-4, warmup=2, weight_decay=0.0, eval_every=10,
                              eval_batches=2), data=dict(n_words=5000, block_size=8)),
    "word2vec": Preset(model=dict(dim=8, window=2), train=dict(epochs=1), data=dict(n_words=5000)),
    "glove": Preset(model=dict(dim=8), train=dict(epochs=3, lr=0.5), batch_size=64, data=dict(n_words=5000)),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_recipe_reports_and_writes(name, tmp_path):
    entry = dataclasses.replace(registry.get(name), presets={"toy": SMALL[name]})
    report = entry.recipe(entry, "toy", corpus=None, steps=None, out_dir=str(tmp_path), seed=0, resume=False,
                          progress=False)
    text = "\n".join(report["summary"])
    if entry.language_model:
        assert "nats/word" in text and "perplexity" in text and "oracle" in text and "gap" in text
        saved = json.loads((tmp_path / "report.json").read_text())
        assert saved["oracle_nats_per_word"] == pytest.approx(report["oracle_nats_per_word"])
        assert report["val_nats_per_word"] > report["oracle_nats_per_word"] - 0.05
    else:
        assert "analogies" in text and "PPMI+SVD" in text and "category gap" in text
    assert report["files"] and all(Path(f).exists() for f in report["files"])


def test_recipe_errors(tmp_path):
    entry = registry.get("ngram")
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        entry.recipe(entry, "huge", corpus=None, steps=None, out_dir=str(tmp_path), seed=0, resume=False,
                     progress=False)
    with pytest.raises(ValueError, match="nothing to resume"):
        entry.recipe(entry, "toy", corpus=None, steps=None, out_dir=str(tmp_path), seed=0, resume=True,
                     progress=False)


def test_recipe_on_a_text_file(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat .\nthe dog sat on the log .\n" * 30)
    entry = dataclasses.replace(registry.get("ngram"), presets={"toy": SMALL["ngram"]})
    report = entry.recipe(entry, "toy", corpus=str(corpus), steps=None, out_dir=str(tmp_path / "o"), seed=0,
                          resume=False, progress=False)
    assert report["oracle_nats_per_word"] is None and "oracle" not in "\n".join(report["summary"])
