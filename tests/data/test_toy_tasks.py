"""The toy tasks: every label checked against its rule, splits disjoint and seeded."""
import numpy as np
import pytest

from minipt.data import toy_tasks as T
from minipt.data import toy_text_tasks as X
from minipt.data.toy_grammar import ADJECTIVE_STATES, NEGATIVE, POSITIVE, STATES

ALL = [T.sentiment, T.entailment, T.similarity, T.multiple_choice, T.span_qa, T.tagging,
       X.translation, X.reversal, X.compression, X.dialogue]
SIZES = (300, 50, 50)
LANG = T.language()
MODIFIERS = {w for s in ADJECTIVE_STATES for w in STATES[s]} | {w for s in STATES if s.startswith("det") for w in STATES[s]}


def valid(sentence: str) -> bool:
    return LANG.log_prob(sentence.split()) > -np.inf


def binomial_ok(k: int, n: int, p: float, z: float = 4.0) -> bool:
    return abs(k - n * p) <= z * np.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("make", ALL, ids=lambda f: f.__name__)
def test_splits_are_sized_disjoint_and_seeded(make):
    data = make(SIZES, seed=3)
    assert (len(data.train), len(data.val), len(data.test)) == SIZES
    key = lambda e: repr(sorted(e.items()))
    keys = [set(map(key, data.split(s))) for s in ("train", "val", "test")]
    assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    assert make(SIZES, seed=3) == data and make(SIZES, seed=4).train != data.train


def test_sentiment_labels_follow_the_adjectives_and_are_balanced():
    data = T.sentiment((600, 0, 0), seed=1)
    for e in data.train:
        words = set(e["text"].split())
        assert valid(e["text"]) and bool(words & POSITIVE) == bool(e["label"]) != bool(words & NEGATIVE)
    assert binomial_ok(sum(e["label"] for e in data.train), 600, 0.5)


def test_entailment_hypotheses_are_the_reduced_premise_or_one_word_off():
    for e in T.entailment((400, 0, 0), seed=1).train:
        assert valid(e["hypothesis"])
        premise_core = [w for w in e["premise"].split() if w not in MODIFIERS]
        hyp_core = [w for w in e["hypothesis"].split() if w not in MODIFIERS]
        place = [w for w in premise_core if w in STATES["prep"]]
        if place:          # the reduction drops "prep det place": the place noun follows the preposition
            i = premise_core.index(place[0])
            premise_core = premise_core[:i] + premise_core[i + 2:]
        diffs = sum(a != b for a, b in zip(premise_core, hyp_core))
        assert len(premise_core) == len(hyp_core) and diffs == e["label"]


def test_similarity_label_is_whether_the_cores_match_and_is_symmetric():
    data = T.similarity((400, 0, 0), seed=1)
    core = lambda s: [w for w in s.split() if w not in MODIFIERS]
    for e in data.train:
        assert valid(e["a"]) and valid(e["b"])
        assert e["label"] == (core(e["a"]) == core(e["b"])) == (core(e["b"]) == core(e["a"]))
    assert binomial_ok(sum(e["label"] for e in data.train), 400, 0.5)


def test_multiple_choice_has_exactly_one_grammatical_ending():
    data = T.multiple_choice((200, 0, 0), seed=1)
    for e in data.train:
        ok = [valid(e["context"] + " " + c) for c in e["choices"]]
        assert len(e["choices"]) == 4 and ok.count(True) == 1 and ok.index(True) == e["label"]
    assert binomial_ok(sum(e["label"] == 0 for e in data.train), 200, 0.25)


def test_span_qa_answer_is_the_unique_subject_span():
    for e in T.span_qa((300, 0, 0), seed=1).train:
        assert e["context"][e["start"]:e["end"]] == e["answer"]
        predicate = e["question"][len("who "):-len(" ?")]
        sentences = [s.strip() for s in e["context"].split(" .") if s.strip()]
        owners = [s for s in sentences if s.endswith(" " + predicate) and s[:-len(predicate) - 1].split()[-1]
                  in {w for st in ("animal", "man", "woman", "king", "queen") for w in STATES[st]}]
        assert owners == [e["answer"] + " " + predicate]


