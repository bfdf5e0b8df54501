"""The command line: the main job end to end (short), sampling, clean errors."""
import json

import pytest

from minipt.cli import main
from minipt.data.text import load_text


@pytest.mark.slow
def test_train_gpt_then_sample(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "gpt", "--steps", "30", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 30 and report["val_loss"] < 3.0 and 0.3 < report["oracle_loss"] < 0.6
    assert (out / "loss.png").exists() and (out / "metrics.jsonl").exists()
    text = capsys.readouterr().out
    assert "oracle loss of this validation text" in text and "entropy rate of the toy language 0.428" in text
    assert main(["sample", "--checkpoint", str(out), "--prompt", "the ", "--max-new-tokens", "10",
                 "--temperature", "0"]) == 0


def test_errors_are_messages_not_tracebacks(tmp_path, capsys):
    assert main(["sample", "--checkpoint", str(tmp_path / "none")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    (tmp_path / "empty.txt").write_text("  \n")
    assert main(["train", "gpt", "--corpus", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "r")]) == 2
    assert "is empty" in capsys.readouterr().err


def test_load_text_errors(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match="byte 3"):
        load_text(bad)
    with pytest.raises(FileNotFoundError):
        load_text(tmp_path / "missing.txt")


@pytest.mark.slow
def test_export_then_sample_hf(tmp_path, capsys):
    run, hf = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "gpt", "--steps", "5", "--out", str(run)]) == 0
    assert main(["export", "--checkpoint", str(run), "--to", str(hf)]) == 0
    out = capsys.readouterr().out
    assert (hf / "model.safetensors").exists() and (hf / "config.json").exists()
    assert "tokenizer.json" in out and "minipt_tokenizer.json" in out    # transformers' form and minipt's
    assert main(["export", "--checkpoint", str(run), "--to", str(hf)]) == 2
    assert "overwrite" in capsys.readouterr().err
    for source in (["--checkpoint", str(run)], ["--hf", str(hf)]):
        assert main(["sample", *source, "--prompt", "the ", "--max-new-tokens", "8", "--temperature", "0"]) == 0
    from_run, from_hf = capsys.readouterr().out.splitlines()[-2:]
    assert from_run == from_hf                                # greedy: the exported model is the same model


def test_sample_hf_fixture_without_tokenizer_takes_ids(capsys):
    from pathlib import Path
    folder = Path(__file__).parent / "interop" / "fixtures" / "gpt2"
    assert main(["sample", "--hf", str(folder), "--prompt", "1 2 3", "--max-new-tokens", "4",
                 "--temperature", "0"]) == 0
    ids = capsys.readouterr().out.split()
    assert ids[:3] == ["1", "2", "3"] and len(ids) == 7
    assert main(["sample", "--hf", str(folder), "--prompt", "hello"]) == 2
    assert "token ids" in capsys.readouterr().err


def test_checkpoint_and_tokenizer_from_different_runs(tmp_path, capsys):
    import shutil
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["train", "gpt", "--steps", "2", "--out", str(a)]) == 0
    (tmp_path / "words.txt").write_text("hello world, a small corpus of text for one test only. " * 40)
    assert main(["train", "gpt", "--steps", "2", "--corpus", str(tmp_path / "words.txt"), "--out", str(b)]) == 0
    shutil.copy(b / "tokenizer.json", a / "tokenizer.json")
    capsys.readouterr()
    assert main(["sample", "--checkpoint", str(a)]) == 2
    assert "different runs" in capsys.readouterr().err
