"""The BERT-family pre-training data: stories, pairs, truncation, packing, masking, errors."""
import numpy as np
import pytest

from minipt.data.encoder_corpus import (
    PLACES,
    EncoderCorpus,
    encode_documents,
    encoder_corpus,
    story_documents,
    wordpiece_tokenizer,
)
from minipt.data.toy_domains import domain_language
from minipt.data.toy_grammar import STATES, SUBJECT_STATES
from minipt.objectives.common import IGNORE
from minipt.objectives.sentence_pairs import truncate_pair

SUBJECT_WORDS = {w for s in SUBJECT_STATES for w in STATES[s]}
SMALL = dict(n_docs=60, n_instances={"train": 300, "val": 60}, batch_size=16)


@pytest.fixture(scope="module")
def nsp():
    return encoder_corpus(mode="nsp", **SMALL)


@pytest.fixture(scope="module")
def sop():
    return encoder_corpus(mode="sop", **SMALL)


def _words(tok, ids) -> list[list[str]]:
    """The segments of one instance as lists of words (between [CLS]/[SEP] markers)."""
    text = tok.decode([int(i) for i in ids if i != tok.special_tokens["[PAD]"]])
    parts = [p.split() for p in text.replace("[CLS]", "").split("[SEP]")]
    return [p for p in parts if p]


def _hero_and_place(words):
    return next(w for w in words if w in SUBJECT_WORDS), words[-2]


def test_stories_keep_a_protagonist_and_follow_the_journey():
    docs, domains = story_documents(30, np.random.default_rng(0), min_sentences=3, max_sentences=5,
                                    with_domains=True)
    assert len(docs) == 30 and all(3 <= len(d) <= 5 for d in docs)
    assert set(domains) == {"general", "court"}
    for doc, domain in zip(docs, domains):
        lang = domain_language(domain)
        heroes = {_hero_and_place(s)[0] for s in doc}
        assert len(heroes) == 1
        places = [PLACES.index(_hero_and_place(s)[1]) for s in doc]
        assert all((b - a) % len(PLACES) == 1 for a, b in zip(places, places[1:]))
        for s in doc:                                   # every sentence is one of its domain's
            assert s[-1] == "." and np.isfinite(lang.log_prob(s))
    again = story_documents(30, np.random.default_rng(0), min_sentences=3, max_sentences=5)
    assert again == docs


def test_a_domain_shows_in_the_words():
    docs, domains = story_documents(400, np.random.default_rng(1), with_domains=True)
    share = {d: np.mean([w in ("rules", "reigns", "speaks") for doc, dd in zip(docs, domains) if dd == d
                         for s in doc for w in s]) for d in ("general", "court")}
    assert share["court"] > 2 * share["general"]       # royal verbs: the court's topic
    every = {d: np.mean([s[0] == "every" for doc, dd in zip(docs, domains) if dd == d for s in doc])
             for d in ("general", "court")}
    assert every["court"] > 3 * every["general"]       # reversed word frequencies


