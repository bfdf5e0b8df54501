"""The claims ledger: the verdict rule, the experiments that serve it, the committed runs,
and ``minipt experiment claims``."""
import json
import math

import numpy as np
import pytest

from minipt.cli import main
from minipt.experiments import EXPERIMENTS, get, ledger
from minipt.experiments.claims import CLAIMS, NOT_RUN, row
from minipt.experiments.verdict import Spread, judge, paired_se

NAMES = ("A", "B")


def test_spread_equals_the_textbook_formulas():
    x = [0.3, 0.5, 0.4, 0.9]
    s = Spread.of(x)
    mean = sum(x) / 4
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / 3)
    assert s.mean == pytest.approx(mean) and s.sd == pytest.approx(sd) and s.se == pytest.approx(sd / 2)
    with pytest.raises(ValueError, match="finite per-seed values"):
        Spread.of([0.1, float("nan")])


@pytest.mark.parametrize("better, a, b, verdict", [
    ("higher", [0.80, 0.82, 0.81], [0.60, 0.61, 0.62], "reproduced"),
    ("higher", [0.60, 0.61, 0.62], [0.80, 0.82, 0.81], "reversed"),
    ("higher", [0.70, 0.60, 0.80], [0.72, 0.66, 0.70], "not reproduced"),     # within the seeds' noise
    ("lower", [1.80, 1.81, 1.79], [1.90, 1.92, 1.91], "reproduced"),          # lower is better
    ("lower", [1.90, 1.92, 1.91], [1.80, 1.81, 1.79], "reversed"),
])
def test_the_verdict_follows_the_sign_and_the_standard_error(better, a, b, verdict):
    floor = [0.0] * 3 if better == "higher" else [5.0] * 3
    assert judge(a, b, floor, better, names=NAMES).verdict == verdict


def test_an_arm_on_its_floor_is_not_compared():
    j = judge([0.80, 0.82, 0.81], [0.50, 0.52, 0.48], [0.5, 0.5, 0.5], "higher", names=NAMES)
    assert j.verdict == "not testable at this scale" and "B is not clear of its floor" in j.why


def test_fewer_than_three_seeds_are_not_judged():
    j = judge([0.8, 0.9], [0.1, 0.2], [0.0, 0.0], "higher", names=NAMES)
    assert j.verdict == "not testable at this scale" and "only 2 seed(s)" in j.why


def test_the_comparison_is_paired_by_seed():
    # Seeds differ a lot, but A beats B by 0.01 on every seed: paired, that is clear.
    a, b = [0.51, 0.71, 0.91], [0.50, 0.70, 0.90]
    j = judge(a, b, [0.0] * 3, "higher", names=NAMES)
    assert j.verdict == "reproduced" and j.advantage.mean == pytest.approx(0.01)


def test_seeds_that_agree_by_chance_still_carry_the_test_items_noise():
    # Three seeds, each one test example of 400 apart: a spread of zero, but the test set's
    # own noise (paired standard error 0.01 a seed) keeps the claim from "reproduced".
    a, b = [0.955, 0.9575, 0.96], [0.9525, 0.955, 0.9575]
    assert judge(a, b, [0.25] * 3, "higher", names=NAMES).verdict == "reproduced"
    j = judge(a, b, [0.25] * 3, "higher", names=NAMES, item_se=[0.01] * 3)
    assert j.verdict == "not reproduced" and j.advantage.se == pytest.approx(0.01 / math.sqrt(3))
    assert "the test items' own noise" in j.why


def test_paired_se_is_the_standard_error_of_the_per_item_differences():
    a, b = np.array([1.0, 0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0, 0.0])
    d = a - b
    assert paired_se(a, b) == pytest.approx(d.std(ddof=1) / 2)
    assert paired_se(a, a) == 0.0


def test_every_claim_names_a_known_experiment_and_a_direction():
    keys = [c.key for c in CLAIMS]
    assert len(keys) == len(set(keys))
    for c in CLAIMS:
        assert c.better in ("higher", "lower") and c.arms[0] != c.arms[1] and c.says.endswith(".")


