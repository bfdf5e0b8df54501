"""``minipt experiment``: a tiny run writes its table, JSON and plot; a second run into
the same folder is refused before anything runs; --overwrite replaces only the results;
an unknown experiment is refused by name."""
import json

import pytest

from minipt.cli import main
from minipt.experiments import EXPERIMENTS, get


@pytest.mark.slow
def test_a_tiny_run_writes_results_and_is_not_clobbered(tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(["experiment", "knowledge", "--budget", "tiny", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    assert [r["model"] for r in result["rows"]] == ["BERT", "entity masking", "ERNIE"]
    assert len(result["items"]["ERNIE"]["accuracy"]) == result["test persons"]       # per-item scores kept
    assert "| model | test accuracy |" in (out / "results.md").read_text()
    assert (out / "results.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "| ERNIE |" in printed and "written:" in printed
    (out / "notes.txt").write_text("mine")
    before = (out / "results.json").stat().st_mtime_ns
    assert main(["experiment", "knowledge", "--budget", "tiny", "--out", str(out)]) == 2
    assert "already holds results" in capsys.readouterr().err
    assert (out / "results.json").stat().st_mtime_ns == before
    assert main(["experiment", "knowledge", "--budget", "tiny", "--out", str(out), "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "mine"


def test_unknown_experiments_are_refused():
    with pytest.raises(SystemExit):
        main(["experiment", "astrology"])
    with pytest.raises(ValueError, match="choose one of"):
        get("astrology")
    for name in EXPERIMENTS:
        module = get(name)
        assert {"tiny", "quick", "full"} <= set(module.BUDGETS) and callable(module.run)


@pytest.mark.slow
def test_multimodal_tiny_run_reports_both_designs():
    from minipt.experiments import multimodal
    out = multimodal.run("tiny", progress=False)
    assert {(r["design"], r["pretrained"]) for r in out["rows"]} == {
        (d, p) for d in multimodal.DESIGNS for p in (False, True)}
    counts = out["parameters"]
    assert abs(counts["single stream"] - counts["two streams"]) / counts["single stream"] < 0.1
    assert set(out["grounding"]) == set(multimodal.DESIGNS)
    for r in out["rows"]:
        assert 0 <= r["R@1 text->image"] <= r["R@5 text->image"] <= 1


def test_recall_counts_ties_against_the_model():
    import numpy as np

    from minipt.experiments.multimodal import recall
    assert recall(np.zeros((4, 4)), 1) == 0.0 and recall(np.zeros((4, 4)), 4) == 1.0
    s = np.array([[3.0, 1, 2], [0, 1, 2], [5, 4, 6]])
    assert recall(s, 1) == 2 / 3 and recall(s, 2) == 1.0          # row 1: one better score


@pytest.mark.slow
def test_transfer_tiny_run_orders_the_stages_and_measures_forgetting():
    from minipt.experiments import transfer
    out = transfer.run("tiny", progress=False)
    rows = {r["stages"]: r for r in out["rows"]}
    assert list(rows) == list(transfer.VARIANTS)
    # general pre-training lowers the general-domain loss; the court stages raise it again
    assert rows["general"]["general loss"] < rows["fine-tuning only"]["general loss"]
    assert rows["general + domain"]["general loss"] > rows["general"]["general loss"]
    assert all(0 <= r["test accuracy"] <= 1 for r in rows.values())
