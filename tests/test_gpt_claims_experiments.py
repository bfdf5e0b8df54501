"""The ledger's experiments for GPT-3 in context, DialoGPT's MMI, BERT's direction and
XLNet's permutation LM: equal budgets between arms (counted through ``train``'s
callback), the objectives each arm trains on, and the scores against independent formulas."""
import numpy as np
import pytest

from minipt.data.toy_text_tasks import BLAND
from minipt.experiments import (
    bert_direction,
    dialogpt_mmi,
    in_context,
    xlnet_permutation,
)
from minipt.models.encoder.bert import BertConfig, BertEncoder
from minipt.models.unified.xlnet import XLNet, XLNetConfig
from minipt.objectives.common import IGNORE
from minipt.train import train as real_train


def count_steps(monkeypatch, module) -> list[tuple[int, int]]:
    """Wrap ``module.train``: one (steps asked, steps taken) pair per call, counted by the callback."""
    calls = []

    def counting(model, get_batch, config, **kw):
        taken = []
        result = real_train(model, get_batch, config, callback=lambda step, rec: taken.append(step), **kw)
        calls.append((config.steps, len(taken)))
        return result
    monkeypatch.setattr(module, "train", counting)
    return calls


@pytest.mark.parametrize("module, n_calls", [(xlnet_permutation, 2), (in_context, 2), (dialogpt_mmi, 2),
                                             (bert_direction, 4)])
def test_every_arm_trains_for_the_same_steps_each_on_its_own_schedule(monkeypatch, module, n_calls):
    calls = count_steps(monkeypatch, module)
    result = module.run("tiny", seed=0)
    assert len(calls) == n_calls                                # one train() call (one schedule) per phase
    assert all(asked == taken for asked, taken in calls)
    if module is bert_direction:                                # per arm: pre-training, then fine-tuning
        pre, fine = calls[0::2], calls[1::2]
        assert len({s for s, _ in pre}) == 1 and len({s for s, _ in fine}) == 1
    else:
        assert len({s for s, _ in calls}) == 1
    for arm in result["arms"].values():
        assert all(np.isfinite(v) for v in arm.values())


@pytest.mark.parametrize("T, K", [(xlnet_permutation.T, xlnet_permutation.K), (16, 2), (12, 1)])
def test_xlnet_arms_differ_only_in_the_order(T, K):
    splits = {"train": np.arange(200) % 7, "val": np.arange(100) % 7}
    rng = np.random.default_rng(0)
    kw = {} if (T, K) == (xlnet_permutation.T, xlnet_permutation.K) else dict(T=T, K=K)   # the defaults too
    idx, targets, order = xlnet_permutation.Windows(splits, permuted=True, **kw).get_batch("train", rng)
    assert idx.shape == targets.shape == order.shape == (xlnet_permutation.BATCH, T)
    assert ((targets != IGNORE).sum(axis=1) == T // K).all()            # the last 1/K of each order
    rank = np.argsort(order, axis=1)
    assert (rank[targets != IGNORE] >= T - T // K).all()
    assert np.array_equal(targets[targets != IGNORE], idx[targets != IGNORE])
    idx, targets, order = xlnet_permutation.Windows(splits, permuted=False, **kw).get_batch("train", rng)
    assert np.array_equal(order, np.arange(T)) and np.array_equal(targets, idx)


@pytest.mark.parametrize("T", [xlnet_permutation.T, 9])
def test_the_left_to_right_score_is_each_last_position_from_the_window_before_it(T):
    model = XLNet(XLNetConfig(vocab_size=5, n_layer=1, n_head=2, d_model=8), rng=np.random.default_rng(0))
    ids = np.random.default_rng(1).integers(0, 5, size=T + 6)
    nats = []
    for s in range(7):                                      # window s predicts ids[s + T - 1] from ids[s:s + T - 1]
        _, logits = model(ids[None, s:s + T])
        z = logits[0, -1].astype(np.float64)
        nats.append(np.log(np.exp(z - z.max()).sum()) + z.max() - z[ids[s + T - 1]])
    assert xlnet_permutation.left_to_right(model, ids, 7, T=T) == pytest.approx(np.mean(nats), rel=1e-5)


def test_the_counted_floors_equal_their_formulas():
    tr = np.array([0, 1, 2, 0, 1, 0, 1, 2, 2, 0])
    va = np.array([0, 1, 2, 1])
    unigram, trigram = xlnet_permutation.counted(tr, va, 3)
    p = np.array([4, 3, 3]) / 10
    assert unigram == pytest.approx(-(p * np.log(p)).sum())
    count = lambda a, b, c: 0.1 + sum(tuple(tr[i:i + 3]) == (a, b, c) for i in range(len(tr) - 2))
    prob = lambda a, b, c: count(a, b, c) / sum(count(a, b, x) for x in range(3))
    assert trigram == pytest.approx(-(np.log(prob(0, 1, 2)) + np.log(prob(1, 2, 1))) / 2)


def test_a_causal_encoder_never_reads_the_right_hand_side():
    ids = np.array([[5, 6, 7, 8, 9]])
    later = ids.copy()
    later[0, 4] = 3
    for causal in (True, False):
        enc = BertEncoder(BertConfig(vocab_size=12, max_position=8, n_layer=2, d_model=16, n_head=2, d_ff=32,
                                     dropout=0.0, causal=causal), np.random.default_rng(0))
        same = np.allclose(enc(ids)[0, :4], enc(later)[0, :4])
        assert same == causal


def test_the_left_to_right_arm_predicts_the_next_real_token():
    class Corpus:
        def unmasked(self, split, rng):
            ids = np.array([[2, 10, 11, 3, 0], [2, 12, 3, 0, 0]])
            return ids, np.zeros_like(ids), (ids != 0).astype(int), np.zeros(2, int)
    ids, _, _, labels = bert_direction.Pretraining(Corpus(), causal=True).get_batch("train", None)
    assert labels.tolist() == [[10, 11, 3, IGNORE, IGNORE], [12, 3, IGNORE, IGNORE, IGNORE]]


def test_the_dialogue_measures_count_bland_replies_and_the_subject():
    histories = [["the old king sleeps ."], ["the dog eats the fish ."], ["the cat sees the king ."]]
    replies = [BLAND[0], "the dog finds the king .", "the king sleeps ."]
    m = dialogpt_mmi.measures(replies, histories)
    assert m["non-bland share"] == pytest.approx(2 / 3) and m["pick-up"] == pytest.approx(1 / 3)


def test_a_left_to_right_bert_is_not_exported_as_bert():
    from minipt.interop.bert_layout import export_problem
    assert export_problem(BertConfig()) is None
    assert export_problem(BertConfig(causal=True)) == "causal=True: BertForPreTraining has no left-to-right attention"
