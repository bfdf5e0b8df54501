"""The BERT-variants experiment: ELECTRA's step count from the FLOP formula (checked by
hand), the weighted sentence loss, the per-item measures against independent formulas,
and a tiny run that reports every arm, floor and item the claims ledger reads."""
import numpy as np
import pytest

from minipt import experiments
from minipt.experiments import bert_variants as bv
from minipt.experiments.claims import CLAIMS
from minipt.models.encoder import bert, electra
from minipt.objectives.common import IGNORE


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


def _grads(model, batch, mlm: bool, nsp: bool) -> dict:
    ids, seg, mask, mlm_labels, nsp_labels = batch
    model.zero_grad()
    model(ids, seg, mask, mlm_labels if mlm else None, nsp_labels if nsp else None)
    model.backward()
    return {k: g.copy() for k, g in model.gradients().items()}


def test_the_weighted_head_gives_the_gradient_of_mlm_plus_gain_times_its_loss():
    model, batch = bert.tiny()
    model.eval()
    mlm, pair = _grads(model, batch, True, False), _grads(model, batch, False, True)
    model.nsp = bv.Weighted(model.nsp, 20.0)
    both = _grads(model, batch, True, True)
    for name, g in both.items():
        key = name.replace("nsp.inner.", "nsp.")
        np.testing.assert_allclose(g, mlm[key] + 20.0 * pair[key], rtol=1e-9, atol=1e-12, err_msg=name)
    assert max(np.abs(g).max() for k, g in pair.items() if k.startswith("encoder.stack.")) > 0   # it reaches down


class _Corpus:
    """Two held-out packed rows and a training split whose token counts are known."""
    special_ids, vocab_size = (0, 1, 2, 3), 7

    def __init__(self):
        self.instances = {"train": [(np.array([1, 4, 4, 5, 2]), None, -1), (np.array([1, 6, 4, 2]), None, -1)]}


def test_the_unigram_floor_is_the_add_one_training_frequency():
    targets = np.array([4, 5, 6, 4])
    q = {4: 4 / 8, 5: 2 / 8, 6: 2 / 8}                    # counts 3, 1, 1 plus one each, over 8
    want = -np.mean([np.log(q[t]) for t in targets])
    assert bv.unigram_loss(_Corpus(), targets) == pytest.approx(want)


def test_mlm_items_are_the_models_own_loss_token_by_token():
    from minipt.data.encoder_corpus import encoder_corpus
    corpus = encoder_corpus(n_docs=30, mode="packed", max_length=16, batch_size=8,
                            n_instances={"train": 16, "val": 16}, seed=0)
    model = bert.build(rng=np.random.default_rng(0), vocab_size=corpus.vocab_size, max_position=16, d_model=16,
                       d_ff=32, n_layer=1, n_head=2, nsp=False)
    found = bv.mlm_items(model, corpus, seed=3)
    again = bv.mlm_items(model, corpus, seed=3)                     # the same masks for every model
    np.testing.assert_array_equal(found["target"], again["target"])
    model.eval()
    losses, n = [], 0
    for batch in corpus.in_order("val", np.random.default_rng(3)):
        out = model.outputs(*batch)
        k = int((batch[3] != IGNORE).sum())
        losses.append(float(out.mlm_loss) * k)
        n += k
    assert len(found["loss"]) == n
    assert found["loss"].mean() == pytest.approx(sum(losses) / n, rel=1e-5)
    assert set(np.unique(found["hit"])) <= {0.0, 1.0}


@pytest.mark.slow
def test_tiny_budget_reports_every_arm_floor_and_item_the_claims_read():
    assert "bert-variants" in experiments.EXPERIMENTS and experiments.get("bert-variants") is bv
    out = bv.run("tiny", progress=False)
    for c in (c for c in CLAIMS if c.experiment == "bert-variants"):
        assert c.floor in out["floors"]
        for arm in c.arms:
            per_item = out["items"][arm][c.metric]
            assert np.mean(per_item) == pytest.approx(out["arms"][arm][c.metric])
            assert 0.0 <= out["arms"][arm][c.metric] <= (10.0 if c.metric.endswith("loss") else 1.0)
        a, b = (out["items"][arm][c.metric] for arm in c.arms)
        assert len(a) == len(b)                                              # paired: the same test items
    pair = out["items"]["MLM + SOP"]
    assert pair["NSP and SOP accuracy"] == pair["NSP accuracy"] + pair["SOP accuracy"]
    for model in ("ELECTRA", "ELECTRA, uniform generator"):                # ~12 % replaced: H(p) near 0.36
        assert 0.2 < out["arms"][model]["base-rate entropy"] < 0.5
    assert out["floors"]["chance"] == 0.5 and 0.5 <= out["floors"]["majority class"] <= 1
    flops = out["flops per token"]
    assert out["electra steps"] == max(1, round(out["steps"] * flops["BERT"] / flops["ELECTRA"]))
    assert flops["ELECTRA"] > flops["BERT"]
    tokens, total = out["pre-training tokens"], out["pre-training FLOPs"]
    assert tokens["ELECTRA"] == tokens["ELECTRA, uniform generator"] > 0           # the same batches
    assert tokens["BERT"] == pytest.approx(tokens["ELECTRA"] * out["steps"] / out["electra steps"], rel=0.05)
    assert total["ELECTRA"] == pytest.approx(total["BERT"], rel=0.15)          # equal compute, up to rounding steps
    with pytest.raises(ValueError, match="budget must be one of"):
        bv.run("huge")
    with pytest.raises(ValueError, match="parts must be"):
        bv.run("tiny", parts=("masking", "gossip"))
    alone = bv.run("tiny", progress=False, parts=("masking", "sharing"))   # parts run apart give the same figures
    assert set(alone["arms"]) == {"static", "dynamic", "shared", "unshared"}
    for arm, metrics in alone["arms"].items():
        assert metrics == out["arms"][arm]
    assert alone["floors"] == {k: out["floors"][k] for k in ("unigram", "baseline")}
