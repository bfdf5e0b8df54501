"""minipt train ernie / visualbert / vilbert: a short run writes its files and reports
numbers measured on held-out generated data; resuming continues to the same result as
an uninterrupted run; a second run is refused; --corpus is refused by name."""
import json
import os
import shlex
import signal

import pytest

from minipt.cli import main


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ernie", "visualbert", "vilbert"])
def test_short_run_reports_on_held_out_data(name, tmp_path, capsys):
    out = tmp_path / name
    assert main(["train", name, "--steps", "6", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 6 and (out / "checkpoint.npz").exists() and (out / "loss.png").exists()
    keys = {"ernie": ["masked-word accuracy", "entity-prediction accuracy (dEA)", "country of held-out persons"],
            "visualbert": ["image-text matching accuracy", "masked-region category accuracy"],
            "vilbert": ["image-text matching accuracy", "masked-region category accuracy"]}[name]
    printed = capsys.readouterr().out
    for k in keys:
        assert 0.0 <= report[k] <= 1.0 and k in printed
    assert main(["train", name, "--steps", "6", "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_then_resume_matches_an_uninterrupted_run(tmp_path, monkeypatch, capsys):
    from minipt.recipes import run_folder
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["train", "visualbert", "--steps", "8", "--out", str(whole)]) == 0
    real = run_folder.train

    def interrupted(*args, **kw):
        def ctrl_c(step, record):
            if step == 4:
                os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **{**kw, "callback": ctrl_c})
    monkeypatch.setattr(run_folder, "train", interrupted)
    assert main(["train", "visualbert", "--steps", "8", "--out", str(part)]) == 130
    text = capsys.readouterr().out
    command = text.split("continue with `")[1].split("`")[0]
    monkeypatch.setattr(run_folder, "train", real)
    assert main(["train", "visualbert", "--out", str(part), "--resume", "--steps", "9"]) == 2
    assert "has steps 8, not 9" in capsys.readouterr().err
    assert main(shlex.split(command)[1:]) == 0
    a = json.loads((whole / "report.json").read_text())
    b = json.loads((part / "report.json").read_text())
    assert a["train_loss"] == b["train_loss"]
    assert a["image-text matching accuracy"] == b["image-text matching accuracy"]


def test_corpus_is_refused(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("some text " * 100)
    assert main(["train", "ernie", "--corpus", str(text), "--out", str(tmp_path / "e")]) == 2
    assert "--corpus is not supported" in capsys.readouterr().err
