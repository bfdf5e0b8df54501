"""minipt train unilm / prefixlm / glm: a short run writes its files and reports numbers
measured on held-out toy data; a second run into the folder is refused; resuming after
Ctrl-C ends where an uninterrupted run does; --corpus and unknown presets are refused."""
import json
import os
import shlex
import signal

import numpy as np
import pytest

from minipt.cli import main

KEYS = {"unilm": ["cloze accuracy bidirectional", "cloze accuracy seq2seq", "cloze accuracy left_to_right",
                  "cloze accuracy right_to_left", "NSP accuracy", "translation exact match",
                  "translation token accuracy"],
        "prefixlm": ["held-out loss after the prefix (nats/word)", "the same positions read left to right"],
        "glm": ["grammatical fills", "grammatical random fills", "exact fills"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KEYS))
def test_short_run_reports_on_held_out_data(name, tmp_path, capsys):
    out = tmp_path / name
    assert main(["train", name, "--steps", "6", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 6 and (out / "checkpoint.npz").exists() and (out / "loss.png").exists()
    printed = capsys.readouterr().out
    for k in KEYS[name]:
        assert np.isfinite(report[k]) and k in printed
        assert report[k] >= 0 and ("accuracy" not in k and "fills" not in k and "match" not in k or report[k] <= 1)
    assert main(["train", name, "--steps", "6", "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    if name == "prefixlm":                                   # the cheapest run: --overwrite replaces it
        assert main(["train", name, "--steps", "6", "--out", str(out), "--overwrite", "--seed", "1"]) == 0
        assert json.loads((out / "run.json").read_text())["seed"] == 1


@pytest.mark.slow
def test_ctrl_c_then_resume_matches_an_uninterrupted_run(tmp_path, monkeypatch, capsys):
    from minipt.recipes import run_folder
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["train", "prefixlm", "--steps", "8", "--out", str(whole)]) == 0
    real = run_folder.train

    def interrupted(*args, **kw):
        def ctrl_c(step, record):
            if step == 4:
                os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **{**kw, "callback": ctrl_c})
    monkeypatch.setattr(run_folder, "train", interrupted)
    assert main(["train", "prefixlm", "--steps", "8", "--out", str(part)]) == 130
    command = capsys.readouterr().out.split("continue with `")[1].split("`")[0]
    monkeypatch.setattr(run_folder, "train", real)
    assert main(shlex.split(command)[1:]) == 0
    a, b = (json.loads((d / "report.json").read_text()) for d in (whole, part))
    assert a["train_loss"] == b["train_loss"] and a["val_loss"] == b["val_loss"]
    assert a["held-out loss after the prefix (nats/word)"] == b["held-out loss after the prefix (nats/word)"]


def test_corpus_and_unknown_presets_are_refused(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("some text " * 100)
    assert main(["train", "glm", "--corpus", str(text), "--out", str(tmp_path / "g")]) == 2
    assert "--corpus is not supported" in capsys.readouterr().err
    assert main(["train", "unilm", "--preset", "huge", "--out", str(tmp_path / "u")]) == 2
    assert "unknown preset 'huge'" in capsys.readouterr().err
