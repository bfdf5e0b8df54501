"""What every tokenizer promises: the base-class contract, special tokens, save/load."""
import numpy as np
import pytest

from minipt.tokenizers import (
    BERT_SPECIALS,
    BPETokenizer,
    ByteBPETokenizer,
    CharTokenizer,
    Tokenizer,
    WordPieceTokenizer,
    WordTokenizer,
    t5_sentinels,
)

CORPUS = ("the quick brown fox jumps over the lazy dog . the lazy dog sleeps ; "
          "a quick fox is quicker than the lazier dog ! [ CLS ]\n") * 8
SPECIALS = ["[CLS]", "[SEP]", "[MASK]", "<s>", "</s>", "<|endoftext|>", *t5_sentinels(12)]


def build(kind, specials=SPECIALS):
    if kind == "char":
        return CharTokenizer(specials).fit(CORPUS)
    if kind == "word":
        return WordTokenizer(specials).fit(CORPUS)
    if kind == "bpe":
        return BPETokenizer(specials).fit(CORPUS, num_merges=40)
    if kind == "byte_bpe":
        return ByteBPETokenizer(specials).fit(CORPUS, num_merges=40)
    return WordPieceTokenizer(specials).fit(CORPUS, vocab_size=90)


KINDS = ["char", "word", "bpe", "byte_bpe", "wordpiece"]


@pytest.fixture(scope="module", params=KINDS)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def tok(kind):
    return build(kind)


def test_vocab_maps_both_ways(tok):
    assert tok.vocab_size == len({tok.id_to_token(i) for i in range(tok.vocab_size)})
    for i in range(tok.vocab_size):
        assert tok.token_to_id(tok.id_to_token(i)) == i
    with pytest.raises(IndexError, match=f"token id {tok.vocab_size} is outside"):
        tok.id_to_token(tok.vocab_size)
    with pytest.raises(KeyError, match="not in the vocabulary"):
        tok.token_to_id("no such token \u2603\u2603")


def test_encode_types(tok):
    ids = tok.encode("the lazy fox")
    assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
    arr = tok.encode_array("the lazy fox")
    assert arr.dtype == np.int64 and arr.shape == (len(ids),) and arr.tolist() == ids
    assert tok.encode("") == [] and tok.decode([]) == "" and tok.decode(np.zeros(0, np.int64)) == ""
    with pytest.raises(TypeError, match="expected a str"):
        tok.encode(b"bytes")


def test_decode_rejects_bad_ids(tok):
    V = tok.vocab_size
    with pytest.raises(IndexError, match=f"token id {V + 7} is outside the vocabulary \\[0, {V}\\)"):
        tok.decode([0, V + 7])
    with pytest.raises(IndexError, match="token id -1 is outside"):
        tok.decode(np.array([-1, 0]))
    with pytest.raises(TypeError, match="integer array"):
        tok.decode([0.5, 1.0])
    with pytest.raises(ValueError, match="1-D"):
        tok.decode(np.zeros((2, 2), np.int64))


@pytest.mark.parametrize("special", SPECIALS)
def test_special_token_is_one_id_and_never_split(tok, special):
    sid = tok.special_tokens[special]
    ids = tok.encode(f"the dog{special}the fox {special}")
    assert ids.count(sid) == 2
    assert tok.encode(special) == [sid]
    assert tok.decode([sid]) == special
    # no learned token contains a special as a substring made by merging
    learned = [tok.id_to_token(i) for i in range(tok.vocab_size) if i not in tok.special_tokens.values()]
    assert special not in learned


def test_sentinels_longest_match_first(tok):
    ids = tok.encode("<extra_id_10><extra_id_1>")
    assert ids == [tok.special_tokens["<extra_id_10>"], tok.special_tokens["<extra_id_1>"]]


def test_allow_special_false_encodes_as_text(tok):
    ids = tok.encode("the [CLS] dog", allow_special=False)
    assert tok.special_tokens["[CLS]"] not in ids


def test_skip_special_on_decode(tok):
    ids = tok.encode("[CLS]the dog[SEP]")
    assert "[CLS]" not in tok.decode(ids, skip_special=True)