LEDGER_READY = [name for name in EXPERIMENTS if (ledger.FOLDER / f"{name}.json").exists()]


@pytest.mark.parametrize("name", LEDGER_READY)
def test_a_ledger_experiment_reports_every_arm_and_floor_its_claims_read(name):
    result = get(name).run("tiny", seed=0, progress=False)
    for c in (c for c in CLAIMS if c.experiment == name):
        for arm in c.arms:
            assert np.isfinite(result["arms"][arm][c.metric])
        assert np.isfinite(result["floors"][c.floor])


@pytest.mark.parametrize("name", ["smoothing", "word2vec"])
def test_the_ledger_keeps_each_claims_paired_test_error(name):
    record = ledger.run_seeds(name, "tiny", seeds=(0,))
    result = get(name).run("tiny", seed=0)
    for c in (c for c in CLAIMS if c.experiment == name):
        a, b = (result["items"][arm][c.metric] for arm in c.arms)
        assert np.mean(a) == pytest.approx(result["arms"][c.arms[0]][c.metric])
        assert record["runs"][0]["paired_se"][c.key] == pytest.approx(paired_se(a, b))


@pytest.mark.parametrize("name", LEDGER_READY)
def test_the_committed_runs_are_full_budget_over_three_seeds(name):
    record = ledger.load(name)
    assert record["budget"] == "full" and sorted(r["seed"] for r in record["runs"]) == [0, 1, 2]


def test_the_committed_smoothing_run_equals_a_fresh_full_budget_run():
    """Counting is exact: seed 1 at the full budget gives the committed figures to rounding."""
    fresh = get("smoothing").run("full", seed=1)
    committed = next(r for r in ledger.load("smoothing")["runs"] if r["seed"] == 1)
    for arm, metrics in committed["arms"].items():
        assert fresh["arms"][arm]["held-out"] == pytest.approx(metrics["held-out"], abs=1e-12)
    assert fresh["floors"]["unigram"] == pytest.approx(committed["floors"]["unigram"], abs=1e-12)


@pytest.mark.slow
def test_the_committed_nnlm_run_equals_a_fresh_full_budget_run():
    fresh = get("nnlm").run("full", seed=2)
    committed = next(r for r in ledger.load("nnlm")["runs"] if r["seed"] == 2)
    for arm, metrics in committed["arms"].items():      # float32 training: the last digits may move
        assert fresh["arms"][arm]["held-out"] == pytest.approx(metrics["held-out"], abs=2e-4)


REPRODUCED = sorted({c.experiment for c in CLAIMS if row(c, ledger.load(c.experiment))["verdict"] == "reproduced"})


@pytest.mark.slow
@pytest.mark.parametrize("name", REPRODUCED)
def test_a_reproduced_claim_keeps_its_direction_at_the_quick_budget(name):
    """CI runs the quick budget once per experiment and asserts the direction of every
    claim the committed full-budget runs call reproduced (and of no other)."""
    result = get(name).run("quick", seed=0)
    for claim in CLAIMS:
        if claim.experiment == name and row(claim, ledger.load(name))["verdict"] == "reproduced":
            a, b = (result["arms"][arm][claim.metric] for arm in claim.arms)
            assert (a > b) if claim.better == "higher" else (a < b), (claim.key, a, b)


def test_a_damaged_record_is_named(tmp_path):
    (tmp_path / "smoothing.json").write_text('{"experiment": "smoothing", "runs": []}')
    with pytest.raises(ValueError, match="smoothing.json is damaged"):
        ledger.load("smoothing", tmp_path)


def test_the_ledger_command_prints_every_claim_and_writes_json(tmp_path, capsys):
    out = tmp_path / "claims.json"
    assert main(["experiment", "claims", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = json.loads(out.read_text())
    assert [r["claim"] for r in rows] == [c.key for c in CLAIMS]
    for r in rows:
        assert r["says"] in printed and r["verdict"] in printed
        assert (r["verdict"] == NOT_RUN) == (not (ledger.FOLDER / f"{r['experiment']}.json").exists())
    counts = ledger.counts(rows)
    assert "verdicts: " + ", ".join(f"{v} {n}" for v, n in counts.items()) in printed
