"""The toy tasks in BERT's input format: [CLS] A [SEP] B [SEP], segments, padding, tags on
first pieces, answer spans mapped to tokens, the truncation rule and bad input."""
import numpy as np
import pytest

from minipt.core.module import Module
from minipt.data import toy_tasks as T
from minipt.models.protocol import IGNORE
from minipt.tasks.bert_inputs import (
    BertTaskBatches,
    encode_example,
    make_batch,
    score,
    score_items,
)
from minipt.tokenizers.special import BERT_SPECIALS
from minipt.tokenizers.wordpiece import WordPieceTokenizer

# "king" and "queen" split into pieces, so the word -> piece alignment is exercised
WORDS = ["the", "a", "old", "sees", "rules", "his", "her", "gold", "near", "river", ".", "?", "who",
         "k", "##ing", "qu", "##een", "cat", "fish", "eats"]
TOK = WordPieceTokenizer.from_vocab(list(BERT_SPECIALS) + WORDS)
PAD, UNK, CLS, SEP, MASK = range(5)
ids = lambda s: TOK.encode(s)


def test_single_sentence_and_pair_layout():
    x = encode_example("sentiment", {"text": "the old king rules .", "label": 1}, TOK, 32)
    assert x["ids"] == [CLS] + ids("the old king rules .") + [SEP] and x["segments"] == [0] * 8 and x["label"] == 1
    x = encode_example("entailment", {"premise": "the king rules .", "hypothesis": "a queen rules .", "label": 0},
                       TOK, 32)
    a, b = ids("the king rules ."), ids("a queen rules .")
    assert x["ids"] == [CLS] + a + [SEP] + b + [SEP]
    assert x["segments"] == [0] * (len(a) + 2) + [1] * (len(b) + 1)


def test_tags_sit_on_the_first_piece_of_each_word():
    x = encode_example("tagging", {"words": ["the", "king", "rules", "."], "tags": ["DET", "ROYAL", "VERB", "PUNCT"]},
                       TOK, 32)
    assert x["ids"] == [CLS, *ids("the"), *ids("king"), *ids("rules"), *ids("."), SEP]
    tag = T.TAG_SET.index
    assert x["tags"] == [IGNORE, tag("DET"), tag("ROYAL"), IGNORE, tag("VERB"), tag("PUNCT"), IGNORE]


def test_answer_span_maps_to_the_tokens_of_the_answer_words():
    context = "the cat eats a fish . the old queen sees her gold ."
    ex = {"context": context, "question": "who sees her gold ?", "answer": "the old queen",
          "start": context.index("the old queen"), "end": context.index("the old queen") + len("the old queen")}
    x = encode_example("span_qa", ex, TOK, 64)
    q = ids("who sees her gold ?")
    assert x["ids"][:len(q) + 2] == [CLS] + q + [SEP] and x["ids"][-1] == SEP
    assert TOK.decode(x["ids"][x["start"]:x["end"] + 1]) == "the old queen"
    assert x["ids"][x["end"]] == TOK.token_to_id("##een")              # the last piece of the last word
    assert x["context"] == [0] * (len(q) + 2) + [1] * (len(x["ids"]) - len(q) - 3) + [0]
    assert x["segments"] == [0] * (len(q) + 2) + [1] * (len(x["ids"]) - len(q) - 2)


def test_every_generated_answer_round_trips_through_the_tokens():
    data = T.span_qa((20, 0, 0), seed=3)
    toks = WordPieceTokenizer.from_vocab(list(BERT_SPECIALS) + sorted({w for e in data.train for w in
                                                                      (e["context"] + " " + e["question"]).split()}))
    batch = make_batch("span_qa", data.train, toks, 128)
    ids_, segments, mask, context, start, end = batch
    for b, ex in enumerate(data.train):
        assert toks.decode(ids_[b, start[b]:end[b] + 1].tolist()) == ex["answer"]
        assert context[b, start[b]] and context[b, end[b]] and mask[b, end[b]]


def test_pairs_are_truncated_longest_first():
    a, b = ids("the old king sees his gold near the river ."), ids("the king sees his gold .")
    x = encode_example("entailment", {"premise": "the old king sees his gold near the river .",
                                      "hypothesis": "the king sees his gold .", "label": 1}, TOK, 12)
    assert len(x["ids"]) == 12 and x["ids"].count(SEP) == 2
    assert x["ids"] == [CLS] + a[:4] + [SEP] + b[:5] + [SEP]           # 11 + 7 pieces: A loses 7, B 2


def test_too_long_examples_and_bad_spans_are_refused():
    long = {"text": " ".join(["the"] * 40), "label": 0}
    with pytest.raises(ValueError, match="42 tokens .* more than max_length 32"):
        encode_example("sentiment", long, TOK, 32)
    with pytest.raises(ValueError, match="span_qa: the example has"):
        encode_example("span_qa", {"context": "the cat eats a fish .", "question": "who eats a fish ?",
                                   "start": 0, "end": 7}, TOK, 10)
    with pytest.raises(ValueError, match=r"answer span \[0, 99\) is outside the context of 21 characters"):
        encode_example("span_qa", {"context": "the cat eats a fish .", "question": "who ?", "start": 0, "end": 99},
                       TOK, 64)
    with pytest.raises(ValueError, match="word boundaries"):
        encode_example("span_qa", {"context": "the cat eats a fish .", "question": "who ?", "start": 1, "end": 7},
                       TOK, 64)
    with pytest.raises(ValueError, match="not one of the tag set"):
        encode_example("tagging", {"words": ["the"], "tags": ["NOPE"]}, TOK, 64)
    with pytest.raises(ValueError, match="unknown task 'parsing'"):
        encode_example("parsing", {}, TOK, 64)
    with pytest.raises(ValueError, match="no examples"):
        make_batch("sentiment", [], TOK, 64)


def test_batches_pad_and_score_counts_right_answers():
    data = T.sentiment((6, 0, 4), seed=0)
    tok = WordPieceTokenizer.from_vocab(list(BERT_SPECIALS) + sorted({w for e in data.train + data.test
                                                                      for w in e["text"].split()}))
    batches = BertTaskBatches("sentiment", data, tok, 32, batch_size=3)
    ids_, segments, mask, labels = batches.get_batch("train", np.random.default_rng(0))
    assert ids_.shape[0] == 3 and (ids_[mask == 0] == PAD).all() and (ids_[:, 0] == CLS).all()

    class Always(Module):                             # a stand-in model that always says "positive"
        def forward(self, *batch):
            return None, np.tile([0.0, 1.0], (len(batch[0]), 1))
    want = np.mean([e["label"] == 1 for e in data.test])
    assert score(Always(), batches, "test") == pytest.approx(want)
    per_item = score_items(Always(), batches, "test")            # one score per test sentence, in order
    assert per_item.tolist() == [float(e["label"] == 1) for e in data.test]
