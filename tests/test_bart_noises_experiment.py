"""experiments/bart_noises.py for the claims ledger: the arms named as the claims spell
them, the no-pre-training floor, per-test-pair losses whose mean is the reported loss,
and every arm on the same budget."""
import numpy as np
import pytest

from minipt.experiments import bart_noises
from minipt.experiments.claims import CLAIMS
from minipt.models.protocol import IGNORE
from minipt.models.seq2seq.bart import Bart, BartConfig

BART_CLAIMS = [c for c in CLAIMS if c.experiment == "bart-noises"]


@pytest.fixture(scope="module")
def tiny_run():
    return bart_noises.run("tiny", seed=0, progress=False)


def test_pair_losses_average_to_the_models_token_loss():
    """Weighted by each pair's target tokens, the per-pair losses give the model's own
    mean cross-entropy; each one is the mean of -log p(target) over that pair's tokens."""
    rng = np.random.default_rng(0)
    model = Bart(BartConfig(vocab_size=20, max_positions=16, d_model=16, n_head=2, pad_id=0, eos_id=2,
                            decoder_start_id=2), rng=rng)
    src = rng.integers(3, 20, size=(3, 7))
    targets = rng.integers(3, 20, size=(3, 6))
    targets[0, 4:], targets[2, 2:] = IGNORE, IGNORE                   # three pairs of 4, 6 and 2 tokens
    target_in = model.decoder_input(targets)
    per_pair = bart_noises.pair_losses(model, src, target_in, targets)
    n = (targets != IGNORE).sum(1)
    loss, logits = model(src, target_in, targets)
    assert (per_pair * n).sum() / n.sum() == pytest.approx(float(loss), rel=1e-5)
    z = logits[2, :2].astype(np.float64)
    by_hand = np.mean([np.log(np.exp(z[t]).sum()) - z[t, targets[2, t]] for t in range(2)])
    assert per_pair[2] == pytest.approx(by_hand, rel=1e-6)


def test_the_run_reports_each_claims_arms_floor_and_items(tiny_run):
    out = tiny_run
    assert list(out["arms"]) == bart_noises.arm_names() == [r["arm"] for r in out["rows"]]
    for c in BART_CLAIMS:
        for arm in c.arms:
            items = out["items"][arm][c.metric]
            assert len(items) == out["test pairs"]
            assert np.mean(items) == pytest.approx(out["arms"][arm][c.metric])
        assert out["floors"][c.floor] == out["arms"][bart_noises.SCRATCH][c.metric]
    assert {"MASS k = 1", "MASS k = m/2", "MASS k = m", "infilling", "masking"} <= set(out["arms"])
    assert all(set(out["items"][a]["exact match"]) <= {0.0, 1.0} for a in out["arms"])


def test_every_arm_gets_the_same_budget_and_only_the_floor_skips_pre_training(tiny_run):
    b = bart_noises.BUDGETS["tiny"]
    lengths = {name: len(curve) for name, curve in tiny_run["curves"].items()}
    assert lengths.pop(bart_noises.SCRATCH) == b["finetune"]
    assert set(lengths.values()) == {b["pretrain"] + b["finetune"]}
    assert tiny_run["equal compute"].startswith(f"{b['pretrain'] * bart_noises.BATCH} pre-training texts")
    assert tiny_run["fine-tuning pairs"] == b["pairs"] < tiny_run["pre-training texts"]


def test_a_bad_budget_is_named():
    with pytest.raises(ValueError, match="budget must be one of"):
        bart_noises.run("huge", progress=False)