def test_nsp_pairs_layout_labels_and_the_next_sentence(nsp):
    tok = nsp.tok
    assert [tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    labels = np.array([x[2] for x in nsp.instances["train"]])
    assert 0.4 < labels.mean() < 0.6
    for ids, seg, label in nsp.instances["train"][:100]:
        assert ids[0] == nsp.cls_id and ids[-1] == nsp.sep_id and len(ids) <= nsp.max_length
        first_sep = int(np.flatnonzero(ids == nsp.sep_id)[0])
        assert (seg[:first_sep + 1] == 0).all() and (seg[first_sep + 1:] == 1).all()
        a, b = _words(tok, ids)
        (ha, pa), (hb, pb) = _hero_and_place(a), _hero_and_place(b)
        if label == 1:                                   # IsNext: same story, one step on
            assert ha == hb and (PLACES.index(pb) - PLACES.index(pa)) % len(PLACES) == 1


def test_sop_swapped_pairs_go_one_place_backwards(sop):
    labels = np.array([x[2] for x in sop.instances["train"]])
    assert 0.4 < labels.mean() < 0.6
    for ids, _, label in sop.instances["train"][:100]:
        a, b = _words(sop.tok, ids)
        (ha, pa), (hb, pb) = _hero_and_place(a), _hero_and_place(b)
        assert ha == hb                                  # always the same story
        assert (PLACES.index(pb) - PLACES.index(pa)) % len(PLACES) == (1 if label == 1 else len(PLACES) - 1)


def _bag_probe_accuracy(corpus) -> float:
    """Held-out accuracy of a ridge-regression probe on the bag of (token, segment)
    counts: the best any cue that adds up over tokens can do."""
    def bags(split):
        x = np.zeros((len(corpus.instances[split]), 2 * corpus.vocab_size + 1))
        for n, (ids, seg, _) in enumerate(corpus.instances[split]):
            np.add.at(x[n], ids + corpus.vocab_size * seg, 1)
        x[:, -1] = 1                                                    # bias
        return x, np.array([lab for _, _, lab in corpus.instances[split]])
    (x, y), (x_val, y_val) = bags("train"), bags("val")
    w = np.linalg.solve(x.T @ x + 1e-2 * np.eye(x.shape[1]), x.T @ (2.0 * y - 1))
    return float(((x_val @ w > 0) == y_val).mean())


@pytest.mark.slow
def test_sop_on_a_cycle_has_no_additive_cue_on_a_path_it_has():
    """issue 32: on a cycle every place is as often first as second in both classes, so
    no f(A's place) + g(B's place) separates in-order from swapped (summed over the cycle
    both classes have the same total); the label is an interaction of two tokens only. A
    path (a fixed order, no wrap-around) gives rank(B) - rank(A)."""
    kw = dict(mode="sop", n_docs=150, n_instances={"train": 2000, "val": 600}, seed=1)
    cycle, path = encoder_corpus(journey="cycle", **kw), encoder_corpus(journey="path", **kw)
    assert _bag_probe_accuracy(cycle) < 0.58                     # chance: se 0.02 on 600 pairs
    assert _bag_probe_accuracy(path) > 0.97
    docs = story_documents(200, np.random.default_rng(0), journey="path")
    for doc in docs:
        places = [PLACES.index(_hero_and_place(s)[1]) for s in doc]
        assert places == list(range(places[0], places[0] + len(doc)))          # never wraps
    assert {PLACES.index(_hero_and_place(d[0])[1]) for d in docs} == set(range(len(PLACES) - 2))  # n >= 3
    with pytest.raises(ValueError, match="journey must be one of"):
        story_documents(3, np.random.default_rng(0), journey="loop")
    with pytest.raises(ValueError, match="visits each of the 7 places once"):
        story_documents(3, np.random.default_rng(0), journey="path", max_sentences=8)


def test_truncation_is_longest_first_and_keeps_every_pair_within_max_length():
    a, b = truncate_pair(list(range(10)), list(range(100, 104)), 12)
    assert a == list(range(5)) and b == list(range(100, 104))            # only A (longer) lost tokens
    a, b = truncate_pair([1, 2, 3], [4, 5, 6], 8)                         # ties: A loses first
    assert (a, b) == ([1, 2], [4, 5, 6])
    with pytest.raises(ValueError, match="at least 5"):
        truncate_pair([1], [2], 4)
    short = encoder_corpus(mode="nsp", max_length=12, **SMALL)
    assert max(len(x[0]) for x in short.instances["train"]) == 12
    for ids, seg, _ in short.instances["train"]:
        assert (ids == short.sep_id).sum() == 2 and seg[-1] == 1        # both segments survive


def test_batches_pad_mask_and_never_mask_padding(nsp):
    ids, seg, att, mlm, labels = nsp.get_batch("train", np.random.default_rng(0))
    assert ids.shape == seg.shape == att.shape == mlm.shape and labels.shape == (16,)
    clean, _, att2, _ = nsp.unmasked("train", np.random.default_rng(0))
    np.testing.assert_array_equal(att, att2)
    np.testing.assert_array_equal(att, (clean != nsp.pad_id).astype(int))
    assert att.sum(1).max() == ids.shape[1]                               # padded to the longest row
    chosen = mlm != IGNORE
    assert chosen.any() and not chosen[att == 0].any()
    assert not np.isin(clean[chosen], nsp.special_ids).any()              # specials are never chosen
    np.testing.assert_array_equal(mlm[chosen], clean[chosen])             # targets are the originals
    np.testing.assert_array_equal(ids[~chosen], clean[~chosen])


def test_masking_rates_are_bert_80_10_10(nsp):
    rng = np.random.default_rng(1)
    n_maskable = n_chosen = n_mask = n_same = 0
    for _ in range(60):
        ids, _, _, mlm, _ = nsp.get_batch("train", rng)
        clean = np.where(mlm != IGNORE, mlm, ids)
        chosen = mlm != IGNORE
        n_maskable += np.isin(clean, nsp.special_ids, invert=True).sum()
        n_chosen += chosen.sum()
        n_mask += (ids[chosen] == nsp.mask_id).sum()
        n_same += (ids[chosen] == mlm[chosen]).sum()
    assert abs(n_chosen / n_maskable - 0.15) < 0.015
    assert abs(n_mask / n_chosen - 0.8) < 0.03
    assert abs(n_same / n_chosen - 0.1 - 0.1 / nsp.vocab_size) < 0.03   # kept, or drawn as itself


def test_dynamic_masks_change_static_masks_come_from_fixed_copies():
    dyn = encoder_corpus(mode="nsp", **SMALL)
    a, b = (dyn.get_batch("train", np.random.default_rng(s)) for s in (0, 0))
    np.testing.assert_array_equal(a[0], b[0])                             # deterministic under a seed
    one = dict(SMALL, n_instances={"train": 1, "val": 1})                # every row is the same instance
    static = encoder_corpus(mode="nsp", masking="static", dup_factor=2, **one)
    ids = static.get_batch("train", np.random.default_rng(3))[0]
    assert len({tuple(r) for r in ids}) == 2                              # dup_factor masks, both drawn
    dynamic = encoder_corpus(mode="nsp", **one)
    ids = dynamic.get_batch("train", np.random.default_rng(3))[0]
    assert len({tuple(r) for r in ids}) > 2                               # a new mask per row


def test_packed_full_sentences_cross_documents_with_a_separator():
    packed = encoder_corpus(mode="packed", max_length=40, **SMALL)
    batch = packed.get_batch("val", np.random.default_rng(0))
    assert len(batch) == 4
    crossed = 0
    for ids, seg, _ in packed.instances["train"]:
        assert ids[0] == packed.cls_id and ids[-1] == packed.sep_id and len(ids) <= 40
        assert (seg == 0).all()
        words = packed.tok.decode(ids[1:-1]).split()
        assert words[-1] in (".", "[SEP]") or len(ids) == 40              # whole sentences only
        crossed += words.count("[SEP]")
    assert crossed > 0


def test_the_model_reads_a_batch_as_is(nsp):
    from minipt.models.encoder.bert import build
    model = build(rng=np.random.default_rng(0), vocab_size=nsp.vocab_size, max_position=nsp.max_length,
                  n_layer=1, n_head=2, d_model=16, d_ff=32)
    loss, logits = model(*nsp.get_batch("train", np.random.default_rng(0)))
    assert np.isfinite(loss) and logits.shape[-1] == nsp.vocab_size


def test_bad_input_is_refused_with_a_reason(nsp):
    rng = np.random.default_rng(0)
    docs = story_documents(4, rng)
    tok = wordpiece_tokenizer(docs, 100)
    ids = encode_documents(docs, tok)
    with pytest.raises(ValueError, match="mode"):
        EncoderCorpus({"train": ids, "val": ids}, tok, mode="mlm")
    with pytest.raises(ValueError, match="max_length"):
        EncoderCorpus({"train": ids, "val": ids}, tok, max_length=4)
    with pytest.raises(ValueError, match="val documents are empty"):
        EncoderCorpus({"train": ids, "val": []}, tok)
    with pytest.raises(ValueError, match="two documents"):
        EncoderCorpus({"train": ids, "val": ids[:1]}, tok, mode="nsp")
    with pytest.raises(ValueError, match="splits"):
        EncoderCorpus({"train": ids}, tok)
    with pytest.raises(KeyError, match="split"):
        nsp.get_batch("test", rng)
    with pytest.raises(ValueError, match="no maskable token"):
        nsp.mask(np.array([[nsp.cls_id, nsp.sep_id, nsp.pad_id]]), rng)
