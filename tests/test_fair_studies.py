"""The studies behind the ledger's transfer and fine-tuning claims are fair: floors
computed by their formulas, and every arm and floor the claims read."""
import math

import numpy as np
import pytest

from minipt.experiments import fine_tuning, transfer
from minipt.experiments.claims import CLAIMS


def test_unigram_floor_is_add_one_cross_entropy():
    train, val = np.array([0, 0, 1, 2]), np.array([0, 3])
    p = [(2 + 1) / (4 + 5), (0 + 1) / (4 + 5)]
    assert transfer.unigram_loss(train, val, 5) == pytest.approx(-(math.log(p[0]) + math.log(p[1])) / 2)


def test_span_qa_floor_is_the_commonest_training_span():
    class Tok:
        def encode(self, w):
            return [len(w)]

        def token_to_id(self, t):
            return {"[CLS]": 100, "[SEP]": 101}[t]

    ex = lambda ctx, ans: {"question": "q", "context": ctx, "start": ctx.index(ans), "end": ctx.index(ans) + len(ans)}

    class Data:
        train = [ex("a b c", "a"), ex("x y z", "x"), ex("a b c", "c")]
        test = [ex("p q r", "p"), ex("p q r", "q"), ex("m n o", "n"), ex("p q r", "q")]
    assert fine_tuning.majority("span_qa", Data, Tok()) == 0.25            # (3, 3): the first context word


@pytest.mark.slow
@pytest.mark.parametrize("name, module", [("transfer", transfer), ("fine-tuning", fine_tuning)])
def test_each_study_reports_the_arms_and_floors_its_claims_read(name, module):
    out = module.run("tiny", seed=0, progress=False)
    for c in (c for c in CLAIMS if c.experiment == name):
        for arm in c.arms:
            assert np.isfinite(out["arms"][arm][c.metric])
        assert np.isfinite(out["floors"][c.floor])
    if name == "knowledge":
        assert all(0 <= r["test SE"] < 0.5 for r in out["rows"])
    if name == "transfer":                                        # an untrained network is far above unigram
        assert out["arms"]["fine-tuning only"]["general loss"] > out["floors"]["unigram"] + 1