def test_special_colliding_with_learned_piece_raises(tok):
    learned = next(tok.id_to_token(i) for i in range(tok.vocab_size)
                   if tok.id_to_token(i) not in tok.special_tokens and tok.id_to_token(i).strip())
    with pytest.raises(ValueError, match="collides with the learned token id"):
        tok.add_special_tokens([learned])


def test_add_special_after_fit_gets_next_id(kind):
    t = build(kind)
    V = t.vocab_size
    assert t.add_special_tokens(["<new>"]) == [V]
    assert t.encode("<new>") == [V] and t.decode([V]) == "<new>"
    assert t.add_special_tokens(["<new>"]) == [V]          # registering again is a no-op


def test_save_load_round_trip(tok, tmp_path):
    path = tmp_path / "tok.json"
    tok.save(path)
    back = Tokenizer.load(path)
    assert type(back) is type(tok)
    assert back.vocab_size == tok.vocab_size
    assert back.special_tokens == tok.special_tokens
    assert [back.id_to_token(i) for i in range(back.vocab_size)] == \
           [tok.id_to_token(i) for i in range(tok.vocab_size)]
    text = "[CLS] the quick dog is lazier than the fox [SEP] <extra_id_3> .\n"
    assert back.encode(text) == tok.encode(text)
    assert back.decode(tok.encode(text)) == tok.decode(tok.encode(text))
    assert type(tok).load(path).encode(text) == tok.encode(text)


def test_load_rejects_wrong_class_and_bad_files(tmp_path):
    path = tmp_path / "c.json"
    build("char").save(path)
    with pytest.raises(ValueError, match="holds a CharTokenizer, not a WordTokenizer"):
        WordTokenizer.load(path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    with pytest.raises(ValueError, match="not a minipt tokenizer file"):
        Tokenizer.load(bad)
    bad.write_text('{"class": "CharTokenizer", "format": 99}')
    with pytest.raises(ValueError, match="expected tokenizer format 1, got 99"):
        Tokenizer.load(bad)


@pytest.mark.parametrize("kind", KINDS)
def test_training_text_errors(kind):
    with pytest.raises(ValueError, match="training text is empty"):
        build_with_text(kind, "")
    with pytest.raises(TypeError, match="training text as a str"):
        build_with_text(kind, None)
    with pytest.raises(ValueError):                      # only special tokens: nothing to learn
        build_with_text(kind, "[CLS][SEP]")


def build_with_text(kind, text):
    if kind == "char":
        return CharTokenizer(["[CLS]", "[SEP]"]).fit(text)
    if kind == "word":
        return WordTokenizer(["[CLS]", "[SEP]"]).fit(text)
    if kind == "bpe":
        return BPETokenizer(["[CLS]", "[SEP]"]).fit(text, 5)
    if kind == "byte_bpe":
        return ByteBPETokenizer(["[CLS]", "[SEP]"]).fit(text, 5)
    return WordPieceTokenizer().fit(text, 50)


@pytest.mark.parametrize("kind", ["char", "word", "bpe", "wordpiece"])
def test_unfitted_encode_raises(kind):
    cls = {"char": CharTokenizer, "word": WordTokenizer, "bpe": BPETokenizer,
           "wordpiece": WordPieceTokenizer}[kind]
    with pytest.raises(RuntimeError, match="call fit"):
        cls().encode("hello")


def test_bad_special_tokens():
    with pytest.raises(ValueError, match="non-empty"):
        CharTokenizer([""])
    with pytest.raises(TypeError, match="expected a str"):
        CharTokenizer([3])
    with pytest.raises(TypeError, match="list of strings"):
        CharTokenizer("[CLS]")
    with pytest.raises(ValueError, match="non-negative"):
        t5_sentinels(-1)


def test_specials_first_or_last():
    assert build("wordpiece", list(BERT_SPECIALS)).special_tokens["[PAD]"] == 0
    bb = build("byte_bpe", ["<|endoftext|>"])
    assert bb.special_tokens["<|endoftext|>"] == bb.vocab_size - 1
