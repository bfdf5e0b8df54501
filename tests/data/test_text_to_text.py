"""The toy tasks as prefixed text-to-text pairs: prefixes, answers, disjoint splits, the
graded similarity score, T5's mixing rates, the tokenizer and batches, the scorer, and
what an unknown prefix does."""
import numpy as np
import pytest

from minipt.data import text_to_text as t2t
from minipt.models.protocol import IGNORE

SIZES = (60, 10, 20)


@pytest.fixture(scope="module")
def data():
    return t2t.text_to_text(SIZES, seed=0)


def test_every_task_has_its_prefix_answer_kind_and_disjoint_splits(data):
    assert list(data) == ["translate", "summarize", "sentiment", "similarity"]
    for task, splits in data.items():
        assert [len(splits[s]) for s in ("train", "val", "test")] == list(SIZES)
        for s in splits.values():
            for e in s:
                assert e["task"] == task and e["input"].startswith(t2t.PREFIXES[task] + " ")
                assert t2t.task_of(e["input"]) == task and e["target"]
        inputs = [{e["input"] for e in splits[s]} for s in ("train", "val", "test")]
        assert not (inputs[0] & inputs[1] or inputs[0] & inputs[2] or inputs[1] & inputs[2])
    assert {e["target"] for e in data["sentiment"]["train"]} == {"positive", "negative"}
    assert {e["target"] for e in data["similarity"]["train"]} <= {"5.0", "3.8", "3.4", "2.6"}
    ex = data["translate"]["train"][0]
    assert ex == {"task": "translate", "input": "translate toy: the angry sad king rules .",
                  "target": "na mato zozu di kusi ."}


def test_similarity_score_by_hand():
    assert t2t.similarity_score(("cat", "eats", "fish"), ("cat", "eats", "fish")) == "5.0"
    assert t2t.similarity_score(("cat", "eats", "fish"), ("dog", "eats", "fish")) == "3.4"      # 3.33 -> 3.4
    assert t2t.similarity_score(("cat", "eats", "fish", "river"), ("cat", "sees", "fish", "river")) == "3.8"
    assert t2t.similarity_score(("king", "sleeps"), ("king", "sings")) == "2.6"                  # 2.5 rounds up
    assert t2t.similarity_score(("a", "b"), ("c", "d")) == "0.0"


def test_graded_similarity_scores_agree_with_the_cores():
    """Recount by hand: the nouns and verbs of a and b, position by position."""
    from minipt.data.toy_grammar import NOUN_STATES, STATES
    content = {w for s, ws in STATES.items() if s in NOUN_STATES or s.startswith("verb") for w in ws}
    d = t2t.graded_similarity((80, 0, 0), seed=3)
    for e in d.train:
        ca = [w for w in e["a"].split() if w in content]
        cb = [w for w in e["b"].split() if w in content]
        assert len(ca) == len(cb)
        shared = sum(x == y for x, y in zip(ca, cb))
        assert float(e["score"]) == pytest.approx(round(5 * shared / len(ca) / 0.2 + 1e-9) * 0.2, abs=0.21)
        assert (e["score"] == "5.0") == (ca == cb)
    assert len({e["score"] for e in d.train}) >= 3


def test_plain_text_drops_the_prefix_and_field_names():
    assert t2t.plain_text("similarity sentence1: a cat . sentence2: the cat .") == "a cat . the cat ."
    assert t2t.plain_text("translate toy: the cat sleeps .") == "the cat sleeps ."
    assert t2t.plain_text("paraphrase: x y") == "paraphrase: x y"


def test_mixture_rates_follow_t5():
    sizes = {"a": 100, "b": 10, "c": 1000}
    r = t2t.mixture_rates(sizes)
    assert r == pytest.approx({"a": 100 / 1110, "b": 10 / 1110, "c": 1000 / 1110})
    r = t2t.mixture_rates(sizes, limit=100)
    assert r == pytest.approx({"a": 100 / 210, "b": 10 / 210, "c": 100 / 210})
    r = t2t.mixture_rates(sizes, limit=100, temperature=2.0)
    w = np.sqrt([100, 10, 100])
    assert list(r.values()) == pytest.approx((w / w.sum()).tolist())
    assert t2t.mixture_rates(sizes, equal=True) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    with pytest.raises(ValueError, match="at least one example"):
        t2t.mixture_rates({"a": 0})
    with pytest.raises(ValueError, match="temperature"):
        t2t.mixture_rates(sizes, temperature=0)


