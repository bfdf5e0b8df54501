"""The studies behind the ledger's transfer, knowledge, multimodal and fine-tuning claims
are fair: equal total steps for the multimodal arms (counted through the training
callback), hundreds of persons whose names do not spell out their country, floors computed
by their formulas, and every arm and floor the claims read."""
import math

import numpy as np
import pytest

from minipt.data.toy_kb import build_kb, syllables
from minipt.experiments import fine_tuning, knowledge, multimodal, transfer
from minipt.experiments.claims import CLAIMS


@pytest.mark.slow
def test_multimodal_arms_train_for_equal_total_steps_before_each_task():
    steps = {}                                                   # (arm, phase) -> the steps the loop reported
    count = lambda arm, phase, step: steps.setdefault((arm, phase), []).append(step)
    out = multimodal.run("tiny", seed=0, callback=count)
    b = multimodal.BUDGETS["tiny"]
    for design in ("single-stream", "two-stream"):
        pre, scratch = f"{design}, pre-trained", f"{design}, scratch"
        assert len(steps[(pre, "pre-training")]) == b["pretrain"] and (scratch, "pre-training") not in steps
        for task in ("retrieval", "VQA"):
            assert len(steps[(pre, "pre-training")]) + len(steps[(pre, task)]) == len(steps[(scratch, task)]) \
                == b["pretrain"] + b["finetune"]
            assert steps[(pre, task)][0] == 1                        # the task phase starts its own schedule
    assert set(out["arms"]) == {f"{d}, {p}" for d in ("single-stream", "two-stream") for p in ("pre-trained", "scratch")}
    assert out["floors"]["chance retrieval"] == 5 / b["candidates"] and 0 < out["floors"]["majority answer"] <= 1
    for arm, metrics in out["arms"].items():                      # per-item scores whose mean is the value
        assert len(out["items"][arm]["VQA accuracy"]) == b["questions"]
        assert len(out["items"][arm]["R@5"]) == b["candidates"]
        for metric, value in metrics.items():
            assert np.mean(out["items"][arm][metric]) == pytest.approx(value)
    for r in out["rows"]:                                         # R@5: both directions' recall@5, averaged
        arm = multimodal.arm_name(r["design"], r["pretrained"])
        assert out["arms"][arm]["R@5"] == pytest.approx((r["R@5 text->image"] + r["R@5 image->text"]) / 2)
    alone = multimodal.run("tiny", seed=0, arms=("two-stream, scratch",), tasks=("VQA",))   # one arm, one task
    vqa = out["arms"]["two-stream, scratch"]["VQA accuracy"]
    assert alone["arms"] == {"two-stream, scratch": {"VQA accuracy": vqa}}
    assert alone["floors"] == out["floors"]


@pytest.mark.parametrize("module, arm", [(knowledge, "bert"), (multimodal, "two streams, pre-trained")])
def test_an_unknown_arm_is_refused_by_name(module, arm):
    with pytest.raises(ValueError, match="arms must be some of"):
        module.run("tiny", arms=(arm,))


def test_an_unknown_task_is_refused_by_name():
    with pytest.raises(ValueError, match="tasks must be some of"):
        multimodal.run("tiny", tasks=("captioning",))


@pytest.mark.parametrize("budget", ["quick", "full"])
def test_the_knowledge_graph_holds_hundreds_of_persons(budget):
    b = knowledge.BUDGETS[budget]
    kb = build_kb(n_persons=b["persons"], n_cities=b["cities"], n_countries=knowledge.N_COUNTRIES, n_knows=0)
    assert len(kb.ids("person")) >= 300
    from minipt.data.toy_kb import country_task
    task = country_task(kb, n_per_person=knowledge.PER_PERSON)
    assert len({s.spans[0][2] for s, _ in task["test"]}) >= 75       # one person moves accuracy by <= 0.013


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_name_shares_a_syllable_with_any_country(seed):
    kb = build_kb(n_persons=400, n_cities=24, n_countries=4, seed=seed)
    country = set().union(*(syllables(kb.names[k]) for k in kb.ids("country")))
    assert len(country) >= 4
    for e in np.concatenate([kb.ids("person"), kb.ids("city")]):
        assert not syllables(kb.names[e]) & country, kb.names[e]
    from minipt.objectives.entity_autoencoder import vocabulary
    vocab = vocabulary(kb)
    assert all(vocab.count(n) == 1 for n in kb.names)                # one token per name, no shared tokens


