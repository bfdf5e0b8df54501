"""The BERT-variants experiment: registered, every comparison present at the tiny
budget, ELECTRA's step count from the FLOP formula (checked by hand), the compute each arm
measured, ELECTRA's detection rows, bad budget."""
import numpy as np
import pytest

from minipt import experiments
from minipt.experiments import bert_variants as bv
from minipt.models.encoder import bert, electra


def test_train_flops_against_a_hand_count():
    V, P, C, F, L, T = 50, 32, 32, 64, 2, 32
    model = bert.build(rng=np.random.default_rng(0), vocab_size=V, max_position=P, d_model=C, d_ff=F, n_layer=L,
                       n_head=4, nsp=False)
    per_layer = 4 * C * C + 2 * C * F
    want = 6 * (L * per_layer + C * C + V * C) + 6 * L * T * C          # layers, MLM transform, tied decoder
    assert bv.train_flops(model, T) == want
    e = electra.build(rng=np.random.default_rng(0), vocab_size=V, max_position=P, d_model=C, d_ff=F, n_layer=L,
                      n_head=4, generator_d_model=16, generator_n_head=2, generator_d_ff=32)
    gen = L * (4 * 16 * 16 + 2 * 16 * 32) + 16 * C + V * C             # layers, head transform H_G -> E, decoder
    disc = L * per_layer + C * C + C                                        # layers, dense, dense_prediction
    proj = 16 * C                                                           # generator's E -> H_G projection
    assert bv.train_flops(e, T) == 6 * (gen + disc + proj) + 6 * L * T * (C + 16)


@pytest.mark.slow
def test_tiny_budget_runs_every_comparison():
    assert "bert-variants" in experiments.EXPERIMENTS and experiments.get("bert-variants") is bv
    out = bv.run("tiny", progress=False)
    comparisons = [r["comparison"] for r in out["rows"]]
    assert comparisons == ["masking"] * 2 + ["nsp"] * 3 + ["nsp vs sop"] * 4 + ["electra"] * 3 + \
        ["electra detection"] * 6
    detection = {(r["model"], r["metric"]): r["value"] for r in out["rows"] if r["comparison"] == "electra detection"}
    assert {m for m, _ in detection} == {"ELECTRA", "ELECTRA, uniform generator"}
    for model in ("ELECTRA", "ELECTRA, uniform generator"):                # ~12 % replaced: H(p) near 0.36
        assert 0.2 < detection[(model, "base-rate entropy")] < 0.5
    for r in out["rows"]:
        lo, hi = (0.0, 10.0) if r["metric"].endswith("loss") else (0.0, 1.0)
        assert lo <= r["value"] <= hi, r
    flops = out["flops per token"]
    assert out["electra steps"] == max(1, round(out["steps"] * flops["BERT"] / flops["ELECTRA"]))
    assert flops["ELECTRA"] > flops["BERT"]
    tokens, total = out["pre-training tokens"], out["pre-training FLOPs"]
    assert tokens["ELECTRA"] == tokens["ELECTRA, uniform generator"] > 0           # the same batches
    assert tokens["BERT"] == pytest.approx(tokens["ELECTRA"] * out["steps"] / out["electra steps"], rel=0.05)
    assert total["ELECTRA"] == pytest.approx(total["BERT"], rel=0.15)          # equal compute, up to rounding steps
    with pytest.raises(ValueError, match="budget must be one of"):
        bv.run("huge")
