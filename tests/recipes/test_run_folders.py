"""Every recipe follows the same --out rule (recipes/run_folder.py): a second run into a
folder that holds one is refused, --overwrite replaces only the run's files, and a model
that trains in one pass refuses --resume. Checked through the CLI on the n-gram (fast)."""
from pathlib import Path

from minipt.cli import main


def test_second_run_into_the_same_folder_is_refused_then_overwritten(tmp_path, capsys):
    out = tmp_path / "ng"
    assert main(["train", "ngram", "--out", str(out)]) == 0
    report = (out / "report.json").read_bytes()
    (out / "notes.txt").write_text("mine")
    assert main(["train", "ngram", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert (out / "report.json").read_bytes() == report                   # untouched
    assert main(["train", "ngram", "--out", str(out), "--overwrite", "--seed", "1"]) == 0
    assert (out / "notes.txt").read_text() == "mine"                      # not a run file: kept
    assert (out / "report.json").read_bytes() != report


def test_one_pass_models_refuse_resume(tmp_path, capsys):
    assert main(["train", "ngram", "--out", str(tmp_path / "x"), "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    assert not Path(tmp_path / "x").exists()


def test_the_recurrent_recipe_follows_the_same_rule(tmp_path, capsys):
    out = tmp_path / "lstm"
    assert main(["train", "lstm", "--steps", "2", "--out", str(out)]) == 0
    tok = (out / "tokenizer.json").read_bytes()
    assert main(["train", "lstm", "--steps", "2", "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (out / "tokenizer.json").read_bytes() == tok
    assert main(["train", "lstm", "--steps", "2", "--out", str(out), "--overwrite"]) == 0