def test_syllables_of_each_kind_of_name():
    assert syllables("kamo") == {"ka", "mo"} and syllables("ritun") == {"ri", "tu"} \
        and syllables("velaland") == {"ve", "la"}


def test_accuracy_by_person():
    from minipt.data.toy_kb import Mention
    rows = [(Mention(("x",), ((0, 1, p),)), 0) for p in (9, 7, 7, 8, 8, 9)]
    right = np.array([0, 1, 1, 1, 0, 0], bool)
    np.testing.assert_array_equal(knowledge.by_person(rows, right), [1.0, 0.5, 0.0])    # persons 7, 8, 9


def test_a_frozen_array_is_put_back_after_every_step():
    from minipt.core.module import Module
    from minipt.train import TrainConfig, train

    class Line(Module):
        has_backward = True

        def __init__(self):
            super().__init__()
            self.add_param("w", np.ones(3, np.float32))
            self.add_param("b", np.zeros(3, np.float32))

        def forward(self, x):
            self._x = x
            return float(((self.params["w"] * x + self.params["b"] - 1) ** 2).sum()), None

        def backward(self, dloss=1.0):
            r = 2 * (self.params["w"] * self._x + self.params["b"] - 1) * dloss
            self.grads["w"] += (r * self._x).astype(np.float32)
            self.grads["b"] += r.astype(np.float32)

    model = Line()
    get = lambda split, rng: (np.full(3, 2.0, np.float32),)
    train(model, get, TrainConfig(steps=5, lr=0.1, warmup=0, eval_every=0, progress=False),
          callback=knowledge.frozen(model.params["w"]))
    np.testing.assert_array_equal(model.params["w"], 1.0)                  # frozen: as it was
    assert (model.params["b"] != 0).all()                                 # the rest trained


def test_knowledge_fine_tuning_keeps_the_word_embeddings_pre_training_left(monkeypatch):
    seen = []                                                    # the word embeddings before and after each phase
    real = knowledge.train

    def spy(model, get_batch, config, callback=None):
        words = model.text.embeddings.word_embeddings.params["weight"]
        seen.append(words.copy())
        result = real(model, get_batch, config, callback=callback)
        seen.append(words.copy())
        return result
    monkeypatch.setattr(knowledge, "train", spy)
    knowledge.run("tiny", seed=0, arms=("BERT",))
    initial, pre_trained, fine_tuning_starts, fine_tuned = seen
    assert not np.array_equal(initial, pre_trained)                     # pre-training moved them
    np.testing.assert_array_equal(fine_tuning_starts, pre_trained)
    np.testing.assert_array_equal(fine_tuned, pre_trained)             # fine-tuning kept them


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
@pytest.mark.parametrize("name, module", [("transfer", transfer), ("knowledge", knowledge), ("fine-tuning", fine_tuning)])
def test_each_study_reports_the_arms_and_floors_its_claims_read(name, module):
    out = module.run("tiny", seed=0, progress=False)
    for c in (c for c in CLAIMS if c.experiment == name):
        for arm in c.arms:
            assert np.isfinite(out["arms"][arm][c.metric])
        assert np.isfinite(out["floors"][c.floor])
    if name == "knowledge":                                       # items: per-person shares, paired by person
        assert len({len(v["accuracy"]) for v in out["items"].values()}) == 1
        for r in out["rows"]:
            shares = out["items"][r["model"]]["accuracy"]
            assert r["test accuracy"] == pytest.approx(shares.mean())
            assert r["test SE"] == pytest.approx(shares.std(ddof=1) / math.sqrt(len(shares)))
        alone = knowledge.run("tiny", seed=0, arms=("ERNIE",))                  # an arm run by itself
        assert alone["arms"] == {"ERNIE": out["arms"]["ERNIE"]} and alone["floors"] == out["floors"]
    if name == "transfer":                                        # an untrained network is far above unigram
        assert out["arms"]["fine-tuning only"]["general loss"] > out["floors"]["unigram"] + 1