def test_mixture_samples_by_rate_and_is_seeded(data):
    mix = t2t.Mixture({"translate": data["translate"]["train"], "sentiment": data["sentiment"]["train"][:20]})
    draw = mix.sample(4000, np.random.default_rng(0))
    share = np.mean([e["task"] == "translate" for e in draw])
    assert share == pytest.approx(60 / 80, abs=0.03)
    assert mix.sample(5, np.random.default_rng(1)) == mix.sample(5, np.random.default_rng(1))


def test_tokenizer_and_batches_teacher_forcing(data):
    tok = t2t.build_tokenizer(data)
    assert [tok.id_to_token(i) for i in range(4)] == ["[PAD]", "<s>", "</s>", "<unk>"]
    pairs = [data["sentiment"]["train"][0], data["translate"]["train"][0]]
    src, tin, tgt = t2t.encode_pairs(tok, pairs, 40, 24)
    assert src.shape[0] == tin.shape[0] == 2 and tin.shape == tgt.shape
    s0 = tok.encode(pairs[0]["input"])
    assert src[0, :len(s0)].tolist() == s0 and (src[0, len(s0):] == 0).all()
    y = tok.encode(pairs[0]["target"])                                  # one word: "positive"/"negative"
    assert tin[0, :2].tolist() == [1, *y] and tgt[0, :2].tolist() == [*y, 2]
    assert (tin[0, 2:] == 0).all() and (tgt[0, 2:] == IGNORE).all()
    y1 = tok.encode(pairs[1]["target"])
    assert tin[1].tolist() == [1, *y1] and tgt[1].tolist() == [*y1, 2]   # the longest: no padding
    assert tok.decode(y1) == pairs[1]["target"]
    sim = data["similarity"]["train"][0]["target"]
    assert t2t.answer_text(tok, tok.encode(sim)) == sim and tok.decode(tok.encode(sim)) == " . ".join(sim.split("."))


def test_batches_refuse_long_and_empty_pairs(data):
    tok = t2t.build_tokenizer(data)
    e = data["summarize"]["train"][0]
    with pytest.raises(ValueError, match="input too long: .* tokens \\(max 5\\)"):
        t2t.encode_pairs(tok, [e], 5, 40)
    with pytest.raises(ValueError, match="target too long: .*max 3"):
        t2t.encode_pairs(tok, [e], 60, 3)
    with pytest.raises(ValueError, match="an empty input"):
        t2t.encode_sources(tok, [""], 40)
    with pytest.raises(ValueError, match="empty target"):
        t2t.encode_pairs(tok, [{"input": "sentiment: the cat .", "target": ""}], 40, 24)
    with pytest.raises(ValueError, match="no pairs"):
        t2t.encode_pairs(tok, [], 40, 24)


def test_scorer_exact_match_word_by_word():
    assert t2t.score("similarity", ["3.8", "3 . 8", "3.4", "5.0"], ["3.8"] * 4) == 0.5
    assert t2t.score("sentiment", ["positive", "negative"], ["positive", "positive"]) == 0.5
    assert t2t.score("translate", ["na mato ."], ["na mato ."]) == 1.0
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
        t2t.score("translate", ["a", "b"], ["a"])


def test_an_unknown_prefix_is_documented_not_an_error(data):
    tok = t2t.build_tokenizer(data)
    prompt = "paraphrase: the cat eats ."
    assert t2t.task_of(prompt) is None
    ids = tok.encode(prompt)                          # still encodes: the unseen word becomes <unk>
    assert ids[0] == tok.token_to_id("<unk>") and len(ids) == 6
    with pytest.raises(ValueError, match="no scorer for task 'paraphrase'"):
        t2t.score("paraphrase", ["x"], ["x"])
    with pytest.raises(ValueError, match="unknown text-to-text task"):
        t2t.text_to_text(SIZES, tasks=("paraphrase",))