def test_tagging_tags_and_senses():
    data = T.tagging((300, 0, 0), seed=1)
    senses = set()
    for e in data.train:
        assert len(e["words"]) == len(e["tags"]) == len(e["senses"]) and set(e["tags"]) <= set(data.labels)
        for w, t, s in zip(e["words"], e["tags"], e["senses"]):
            assert (s is not None) == (w in ("bank", "bat"))
            if s:
                senses.add(s)
                assert t == {"bank/river": "PLACE", "bank/money": "MONEY", "bat/animal": "ANIMAL",
                             "bat/thing": "THING"}[s]
    assert senses == {"bank/river", "bank/money", "bat/animal", "bat/thing"}


def test_translation_by_hand_and_one_word_per_sense():
    lex = X.lexicon()
    assert len(set(lex.values())) == len(lex)
    assert lex[("bank", "bank/river")] != lex[("bank", "bank/money")]
    got = X.translate("the old cat sees a fish .".split(), ["det_s", "adj_s", "animal", "verb_t_n", "det_o_n", "food", "stop"])
    assert got == [lex[("the", None)], lex[("cat", None)], lex[("old", None)], lex[("sees", None)],
                   lex[("a", None)], lex[("fish", None)], "."]


def test_reversal_and_compression():
    for e in X.reversal((100, 0, 0), seed=1).train:
        assert e["target"].split()[:-1] == e["source"].split()[-2::-1]
    for e in X.compression((100, 0, 0), seed=1).train:
        target = e["target"].split()
        assert not set(target) & {w for s in ADJECTIVE_STATES for w in STATES[s]}
        assert not set(target) & set(STATES["prep"]) and target.count(".") == e["source"].split().count(".")


def test_dialogue_replies_pick_up_the_subject_or_are_bland():
    data = X.dialogue((500, 0, 0), seed=1, p_bland=0.4)
    replies = bland = 0
    subjects = {w for st in ("animal", "man", "woman", "king", "queen") for w in STATES[st]}
    for e in data.train:
        assert 2 <= len(e["turns"]) <= 4 and not e["bland"][0]
        for k in range(1, len(e["turns"])):
            if e["bland"][k - 1]:
                continue                    # a new topic follows a bland reply
            replies += 1
            bland += e["bland"][k]
            if e["bland"][k]:
                assert e["turns"][k] in X.BLAND
            else:
                subj = lambda t: next(w for w in t.split() if w in subjects)
                assert subj(e["turns"][k]) == subj(e["turns"][k - 1])
    assert binomial_ok(bland, replies, 0.4)


def test_bad_input():
    with pytest.raises(ValueError, match="sizes"):
        T.sentiment((10, -1, 5))
    with pytest.raises(ValueError, match="only .* distinct"):
        T.make_splits("coin", lambda rng: {"x": int(rng.integers(2))}, lambda e: e["x"], (3, 0, 0), seed=0)
    with pytest.raises(ValueError, match="n_choices"):
        T.multiple_choice(n_choices=1)
    with pytest.raises(KeyError, match="split"):
        T.tagging((5, 1, 1)).split("dev")
    with pytest.raises(ValueError, match="p_bland"):
        X.dialogue(p_bland=1.5)


def test_word_tokenizer_covers_every_task_and_the_stream_has_an_oracle():
    from minipt.data.toy_words import toy_word_stream, word_tokenizer
    tok = word_tokenizer()
    unk = tok.token_to_id("<unk>")
    texts = [e["text"] for e in T.sentiment((50, 0, 0)).train] + [e["question"] for e in T.span_qa((50, 0, 0)).train]
    texts += [e["target"] for e in X.translation((50, 0, 0)).train] + [t for e in X.dialogue((50, 0, 0)).train for t in e["turns"]]
    for t in texts:
        assert unk not in tok.encode(t) and tok.decode(tok.encode(t)) == t
    stream, oracle = toy_word_stream(5000, block_size=16, batch_size=4, seed=0)
    assert tok.token_to_id("[PAD]") == 0 and 1.0 < oracle < 3.0
    assert tok.token_to_id("<|endoftext|>") in stream.splits["train"]
