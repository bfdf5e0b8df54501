"""``minipt train lstm`` and ``minipt train elmo`` end to end (a few steps): reports against
the oracle, files written, the LSTM checkpoint samples; ELMo refuses --corpus by name."""
import json

import pytest

from minipt.cli import main


@pytest.mark.slow
def test_train_lstm_then_sample(tmp_path, capsys):
    out = tmp_path / "lstm"
    assert main(["train", "lstm", "--steps", "4", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 4 and 0.3 < report["oracle_loss"] < 0.6 and report["val_loss"] > report["oracle_loss"]
    printed = capsys.readouterr().out
    assert "nats/char" in printed and "oracle" in printed and "checkpoint.npz" in printed
    assert main(["sample", "--checkpoint", str(out), "--prompt", "the ", "--max-new-tokens", "5"]) == 0


@pytest.mark.slow
def test_train_elmo_reports_both_directions(tmp_path, capsys):
    out = tmp_path / "elmo"
    assert main(["train", "elmo", "--steps", "3", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["forward_loss"] > report["oracle_loss"] and report["backward_loss"] > report["oracle_loss"]
    assert "backward LM" in capsys.readouterr().out
    assert main(["train", "elmo", "--steps", "3", "--corpus", str(out / "report.json"), "--out", str(tmp_path / "elmo2")]) == 2
    assert "--corpus is not supported" in capsys.readouterr().err
