"""minipt train bert: a short run writes its files and a report measured on held-out data
(masked-token accuracy against the most-frequent-token baseline, NSP against chance and
the majority label); a second run is refused; Ctrl-C then --resume gives the
uninterrupted run's result; a file in BERT's format trains; the hooks serve an MLM-only
encoder; a short real run beats the baseline."""
import json
import os
import shlex
import signal

import numpy as np
import pytest

from minipt.cli import main
from minipt.models import registry
from minipt.models.registry import Preset

TINY = Preset(model=dict(n_layer=1, n_head=2, d_model=32, d_ff=64, dropout=0.0), batch_size=16,
              train=dict(steps=6, lr=3e-3, min_lr=3e-4, warmup=1, weight_decay=0.01, eval_every=3, eval_batches=2,
                         grad_clip=1.0, betas=(0.9, 0.999)),
              data=dict(n_docs=60, vocab_size=120, max_length=24, n_instances={"train": 200, "val": 48}))


@pytest.fixture
def tiny_preset(monkeypatch):
    monkeypatch.setitem(registry.get("bert").presets, "tiny", TINY)


def test_short_run_reports_on_held_out_data(tiny_preset, tmp_path, capsys):
    out = tmp_path / "bert"
    assert main(["train", "bert", "--preset", "tiny", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    for f in ("checkpoint.npz", "tokenizer.json", "metrics.jsonl", "loss.png", "run.json"):
        assert (out / f).exists(), f
    assert report["steps"] == 6 and np.isfinite(report["val_loss"])
    assert 0 <= report["mlm_accuracy"] <= 1 and 0 < report["mlm_baseline"] < 1 and report["masked_positions"] > 0
    assert report["sentence_task"] == "NSP" and report["sentence_chance"] == 0.5
    assert 0.5 <= report["sentence_majority"] <= 1 and report["sentence_pairs"] == 48
    printed = capsys.readouterr().out
    assert "masked-token accuracy" in printed and "most-frequent-token baseline" in printed
    assert "NSP accuracy" in printed and "chance 0.5" in printed
    assert main(["train", "bert", "--preset", "tiny", "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_then_resume_matches_an_uninterrupted_run(tiny_preset, tmp_path, monkeypatch, capsys):
    from minipt.recipes import encoder
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["train", "bert", "--preset", "tiny", "--out", str(whole)]) == 0
    real = encoder.train

    def interrupted(*args, **kw):
        def ctrl_c(step, record):
            if step == 3:
                os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **{**kw, "callback": ctrl_c})
    monkeypatch.setattr(encoder, "train", interrupted)
    assert main(["train", "bert", "--preset", "tiny", "--out", str(part)]) == 130
    command = capsys.readouterr().out.split("continue with `")[1].split("`")[0]
    monkeypatch.setattr(encoder, "train", real)
    assert main(["train", "bert", "--out", str(part), "--resume", "--seed", "4"]) == 2
    assert "has seed 0, not 4" in capsys.readouterr().err
    assert main(shlex.split(command)[1:]) == 0
    a, b = (json.loads((d / "report.json").read_text()) for d in (whole, part))
    assert a["train_loss"] == b["train_loss"] and a["mlm_accuracy"] == b["mlm_accuracy"]
    assert main(["train", "bert", "--preset", "tiny", "--out", str(part), "--overwrite", "--steps", "2"]) == 0
    assert json.loads((part / "report.json").read_text())["steps"] == 2


def test_a_file_in_berts_format_trains_and_too_few_documents_are_refused(tiny_preset, tmp_path, capsys):
    rng = np.random.default_rng(0)
    words = "the cat sees a dog near the river . my king rules in the castle . a bird sings".split()
    docs = ["\n".join(" ".join(rng.choice(words, 6)) for _ in range(3)) for _ in range(12)]
    text = tmp_path / "docs.txt"
    text.write_text("\n\n".join(docs) + "\n")
    out = tmp_path / "file"
    assert main(["train", "bert", "--preset", "tiny", "--corpus", str(text), "--out", str(out), "--steps", "2"]) == 0
    assert "docs.txt (12 documents)" in capsys.readouterr().out
    text.write_text("one line\n\nanother\n")
    assert main(["train", "bert", "--preset", "tiny", "--corpus", str(text), "--out", str(tmp_path / "x")]) == 2
    assert "holds 2 documents" in capsys.readouterr().err


def test_hooks_serve_an_mlm_only_encoder_on_packed_sentences(tmp_path):
    from minipt.recipes.encoder import EncoderHooks, train_encoder
    entry = registry.get("bert")
    packed = Preset(model={**TINY.model, "nsp": False}, batch_size=16, train=dict(TINY.train, steps=2),
                    data={**TINY.data, "max_length": 40})
    entry.presets["packed-test"] = packed
    try:
        report = train_encoder(entry, "packed-test", hooks=EncoderHooks(mode="packed", sentence_task=None),
                               out_dir=str(tmp_path / "p"), progress=False)
    finally:
        del entry.presets["packed-test"]
    assert report["steps"] == 2 and "mlm_accuracy" in report and "sentence_accuracy" not in report


@pytest.mark.slow
def test_a_short_real_run_beats_the_most_frequent_token(tiny_preset, tmp_path):
    out = tmp_path / "real"
    assert main(["train", "bert", "--preset", "tiny", "--out", str(out), "--steps", "150"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["mlm_accuracy"] > report["mlm_baseline"] + 0.05, report
